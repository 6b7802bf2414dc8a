//! Two roots' dpkg databases (`var/lib/dpkg/`), as dpkg reads them: `status` stanza by stanza
//! (keyed by `Package:Architecture`) and field by field, with the stanzas' order and each
//! stanza's fields' order; `diversions` and `statoverride` record by record, keyed by path;
//! `arch` and every file of `info/`, `triggers/` and `updates/` line by line; and a record left
//! in `updates/` (dpkg's journal, folded into `status` when a run ends well) as a pending one
//! even where both roots have the same.
//!
//! The formats are read here by lenient parsers of this module's own, not the engine's: the tool
//! judges what the engine wrote, and a misreading shared with the engine would hide itself. A
//! file that is not what dpkg writes is still compared (a line without a colon is a field of that
//! name with no value, a diversion missing its last lines a record with empty ones), never
//! refused and never a panic.
//!
//! Whether a file exists, and its metadata, are the tree's to compare ([`super::tree`]); this
//! module compares what is in the files both roots have.

use super::difference::{escape, Difference, Side};
use super::error::Error;
use super::walk::{Kind, Tree};
use std::collections::BTreeMap;

/// The admin directory, below a root.
pub const ADMIN: &[u8] = b"var/lib/dpkg/";

/// The files of the admin directory compared here, by their path below it.
pub struct Database {
    files: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// True for the files of the admin directory whose content this module compares, by their path
/// below the root.
pub fn owns(path: &[u8]) -> bool {
    let Some(name) = path.strip_prefix(ADMIN) else { return false };
    matches!(name, b"status" | b"diversions" | b"statoverride" | b"arch")
        || [&b"info/"[..], b"triggers/", b"updates/"].iter().any(|dir| name.starts_with(dir))
}

impl Database {
    /// Reads every file [`owns`] names from the walked `tree`.
    pub fn read(tree: &Tree) -> Result<Database, Error> {
        let mut files = BTreeMap::new();
        for (path, entry) in tree.entries.range(ADMIN.to_vec()..) {
            if !path.starts_with(ADMIN) {
                break;
            }
            if entry.kind == Kind::File && owns(path) {
                if let Some(bytes) = tree.read(path)? {
                    files.insert(path[ADMIN.len()..].to_vec(), bytes);
                }
            }
        }
        Ok(Database { files })
    }

    /// The contents of the package file lists, `info/*.list`.
    pub fn lists(&self) -> impl Iterator<Item = &[u8]> {
        self.files
            .iter()
            .filter(|(name, _)| name.starts_with(b"info/") && name.ends_with(b".list"))
            .map(|(_, bytes)| bytes.as_slice())
    }
}

/// Every difference in the content of the files both databases have.
pub fn differences(a: &Database, b: &Database) -> Vec<Difference> {
    let mut out = Vec::new();
    for (name, x) in &a.files {
        let Some(y) = b.files.get(name) else { continue };
        let subject = escape(&[ADMIN, name].concat());
        if name.starts_with(b"updates/") {
            // dpkg folds its journal into status when a run ends well: a record left behind is
            // an interrupted run, whether or not the other root has the same.
            let pending = |f: &[u8]| format!("not folded into status, {} bytes", f.len());
            out.push(Difference::new(subject.clone(), "pending", pending(x), pending(y)));
        }
        if x == y {
            continue;
        }
        match name.as_slice() {
            b"status" => status(&subject, x, y, &mut out),
            b"diversions" => records(&subject, diversions(x), diversions(y), "diversion", &mut out),
            b"statoverride" => records(&subject, overrides(x), overrides(y), "override", &mut out),
            _ => lines(&subject, x, y, &mut out),
        }
    }
    out
}

/// One stanza of `status`: its fields in order, each name with its value (continuation lines
/// kept, with their line breaks), as bytes: a field may hold any byte, and two different values
/// must never look alike once escaped.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// A `status` file's stanzas in order, each with its key `Package:Architecture` (`KEY#2` for a
/// second stanza of one key, which dpkg never writes).
fn stanzas(bytes: &[u8]) -> Vec<(Vec<u8>, Fields)> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    let mut fields: Fields = Vec::new();
    for line in bytes.split(|&b| b == b'\n').chain(std::iter::once(&b""[..])) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.trim_ascii().is_empty() {
            if !fields.is_empty() {
                let get = |n: &[u8]| value(&fields, n).unwrap_or_default();
                let key = [get(b"Package"), b":", get(b"Architecture")].concat();
                let n = seen.entry(key.clone()).or_default();
                *n += 1;
                let key = if *n == 1 { key } else { [key, format!("#{n}").into_bytes()].concat() };
                out.push((key, std::mem::take(&mut fields)));
            }
        } else if let (true, Some(last)) =
            (line.starts_with(b" ") || line.starts_with(b"\t"), fields.last_mut())
        {
            last.1.push(b'\n');
            last.1.extend_from_slice(line);
        } else {
            let at = line.iter().position(|&b| b == b':');
            let (name, value) = match at {
                Some(at) => (&line[..at], &line[at + 1..]),
                None => (line, &b""[..]),
            };
            fields.push((name.trim_ascii().to_vec(), value.trim_ascii().to_vec()));
        }
    }
    out
}

