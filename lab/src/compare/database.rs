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
/// kept, with their line breaks).
type Fields = Vec<(String, String)>;

/// A `status` file's stanzas in order, each with its key `Package:Architecture` (`KEY#2` for a
/// second stanza of one key, which dpkg never writes).
fn stanzas(bytes: &[u8]) -> Vec<(String, Fields)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fields: Fields = Vec::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if !fields.is_empty() {
                let get = |n: &str| value(&fields, n).unwrap_or_default();
                let key = format!("{}:{}", get("Package"), get("Architecture"));
                let n = seen.entry(key.clone()).or_default();
                *n += 1;
                let key = if *n == 1 { key } else { format!("{key}#{n}") };
                out.push((key, std::mem::take(&mut fields)));
            }
        } else if let (true, Some(last)) = (line.starts_with([' ', '\t']), fields.last_mut()) {
            last.1 += &format!("\n{line}");
        } else {
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            fields.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    out
}

fn value<'f>(fields: &'f [(String, String)], name: &str) -> Option<&'f str> {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// `status`: stanzas one root has alone, fields that differ or one stanza has alone, and the
/// order of stanzas and of fields where both have the same ones.
fn status(subject: &str, a: &[u8], b: &[u8], out: &mut Vec<Difference>) {
    let (a, b) = (stanzas(a), stanzas(b));
    let (ia, ib): (BTreeMap<_, _>, BTreeMap<_, _>) = (
        a.iter().map(|(k, f)| (k.as_str(), f)).collect(),
        b.iter().map(|(k, f)| (k.as_str(), f)).collect(),
    );
    for (key, fa) in &ia {
        let stanza = format!("{subject}/{}", escape(key.as_bytes()));
        match ib.get(key) {
            None => out.push(Difference::only(stanza, "stanza", Side::A, field_names(fa))),
            Some(fb) => fields(&stanza, fa, fb, out),
        }
    }
    for (key, fb) in ib.iter().filter(|(k, _)| !ia.contains_key(*k)) {
        let stanza = format!("{subject}/{}", escape(key.as_bytes()));
        out.push(Difference::only(stanza, "stanza", Side::B, field_names(fb)));
    }
    let keys = |s: &[(String, Fields)], other: &BTreeMap<&str, &Fields>| -> Vec<String> {
        s.iter().map(|(k, _)| k.clone()).filter(|k| other.contains_key(k.as_str())).collect()
    };
    order(subject, "stanza order", &keys(&a, &ib), &keys(&b, &ia), out);
}

fn fields(stanza: &str, a: &[(String, String)], b: &[(String, String)], out: &mut Vec<Difference>) {
    for (name, va) in a {
        let subject = format!("{stanza}/{}", escape(name.as_bytes()));
        match value(b, name) {
            None => out.push(Difference::only(subject, "field", Side::A, escape(va.as_bytes()))),
            Some(vb) if vb != va => {
                out.push(Difference::new(
                    subject,
                    "field",
                    escape(va.as_bytes()),
                    escape(vb.as_bytes()),
                ));
            }
            Some(_) => {}
        }
    }
    for (name, vb) in b.iter().filter(|(n, _)| value(a, n).is_none()) {
        let subject = format!("{stanza}/{}", escape(name.as_bytes()));
        out.push(Difference::only(subject, "field", Side::B, escape(vb.as_bytes())));
    }
    let names = |f: &[(String, String)], other: &[(String, String)]| -> Vec<String> {
        f.iter().map(|(n, _)| n.clone()).filter(|n| value(other, n).is_some()).collect()
    };
    order(stanza, "field order", &names(a, b), &names(b, a), out);
}

fn field_names(fields: &[(String, String)]) -> String {
    fields.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
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
