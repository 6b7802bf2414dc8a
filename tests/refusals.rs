//! Database mode refuses what dpkg refuses (issue 26, item 1): every check dpkg makes of a
//! package's input, made by `unpack` with dpkg's verdict.
//!
//! Each case is a package built here byte by byte (so that it can hold what dpkg-deb never
//! builds), run through the real dpkg and the real `unpack` on two roots that hold the same
//! installed packages (dpkg installed them in both): dpkg refuses it, and `unpack` refuses it
//! with its documented exit code (3 for the package, 1 for a conflict with the root), a message
//! naming the package file and the field or path, the root and its database byte for byte as
//! before, the two roots alike (but for the `not-installed` stanza dpkg leaves where it refused
//! a package during its extraction), and the real dpkg reading the root as it reads its own
//! (`dpkg-query -W`, `dpkg --audit`). The container and archive cases are refused by plain
//! `unpack` too, without a database, the root left empty. Where dpkg accepts, both roots end up
//! the same. The classes, and what dpkg does with each, are in docs/database.md.

mod common;

use common::deb_builder::ar;
use common::dpkg::*;
use common::{snapshot, Run};
use std::path::{Path, PathBuf};
use tar::{EntryType, Header};

/// One tar record: a header, filled in raw where the tar crate would refuse the value, and the
/// bytes after it.
struct Rec {
    header: Header,
    data: Vec<u8>,
}

/// A record for `path` (at most 100 bytes) of type `kind` holding `data`: mode 0644 (0755 for
/// directories), mtime 1700000000, owner 0:0, as dpkg-deb writes them (GNU format).
fn rec(path: &[u8], kind: EntryType, data: &[u8]) -> Rec {
    let mut header = Header::new_gnu();
    header.as_old_mut().name[..path.len()].copy_from_slice(path);
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(if kind == EntryType::Directory { 0o755 } else { 0o644 });
    header.set_mtime(1_700_000_000);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    Rec { header, data: data.to_vec() }
}

fn file(path: &str, data: &[u8]) -> Rec {
    rec(path.as_bytes(), EntryType::Regular, data)
}

fn dir(path: &str) -> Rec {
    rec(path.as_bytes(), EntryType::Directory, b"")
}

/// A GNU `L` record naming the next entry (any length), then that entry.
fn long(path: &[u8], kind: EntryType, data: &[u8]) -> [Rec; 2] {
    let mut name = path.to_vec();
    name.push(0);
    [rec(b"././@LongLink", EntryType::GNULongName, &name), rec(b"./long", kind, data)]
}

/// A PAX record of type `kind` (`x` or `g`) with one `key=value`.
fn pax(kind: EntryType, key: &str, value: &str) -> Rec {
    let rest = key.len() + value.len() + 3;
    let mut len = rest + 1;
    while len.to_string().len() + rest != len {
        len += 1;
    }
    rec(b"./PaxHeaders/x", kind, format!("{len} {key}={value}\n").as_bytes())
}

/// The records as a tar stream: each padded to 512 bytes, then the two end blocks.
fn tar(recs: impl IntoIterator<Item = Rec>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        out.extend_from_slice(r.header.as_bytes());
        out.extend_from_slice(&r.data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// The directories of a package `name`'s tree and its one file, `/usr/share/NAME/f`.
fn tree(name: &str) -> Vec<Rec> {
    vec![
        dir("./"),
        dir("./usr/"),
        dir("./usr/share/"),
        dir(&format!("./usr/share/{name}/")),
        file(&format!("./usr/share/{name}/f"), b"a file of the package\n"),
    ]
}

/// The control text of package `name` 1.0, `all`, with `extra` fields after the usual ones.
fn control(name: &str, extra: &str) -> String {
    format!(
        "Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: Refusals <r@example.org>\nDescription: a case of tests/refusals.rs\n{extra}"
    )
}

/// The parts of a package, each replaceable by a case.
struct Parts {
    binary: Vec<u8>,
    control_name: String,
    /// Members of control.tar besides `control`: (name, bytes).
    members: Vec<(String, Vec<u8>)>,
    control: String,
    data_name: String,
    data: Vec<u8>,
}

impl Parts {
    /// Package `name` as dpkg-deb would build it: `2.0`, an uncompressed control.tar and data.tar.
    fn new(name: &str) -> Parts {
        Parts {
            binary: b"2.0\n".to_vec(),
            control_name: "control.tar".into(),
            members: Vec::new(),
            control: control(name, ""),
            data_name: "data.tar".into(),
            data: tar(tree(name)),
        }
    }

    /// The .deb's bytes.
    fn bytes(&self) -> Vec<u8> {
        let mut control = vec![file("./control", self.control.as_bytes())];
        control.extend(self.members.iter().map(|(n, b)| file(&format!("./{n}"), b)));
        ar(&[
            ("debian-binary", &self.binary),
            (&self.control_name, &tar(control)),
            (&self.data_name, &self.data),
        ])
    }

    /// Written as `dir/file`.
    fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, self.bytes()).unwrap();
        path
    }
}