fn value<'f>(fields: &'f [(Vec<u8>, Vec<u8>)], name: &[u8]) -> Option<&'f [u8]> {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
}

/// `status`: stanzas one root has alone, fields that differ or one stanza has alone, and the
/// order of stanzas and of fields where both have the same ones.
fn status(subject: &str, a: &[u8], b: &[u8], out: &mut Vec<Difference>) {
    let (a, b) = (stanzas(a), stanzas(b));
    let (ia, ib): (BTreeMap<_, _>, BTreeMap<_, _>) = (
        a.iter().map(|(k, f)| (k.as_slice(), f)).collect(),
        b.iter().map(|(k, f)| (k.as_slice(), f)).collect(),
    );
    for (key, fa) in &ia {
        let stanza = format!("{subject}/{}", escape(key));
        match ib.get(key) {
            None => out.push(Difference::only(stanza, "stanza", Side::A, field_names(fa))),
            Some(fb) => fields(&stanza, fa, fb, out),
        }
    }
    for (key, fb) in ib.iter().filter(|(k, _)| !ia.contains_key(*k)) {
        let stanza = format!("{subject}/{}", escape(key));
        out.push(Difference::only(stanza, "stanza", Side::B, field_names(fb)));
    }
    let keys = |s: &[(Vec<u8>, Fields)], other: &BTreeMap<&[u8], &Fields>| -> Vec<Vec<u8>> {
        s.iter().map(|(k, _)| k.clone()).filter(|k| other.contains_key(k.as_slice())).collect()
    };
    order(subject, "stanza order", &keys(&a, &ib), &keys(&b, &ia), out);
}

fn fields(
    stanza: &str,
    a: &[(Vec<u8>, Vec<u8>)],
    b: &[(Vec<u8>, Vec<u8>)],
    out: &mut Vec<Difference>,
) {
    for (name, va) in a {
        let subject = format!("{stanza}/{}", escape(name));
        match value(b, name) {
            None => out.push(Difference::only(subject, "field", Side::A, escape(va))),
            Some(vb) if vb != va.as_slice() => {
                out.push(Difference::new(subject, "field", escape(va), escape(vb)));
            }
            Some(_) => {}
        }
    }
    for (name, vb) in b.iter().filter(|(n, _)| value(a, n).is_none()) {
        let subject = format!("{stanza}/{}", escape(name));
        out.push(Difference::only(subject, "field", Side::B, escape(vb)));
    }
    let names = |f: &[(Vec<u8>, Vec<u8>)], other: &[(Vec<u8>, Vec<u8>)]| -> Vec<Vec<u8>> {
        f.iter().map(|(n, _)| n.clone()).filter(|n| value(other, n).is_some()).collect()
    };
    order(stanza, "field order", &names(a, b), &names(b, a), out);
}

fn field_names(fields: &[(Vec<u8>, Vec<u8>)]) -> String {
    fields.iter().map(|(n, _)| escape(n)).collect::<Vec<_>>().join(", ")
}

/// Where two sequences of the same items part: `#N X in A, #N Y in B` at the first place.
fn order<T: AsRef<[u8]>>(
    subject: &str,
    aspect: &'static str,
    a: &[T],
    b: &[T],
    out: &mut Vec<Difference>,
) {
    if let Some(at) = a.iter().zip(b).position(|(x, y)| x.as_ref() != y.as_ref()) {
        let at_item = |s: &[T]| format!("#{} {}", at + 1, escape(s[at].as_ref()));
        out.push(Difference::new(subject.to_string(), aspect, at_item(a), at_item(b)));
    }
}

/// Records keyed by a path, each with what the file says of it.
type Records = BTreeMap<Vec<u8>, Vec<u8>>;

/// `diversions`: three lines a record, the diverted path, where it is diverted to and the
/// package (`:` for a local diversion).
fn diversions(bytes: &[u8]) -> Records {
    let lines: Vec<&[u8]> = split_lines(bytes);
    lines
        .chunks(3)
        .map(|r| {
            let get = |i: usize| r.get(i).copied().unwrap_or_default();
            (get(0).to_vec(), [&b"to "[..], get(1), b" by ", get(2)].concat())
        })
        .collect()
}

/// `statoverride`: `USER GROUP MODE PATH` a line.
fn overrides(bytes: &[u8]) -> Records {
    split_lines(bytes)
        .into_iter()
        .map(|line| {
            let mut parts = line.splitn(4, |&b| b == b' ');
            let (user, group, mode) = (parts.next(), parts.next(), parts.next());
            let path = parts.next().unwrap_or_default().to_vec();
            let what = [user, group, mode].map(Option::unwrap_or_default).join(&b' ');
            (path, what)
        })
        .collect()
}

fn records(subject: &str, a: Records, b: Records, aspect: &'static str, out: &mut Vec<Difference>) {
    for (path, x) in &a {
        let at =
            format!("{subject}{}{}", if path.starts_with(b"/") { "" } else { "/" }, escape(path));
        match b.get(path) {
            None => out.push(Difference::only(at, aspect, Side::A, escape(x))),
            Some(y) if y != x => out.push(Difference::new(at, aspect, escape(x), escape(y))),
            Some(_) => {}
        }
    }
    for (path, y) in b.iter().filter(|(p, _)| !a.contains_key(*p)) {
        let at =
            format!("{subject}{}{}", if path.starts_with(b"/") { "" } else { "/" }, escape(path));
        out.push(Difference::only(at, aspect, Side::B, escape(y)));
    }
}

fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if bytes.is_empty() {
        Vec::new()
    } else {
        bytes.split(|&b| b == b'\n').collect()
    }
}

/// A text file: each line one root has more often than the other, and where both have the same
/// lines in another order, the first place they part. A file with a NUL byte is not text: its
/// MD5s.
fn lines(subject: &str, a: &[u8], b: &[u8], out: &mut Vec<Difference>) {
    if a.contains(&0) || b.contains(&0) {
        let md5 = |x: &[u8]| {
            use md5::Digest;
            md5::Md5::digest(x).iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        out.push(Difference::new(subject.to_string(), "content", md5(a), md5(b)));
        return;
    }
    let (la, lb) = (split_lines(a), split_lines(b));
    let mut count: BTreeMap<&[u8], i64> = BTreeMap::new();
    for line in &la {
        *count.entry(line).or_default() += 1;
    }
    for line in &lb {
        *count.entry(line).or_default() -= 1;
    }
    for (line, n) in &count {
        let side = if *n > 0 { Side::A } else { Side::B };
        for _ in 0..n.unsigned_abs() {
            out.push(Difference::only(subject.to_string(), "line", side, escape(line)));
        }
    }
    if count.values().all(|n| *n == 0) {
        order(subject, "line order", &la, &lb, out);
        if a.ends_with(b"\n") != b.ends_with(b"\n") {
            let end = |x: &[u8]| {
                if x.ends_with(b"\n") {
                    "a final line feed"
                } else {
                    "no final line feed"
                }
            };
            out.push(Difference::new(subject.to_string(), "end", end(a).into(), end(b).into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(a: &[u8], b: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        status("status", a, b, &mut out);
        out.iter().map(Difference::line).collect()
    }

    #[test]
    fn status_bytes_that_are_not_utf8_stay_apart() {
        let a = b"Package: x\xff\nArchitecture: all\nVersion: 1\xfe\n";
        let b = b"Package: x\xff\nArchitecture: all\nVersion: 1\xfd\n";
        assert_eq!(lines(a, b), ["status/x\\xff:all/Version: field: 1\\xfe in A, 1\\xfd in B"]);
    }

    #[test]
    fn continuation_lines_crlf_and_lines_without_a_colon_are_read_never_refused() {
        let a =
            b"Package: p\r\nArchitecture: all\r\nDescription: d\r\n more\r\n\tand a tab\r\nodd\r\n";
        let b = b"Package: p\nArchitecture: all\nDescription: d\n more\n\tand a tab\n";
        assert_eq!(lines(a, b), ["status/p:all/odd: field only in A: "]);
    }
}