/// How dpkg and `unpack` refuse a case.
struct Refusal {
    /// unpack's exit code.
    code: i32,
    /// Words unpack's message must hold (besides the package file's name).
    says: Vec<String>,
    /// Words of dpkg's message.
    dpkg_says: String,
    /// Whether plain `unpack`, without a database, refuses it too (the container and archive
    /// checks).
    plain: bool,
}

fn refusal(code: i32, says: &[&str], dpkg_says: &str, plain: bool) -> Refusal {
    Refusal {
        code,
        says: says.iter().map(|s| s.to_string()).collect(),
        dpkg_says: dpkg_says.into(),
        plain,
    }
}

/// A fake `dpkg` of architecture amd64 (the root's native architecture, as `unpack` reads it)
/// and a package of the root, for both roots of a test to hold, installed by dpkg.
fn installed(dir: &Path) -> Vec<PathBuf> {
    let fake = Parts {
        control: "Package: dpkg\nVersion: 1.21.23\nArchitecture: amd64\nMaintainer: m <m@example.org>\nDescription: the root's native architecture\n".into(),
        ..Parts::new("dpkg")
    };
    let mut base = Parts::new("refusal-base");
    base.data = tar(tree("refusal-base"));
    vec![fake.write(dir, "dpkg.deb"), base.write(dir, "refusal-base.deb")]
}

/// Two roots (dpkg's and ours) holding what [`installed`] makes, installed by dpkg.
fn roots(debs: &Path, what: &str) -> Oracle {
    let o = Oracle::new(what);
    let installed = installed(debs);
    let installed: Vec<&Path> = installed.iter().map(PathBuf::as_path).collect();
    o.both(|root| Via::Dpkg.install(root, &installed, &[]));
    o
}

/// A root's database as the comparison sees it: the `not-installed` stanzas dpkg leaves where
/// it refused a package during its extraction left out (unpack leaves none: docs/database.md).
fn settled(root: &Path) -> DbSnapshot {
    let mut s = DbSnapshot::take(root);
    let leftovers: Vec<String> = s
        .status
        .iter()
        .filter(|(_, f)| f.iter().any(|(n, v)| n == "Status" && v == "install ok not-installed"))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &leftovers {
        s.status.remove(k);
    }
    s.status_order.retain(|k| !leftovers.contains(k));
    s
}

/// `unpack -s fsync DEB ROOT`.
fn ours(deb: &Path, root: &Path) -> Run {
    common::unpack(["-s".as_ref(), "fsync".as_ref(), deb.as_os_str(), root.as_os_str()])
}

/// `dpkg --unpack DEB` with dependencies left to apt.
fn theirs(deb: &Path, root: &Path) -> Run {
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(["--unpack", deb.to_str().unwrap()]);
    dpkg(root, &args)
}

/// Asserts unpack's refusal of `deb` said what it must: the exit code, `unpack: error: `, the
/// package file's name and each of `says`.
fn assert_says(r: &Run, deb: &Path, code: i32, says: &[String], what: &str) {
    let name = deb.file_name().unwrap().to_str().unwrap();
    assert_eq!(r.code, code, "{what}: unpack's exit code:\n{}{}", r.stdout, r.stderr);
    assert!(r.stderr.starts_with("unpack: error: "), "{what}: {}", r.stderr);
    for word in says.iter().map(String::as_str).chain([name]) {
        assert!(r.stderr.contains(word), "{what}: '{word}' not in: {}", r.stderr);
    }
}

/// Runs one refused case in `o`'s roots: dpkg refuses; unpack refuses as `how` says, its root
/// byte for byte as before; the roots alike; dpkg reads ours as it reads its own. Then, for an
/// archive case, plain unpack refuses it too.
fn both_refuse(o: &Oracle, deb: &Path, how: &Refusal, what: &str) {
    let dpkg_run = theirs(deb, o.theirs.path());
    assert_eq!(
        dpkg_run.code, 1,
        "{what}: dpkg accepted it:\n{}{}",
        dpkg_run.stdout, dpkg_run.stderr
    );
    assert!(
        dpkg_run.stderr.contains(&how.dpkg_says),
        "{what}: dpkg said otherwise: {}",
        dpkg_run.stderr
    );
    let status = o.ours.admindir().join("status");
    let (before, status_before) =
        (DbSnapshot::take(o.ours.path()), std::fs::read(&status).unwrap());
    assert_says(&ours(deb, o.ours.path()), deb, how.code, &how.says, what);
    assert_same_db(
        &DbSnapshot::take(o.ours.path()),
        &before,
        &format!("{what}: ours against before"),
    );
    assert_eq!(std::fs::read(&status).unwrap(), status_before, "{what}: status changed");
    assert_same_db(&settled(o.ours.path()), &settled(o.theirs.path()), what);
    for query in [&["-W"][..], &["-W", "-f=${Status} ${binary:Package} ${Version}\n"]] {
        let r = tool("dpkg-query", o.ours.path(), query);
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{what}: dpkg-query {query:?} on ours");
    }
    let audits = [o.ours.path(), o.theirs.path()].map(|r| dpkg(r, &["--audit"]));
    assert_eq!(
        (audits[0].code, &audits[0].stdout, &audits[0].stderr),
        (audits[1].code, &audits[1].stdout, &audits[1].stderr),
        "{what}: dpkg --audit, ours then dpkg's"
    );
    if how.plain {
        let root = tempfile::tempdir().unwrap();
        let r = common::unpack([
            "-s".as_ref(),
            "none".as_ref(),
            deb.as_os_str(),
            root.path().as_os_str(),
        ]);
        assert_says(&r, deb, 3, &how.says, &format!("{what}, plain unpack"));
        assert!(snapshot(root.path()).is_empty(), "{what}: plain unpack wrote into the root");
    }
}

/// The container (src/deb/extract.c, lib/dpkg/ar.c, lib/dpkg/deb-version.c): debian-binary's
/// format version as dpkg parses it, the control member's compressions, the ar size field.
/// Exit 3, with a database or without.
#[test]
fn containers_dpkg_refuses_are_refused_with_or_without_a_database() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "containers");
    let versions: [(&str, &[u8], &str, &str); 6] = [
        ("no-dot", b"2\n", "format version has no dot", "format version has no dot"),
        (
            "empty-minor",
            b"2.\n",
            "format version with empty minor component",
            "format version with empty minor component",
        ),
        (
            "leading-space",
            b" 2.0\n",
            "format version with empty major component",
            "format version with empty major component",
        ),
        (
            "junk",
            b"2.0junk\n",
            "format version followed by junk",
            "format version followed by junk",
        ),
        ("no-newline", b"2.9", "no newlines", "archive has no newlines in header"),
        ("nul-first", b"2.0\0\n", "no newlines", "archive has no newlines in header"),
    ];
    for (name, binary, says, dpkg_says) in versions {
        let mut parts = Parts::new("refused");
        parts.binary = binary.to_vec();
        let deb = parts.write(debs.path(), &format!("binary-{name}.deb"));
        both_refuse(&o, &deb, &refusal(3, &["debian-binary", says], dpkg_says, true), name);
    }
    for compression in ["bz2", "lzma"] {
        let mut parts = Parts::new("refused");
        parts.control_name = format!("control.tar.{compression}");
        let deb = parts.write(debs.path(), &format!("control-{compression}.deb"));
        let says = format!("control.tar.{compression}");
        let dpkg_says = format!("uses unknown compression for member 'control.tar.{compression}'");
        both_refuse(&o, &deb, &refusal(3, &[&says], &dpkg_says, true), &says);
    }
    // The ar size field of debian-binary with a `+`: dpkg reads digits only.
    let mut bytes = Parts::new("refused").bytes();
    let field = 8 + 48;
    assert_eq!(&bytes[field..field + 2], b"4 ");
    bytes[field..field + 2].copy_from_slice(b"+4");
    let deb = debs.path().join("size-plus.deb");
    std::fs::write(&deb, bytes).unwrap();
    let how = refusal(
        3,
        &["invalid character '+'", "debian-binary"],
        "invalid character '+' in archive",
        true,
    );
    both_refuse(&o, &deb, &how, "ar size with +");
    // What dpkg accepts: a major version of leading zeros, any minor, junk after the first line.
    for (i, binary) in [&b"02.0\n"[..], b"2.9\n", b"2.0\nwhatever follows\n"].iter().enumerate() {
        let mut parts = Parts::new(&format!("binary{i}"));
        parts.binary = binary.to_vec();
        let deb = parts.write(debs.path(), &format!("binary{i}.deb"));
        Oracle::new(&format!("debian-binary {binary:?}")).unpack(&[&deb]);
    }
}

/// The data archive as dpkg's tar reader (lib/dpkg/tarfn.c) and tarobject (src/main/archives.c)
/// read it: PAX headers, the contiguous type `7` and the other types dpkg refuses, a newline in
/// a name (which would be two lines of info/PKG.list), a path longer than dpkg's database holds.
/// Exit 3, with a database or without.
#[test]
fn archives_dpkg_refuses_are_refused_with_or_without_a_database() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "archives");
    let f = |path: &str| file(path, b"x\n");
    let cases: Vec<(&str, Vec<Rec>, &str, &str)> = vec![
        (
            "pax-x",
            vec![pax(EntryType::XHeader, "mtime", "1700000000.5"), f("./usr/share/refused/f")],
            "unsupported PAX tar header type 'x'",
            "unsupported PAX tar header type 'x'",
        ),
        (
            "pax-g",
            vec![dir("./"), pax(EntryType::XGlobalHeader, "comment", "hi"), f("./f")],
            "unsupported PAX tar header type 'g'",
            "unsupported PAX tar header type 'g'",
        ),
        (
            "contiguous",
            vec![dir("./"), rec(b"./usr/share/refused-7", EntryType::Continuous, b"x\n")],
            "unknown tar header type '7'",
            "unknown tar header type '7'",
        ),
        (
            "gnu-volume",
            vec![dir("./"), rec(b"./volume", EntryType::new(b'V'), b"")],
            "unsupported GNU tar header type 'V'",
            "unsupported GNU tar header type 'V'",
        ),
        (
            "solaris-acl",
            vec![dir("./"), rec(b"./acl", EntryType::new(b'A'), b"")],
            "unsupported Solaris tar header type 'A'",
            "unsupported Solaris tar header type 'A'",
        ),
        (
            "newline",
            vec![dir("./"), dir("./usr/"), f("./usr/a\netc/shadow")],
            "newline not allowed in archive object name",
            "newline not allowed in archive object name",
        ),
        (
            "path-4096",
            deep("refused", 4096),
            "a path of 4096 bytes is longer than the 4095",
            "File name too long",
        ),
    ];
    for (name, recs, says, dpkg_says) in cases {
        let mut parts = Parts::new("refused");
        parts.data = tar(recs);
        let deb = parts.write(debs.path(), &format!("{name}.deb"));
        both_refuse(&o, &deb, &refusal(3, &[says], dpkg_says, true), name);
    }
}

/// A package tree whose one file's path, as the archive has it (`usr/...`), is `len` bytes
/// long, in names of at most 11 bytes, each directory with its entry (GNU long names).
fn deep(name: &str, len: usize) -> Vec<Rec> {
    let mut path = format!("usr/share/{name}");
    let mut recs = vec![dir("./"), dir("./usr/"), dir("./usr/share/")];
    while len - path.len() > 12 {
        recs.extend(long(format!("./{path}/").as_bytes(), EntryType::Directory, b""));
        path.push_str("/d123456789");
    }
    recs.extend(long(format!("./{path}/").as_bytes(), EntryType::Directory, b""));
    path.push('/');
    path.push_str(&"f".repeat(len - path.len()));
    assert_eq!(path.len(), len);
    recs.extend(long(format!("./{path}").as_bytes(), EntryType::Regular, b"deep\n"));
    recs
}

/// A path of 4,095 bytes (4,096 as dpkg lists it, with its `/`) is unpacked, listed in
/// info/PKG.list, and read back: by dpkg (`dpkg -L`, `dpkg --audit`) and by unpack itself (a
/// reinstall reads the list). dpkg cannot write one that long itself (its `PATH.dpkg-new` is
/// longer than PATH_MAX), but reads it.
#[test]
fn a_path_of_4095_bytes_is_unpacked_and_read_back() {
    let debs = tempfile::tempdir().unwrap();
    let mut parts = Parts::new("deep");
    parts.data = tar(deep("deep", 4095));
    let deb = parts.write(debs.path(), "deep.deb");
    let root = DbRoot::new();
    for time in ["first", "again"] {
        let r = ours(&deb, root.path());
        assert_eq!(r.code, 0, "{time}: {}", r.stderr);
    }
    let listed = dpkg(root.path(), &["-L", "deep"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let longest = listed.stdout.lines().map(str::len).max().unwrap();
    assert_eq!(longest, 4096, "the path as dpkg lists it");
    let audit = dpkg(root.path(), &["--audit"]);
    assert_eq!((audit.code, audit.stderr.as_str()), (0, ""));
}
