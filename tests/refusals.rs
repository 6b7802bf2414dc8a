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
use common::raw_tar::*;
use common::{snapshot, Run};
use std::path::{Path, PathBuf};
use tar::EntryType;

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

    fn member(mut self, name: &str, bytes: &[u8]) -> Parts {
        self.members.push((name.into(), bytes.into()));
        self
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

/// Every field rule of lib/dpkg/parse.c and fields.c for a binary package's control file:
/// exit 3, the message naming the field.
#[test]
fn control_fields_dpkg_refuses_are_refused_with_exit_3_naming_the_field() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "control fields");
    let cases: [(&str, &str, &[&str], &str); 34] = [
        ("several", "\nPackage: another\n", &["several package info entries"], "several package info entries found, only one allowed"),
        ("essential", "Essential: maybe\n", &["'Essential' field", "maybe"], "boolean (yes/no) 'Essential' field: has invalid value 'maybe'"),
        ("protected", "Protected: yesno\n", &["'Protected' field", "trailing junk"], "boolean (yes/no) 'Protected' field: has trailing junk"),
        ("multi-arch", "Multi-Arch: nonsense\n", &["'Multi-Arch' field", "trailing junk"], "quadstate (foreign/allowed/same/no) 'Multi-Arch' field: has trailing junk"),
        ("multi-arch-word", "Multi-Arch: both\n", &["'Multi-Arch' field", "invalid value 'both'"], "has invalid value 'both'"),
        ("priority", "Priority: extra-important\n", &["'Priority' field", "trailing junk"], "word in 'Priority' field: has trailing junk"),
        ("class", "Class: optionalx\n", &["'Class' field", "trailing junk"], "word in 'Class' field: has trailing junk"),
        ("status", "Status: install ok installed\n", &["'Status' field not allowed"], "value for 'Status' field not allowed in this context"),
        ("config-version", "Config-Version: 1.0\n", &["'Config-Version' field not allowed"], "value for 'Config-Version' field not allowed in this context"),
        ("triggers-pending", "Triggers-Pending: x\n", &["'Triggers-Pending' field not allowed"], "value for 'Triggers-Pending' field not allowed in this context"),
        ("triggers-awaited", "Triggers-Awaited: refusal-base\n", &["'Triggers-Awaited' field not allowed"], "value for 'Triggers-Awaited' field not allowed in this context"),
        ("conffiles-first-line", "Conffiles: /etc/x 0123\n", &["'Conffiles' field", "non-space"], "value for 'Conffiles' field has line starting with non-space '/'"),
        ("conffiles-malformed", "Conffiles:\n /etc/x\n", &["'Conffiles' field", "malformed line"], "value for 'Conffiles' field has malformed line '/etc/x'"),
        ("conffiles-root", "Conffiles:\n // 0123\n", &["'Conffiles' field", "root or empty directory"], "root or empty directory listed as a conffile in 'Conffiles' field"),
        ("depends-unterminated", "Depends: foo (>= 1\n", &["'Depends' field", "unterminated"], "'Depends' field, reference to 'foo': version unterminated"),
        ("depends-arch-restriction", "Depends: foo [amd64]\n", &["'Depends' field", "syntax error after 'foo'"], "'Depends' field, syntax error after reference to package 'foo'"),
        ("recommends-profile", "Recommends: foo <!nocheck>\n", &["'Recommends' field", "syntax error after 'foo'"], "'Recommends' field, syntax error after reference to package 'foo'"),
        ("pre-depends-version", "Pre-Depends: a (>= x1)\n", &["'Pre-Depends' field", "does not start with a digit"], "'Pre-Depends' field, reference to 'a': version 'x1': version number does not start with digit"),
        ("suggests-name", "Suggests: A/b\n", &["'Suggests' field", "bad package name"], "'Suggests' field, invalid package name 'A/b'"),
        ("enhances-arch", "Enhances: a:b_c\n", &["'Enhances' field", "bad architecture"], "'Enhances' field, reference to 'a': invalid architecture name 'b_c'"),
        ("depends-two-versions", "Depends: a (<< 1 2)\n", &["'Depends' field", "'2' instead of ')'"], "version contains '2' instead of ')'"),
        ("depends-empty-group", "Depends: a,,b\n", &["'Depends' field", "bad package name ''"], "'Depends' field, missing package name, or garbage where package name expected"),
        ("depends-operator", "Depends: a (<> 1)\n", &["'Depends' field", "bad operator"], "bad version relationship <>"),
        ("conflicts-alternatives", "Conflicts: a | b\n", &["'Conflicts' field", "alternatives"], "alternatives ('|') not allowed in 'Conflicts' field"),
        ("breaks-alternatives", "Breaks: a | b\n", &["'Breaks' field", "alternatives"], "alternatives ('|') not allowed in 'Breaks' field"),
        ("provides-alternatives", "Provides: a | b\n", &["'Provides' field", "alternatives"], "alternatives ('|') not allowed in 'Provides' field"),
        ("replaces-alternatives", "Replaces: a | b\n", &["'Replaces' field", "alternatives"], "alternatives ('|') not allowed in 'Replaces' field"),
        ("optional-obsolete", "Optional: a (<> 1)\n", &["'Suggests' field", "bad operator"], "bad version relationship <>"),
        ("multi-arch-same-all", "Multi-Arch: same\n", &["'Multi-Arch: same'", "architecture 'all'"], "package has 'Multi-Arch: same' field but is architecture 'all'"),
        ("size-empty", "Size:\nX-End: 1\n", &["'Size' field"], "empty archive details 'Size' field"),
        ("archive-details", "Filename: a b\nSize: 1\n", &["'Size' field", "too few values"], "too few values in archive details 'Size' field (compared to others)"),
        ("archive-details-more", "MD5sum: x\nSize: 1 2\n", &["'Size' field", "too many values"], "too many values in archive details 'Size' field (compared to others)"),
        ("field-name", "X: 1\n", &["bad field name 'X'"], "user-defined field name 'X' too short"),
        ("blank-line", "X-A: a\n \n b\n", &["whitespace-only line in the value of field 'X-A'"], "blank line in value of field 'X-A'"),
    ];
    for (name, extra, says, dpkg_says) in cases {
        let mut parts = Parts::new("refused");
        parts.control = control("refused", extra);
        let deb = parts.write(debs.path(), &format!("{name}.deb"));
        both_refuse(&o, &deb, &refusal(3, says, dpkg_says, false), name);
    }
    let mut version = Parts::new("refused");
    version.control = control("refused", "").replace("Version: 1.0", "Version: x1");
    let deb = version.write(debs.path(), "version.deb");
    let how = refusal(
        3,
        &["'Version' field value 'x1'"],
        "'Version' field value 'x1': version number does not start with digit",
        false,
    );
    both_refuse(&o, &deb, &how, "version");
}

/// What dpkg accepts of a control file it only warns about, and the obsolete fields it folds
/// into others, are written as dpkg writes them: both roots end up the same.
#[test]
fn control_fields_dpkg_accepts_are_written_as_dpkg_writes_them() {
    let debs = tempfile::tempdir().unwrap();
    let extras = [
        "Recommended: a (>= 1)\nOptional: b\nClass: Important\nRevision: 3\n",
        "Recommends: x\nRecommended: a\nPriority: optional\nClass: extra\nPackage-Revision: 3\n",
        "Provides: v (>= 1)\nDepends: a (< 1), b (1.0)\nReplaces: r:any (<< 2)\n",
        "Essential: YES\nProtected: No\nMulti-Arch: Foreign\nPriority: Opt\n",
        "Conffiles:\n /etc/x 0123 obsolete\n etc/y z\nFilename: a b\nSize: 1 2\nMD5sum: c d\n",
        "Essential:\nMulti-Arch:\nDepends:\nX-Last: 1\n",
    ];
    for (i, extra) in extras.iter().enumerate() {
        let name = format!("accepted{i}");
        let mut parts = Parts::new(&name);
        parts.control = control(&name, extra);
        let deb = parts.write(debs.path(), &format!("{name}.deb"));
        let r = Oracle::new(&format!("accepted: {extra:?}")).unpack(&[&deb]);
        if extra.starts_with("Provides: v (>= 1)") && ours_via() == Via::Unpack {
            // dpkg's warning, said as dpkg says it, naming the package file.
            let says = format!("unpack: warning: {}: control: ", deb.display());
            assert!(r.stderr.contains(&says), "no {says:?} in:\n{}", r.stderr);
            assert!(
                r.stderr.contains("only exact versions may be used for 'Provides'"),
                "{}",
                r.stderr
            );
        }
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
            vec![
                pax(EntryType::XHeader, &[("mtime", b"1700000000.5")]),
                f("./usr/share/refused/f"),
            ],
            "unsupported PAX tar header type 'x'",
            "unsupported PAX tar header type 'x'",
        ),
        (
            "pax-g",
            vec![dir("./"), pax(EntryType::XGlobalHeader, &[("comment", b"hi")]), f("./f")],
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

/// The conffiles member (src/main/unpack.c deb_parse_conffiles): a line of more than 996
/// bytes is refused as dpkg refuses it, one of 996 accepted as dpkg accepts it; a directory
/// listed is refused (exit 3), where dpkg unpacks it and then cannot configure it: a stricter
/// verdict (docs/database.md).
#[test]
fn conffiles_members_dpkg_refuses_are_refused() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "conffiles members");
    let name = format!("/etc/{}", "c".repeat(992));
    let too_long = Parts::new("refused").member("conffiles", format!("{name}\n").as_bytes());
    let deb = too_long.write(debs.path(), "conffile-997.deb");
    let how = refusal(
        3,
        &["conffiles", "997 bytes is too long"],
        "is too long, or missing final newline",
        false,
    );
    both_refuse(&o, &deb, &how, "a conffile line of 997 bytes");

    // 996 bytes, shipped: a path in names short enough for dpkg's `.dpkg-tmp` beside each.
    let mut parts = Parts::new("conf996");
    let (a, b) = ("a".repeat(240), "b".repeat(996 - 5 - 241 * 4));
    let conffile = format!("/etc/{a}/{a}/{a}/{a}/{b}");
    assert_eq!(conffile.len(), 996);
    let mut recs = tree("conf996");
    recs.push(dir("./etc/"));
    for depth in 1..=4 {
        let d = format!(".{}/", &conffile[..5 + 241 * depth - 1]);
        recs.extend(long(d.as_bytes(), EntryType::Directory, b""));
    }
    recs.extend(long(format!(".{conffile}").as_bytes(), EntryType::Regular, b"setting\n"));
    parts.data = tar(recs);
    let deb = parts
        .member("conffiles", format!("{conffile}\n").as_bytes())
        .write(debs.path(), "conffile-996.deb");
    Oracle::new("a conffile of 996 bytes").unpack(&[&deb]);

    // A directory listed in conffiles: dpkg unpacks it (as `d.dpkg-new/`), then fails to
    // configure it.
    let mut parts = Parts::new("conffile-dir").member("conffiles", b"/usr/share/conffile-dir/d\n");
    let mut recs = tree("conffile-dir");
    recs.push(dir("./usr/share/conffile-dir/d/"));
    parts.data = tar(recs);
    let deb = parts.write(debs.path(), "conffile-dir.deb");
    let fresh = roots(debs.path(), "a directory in conffiles");
    let r = theirs(&deb, fresh.theirs.path());
    assert_eq!(r.code, 0, "dpkg unpacks it: {}", r.stderr);
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(["--configure", "-a"]);
    assert_eq!(dpkg(fresh.theirs.path(), &args).code, 1, "and cannot configure it");
    let before = DbSnapshot::take(fresh.ours.path());
    let says = ["conffiles: '/usr/share/conffile-dir/d' is a directory".to_string()];
    assert_says(&ours(&deb, fresh.ours.path()), &deb, 3, &says, "a directory in conffiles");
    assert_same_db(&DbSnapshot::take(fresh.ours.path()), &before, "a directory in conffiles");
}

/// The triggers member (lib/dpkg/triglib.c trig_parse_ci): its final newline, lines of at most
/// 254 bytes, dpkg's names. Refused as dpkg refuses them before the preinst, the database as
/// it was; an interest dpkg classifies as no trigger it can record (`foo_bar`, `/usr/`,
/// `/a//b`) refused too, where dpkg refuses it only after the files, leaving the package
/// `reinstreq half-installed` (a stricter moment, the same verdict).
#[test]
fn triggers_members_dpkg_refuses_are_refused() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "triggers members");
    let line_255 = format!("interest /usr/share/{}\n", "t".repeat(255 - 20));
    let before_files: [(&str, &[u8], &str, &str); 3] = [
        (
            "no-newline",
            b"interest /usr/share/x",
            "too-long line or missing newline",
            "too-long line or missing newline",
        ),
        (
            "line-255",
            line_255.as_bytes(),
            "too-long line or missing newline",
            "too-long line or missing newline",
        ),
        (
            "space",
            b"interest /usr/share/a b\n",
            "illegal trigger syntax in trigger name '/usr/share/a b'",
            "contains illegal trigger syntax in trigger name '/usr/share/a b'",
        ),
    ];
    for (name, member, says, dpkg_says) in before_files {
        let deb = Parts::new("refused")
            .member("triggers", member)
            .write(debs.path(), &format!("triggers-{name}.deb"));
        both_refuse(&o, &deb, &refusal(3, &["triggers", says], dpkg_says, false), name);
    }
    for (i, interest) in ["foo_bar", "/usr/", "/usr//share"].iter().enumerate() {
        let member = format!("interest {interest}\n");
        let deb = Parts::new("refused")
            .member("triggers", member.as_bytes())
            .write(debs.path(), &format!("interest{i}.deb"));
        let fresh = roots(debs.path(), interest);
        let r = theirs(&deb, fresh.theirs.path());
        assert_eq!(r.code, 1, "{interest}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("invalid or unknown syntax in trigger name '{interest}'")),
            "{}",
            r.stderr
        );
        assert!(
            dpkg(fresh.theirs.path(), &["--audit"]).stdout.contains("refused"),
            "dpkg leaves it half-installed"
        );
        let before = DbSnapshot::take(fresh.ours.path());
        let says = [format!("invalid or unknown syntax in trigger name '{interest}'")];
        assert_says(&ours(&deb, fresh.ours.path()), &deb, 3, &says, interest);
        assert_same_db(&DbSnapshot::take(fresh.ours.path()), &before, interest);
        assert_eq!(dpkg(fresh.ours.path(), &["--audit"]).stdout, "", "{interest}");
    }
    // What dpkg accepts: an activation of no kind it knows (ignored), a line of 254 bytes.
    let line_254 = format!("interest /usr/share/{}\n", "t".repeat(254 - 20));
    for (i, member) in [&b"activate foo_bar\n"[..], line_254.as_bytes()].iter().enumerate() {
        let deb = Parts::new(&format!("trig{i}"))
            .member("triggers", member)
            .write(debs.path(), &format!("trig{i}.deb"));
        Oracle::new(&format!("triggers {member:?}")).unpack(&[&deb]);
    }
}

/// An architecture the root has not enabled (the root's own is its `dpkg`'s, the foreign ones
/// its `arch` file's, never the host's): exit 1 as dpkg refuses it, the root as it was; once
/// enabled, unpacked as by dpkg. An `arch` file dpkg cannot read is exit 4.
#[test]
fn architectures_the_root_has_not_enabled_are_refused_with_exit_1() {
    let debs = tempfile::tempdir().unwrap();
    let o = roots(debs.path(), "the root's architectures");
    for arch in ["i386", "All", "any"] {
        let mut parts = Parts::new("refused");
        parts.control =
            control("refused", "").replace("Architecture: all", &format!("Architecture: {arch}"));
        let deb = parts.write(debs.path(), &format!("arch-{arch}.deb"));
        let says =
            [&format!("package architecture ({arch})") as &str, "amd64", "conflicts with the root"];
        let dpkg_says = format!("package architecture ({arch}) does not match system (amd64)");
        both_refuse(&o, &deb, &refusal(1, &says, &dpkg_says, false), arch);
    }
    // Enabled, the same package is unpacked by both.
    let mut i386 = Parts::new("foreign");
    i386.control = control("foreign", "").replace("Architecture: all", "Architecture: i386");
    let deb = i386.write(debs.path(), "foreign.deb");
    let enabled = Oracle::new("an enabled foreign architecture");
    let installed = installed(debs.path());
    enabled.both(|root| {
        Via::Dpkg.install(root, &[&installed[0]], &[]);
        assert_eq!(dpkg(root, &["--add-architecture", "i386"]).code, 0);
    });
    enabled.unpack(&[&deb]);
    // The root's `arch` file is attacker input: one dpkg cannot read is exit 4 for unpack.
    std::fs::write(o.ours.admindir().join("arch"), "i386").unwrap();
    let r = ours(&deb, o.ours.path());
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("var/lib/dpkg/arch") && r.stderr.contains("missing newline"),
        "{}",
        r.stderr
    );
    std::fs::remove_file(o.ours.admindir().join("arch")).unwrap();
}

/// A package that is not `Multi-Arch: same` while its name has several installed instances:
/// exit 1, as dpkg refuses it ("not co-installable"), before anything is written.
#[test]
fn a_package_not_co_installable_with_the_installed_instances_is_refused_with_exit_1() {
    let debs = tempfile::tempdir().unwrap();
    let lib = |arch: &str, multi_arch: &str| {
        let mut p = Parts::new("lib");
        p.control = control("lib", multi_arch)
            .replace("Architecture: all", &format!("Architecture: {arch}"));
        p.data = tar(tree(&format!("lib-{arch}")));
        p.write(debs.path(), &format!("lib-{arch}.deb"))
    };
    let (amd64, i386) = (
        lib(
            "amd64",
            "Multi-Arch: same
",
        ),
        lib(
            "i386",
            "Multi-Arch: same
",
        ),
    );
    let both_archs = roots(debs.path(), "co-installability");
    both_archs.both(|root| {
        assert_eq!(dpkg(root, &["--add-architecture", "i386"]).code, 0);
        Via::Dpkg.install(root, &[&amd64, &i386], &[]);
    });
    for (arch, field) in [
        ("all", ""),
        (
            "amd64",
            "Multi-Arch: foreign
",
        ),
    ] {
        let deb = lib(arch, field);
        let word = if field.is_empty() { "no" } else { "foreign" };
        let dpkg_says = format!("with field 'Multi-Arch: {word}' is not co-installable with lib which has multiple installed instances");
        let how = refusal(1, &[&dpkg_says, "conflicts with the root"], &dpkg_says, false);
        both_refuse(&both_archs, &deb, &how, &format!("lib:{arch}"));
    }
}

/// A path that a diversion, a package's or the administrator's, sends another path to: exit 1,
/// as dpkg refuses it ("which is the diverted version of"), the root as it was.
#[test]
fn a_diversion_s_divert_to_name_is_refused_with_exit_1() {
    let debs = tempfile::tempdir().unwrap();
    let diverts = roots(debs.path(), "divert-to names");
    diverts.both(|root| {
        for (by, from) in
            [(&["--package", "other"][..], "/usr/share/x"), (&["--local"], "/usr/share/y")]
        {
            let mut args = by.to_vec();
            let to =
                if by[0] == "--local" { "/usr/share/refused/g" } else { "/usr/share/refused/f" };
            args.extend(["--divert", to, "--add", from]);
            let r = tool("dpkg-divert", root, &args);
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
    });
    let mut parts = Parts::new("refused");
    let deb = parts.write(debs.path(), "divert-to.deb");
    let says = "trying to overwrite '/usr/share/refused/f', which is the diverted version of '/usr/share/x' (package: other)";
    both_refuse(
        &diverts,
        &deb,
        &refusal(1, &[says, "conflicts with the root"], says, false),
        "a package's divert-to name",
    );
    let mut recs = tree("refused");
    recs[4] = file("./usr/share/refused/g", b"g\n");
    parts.data = tar(recs);
    let deb = parts.write(debs.path(), "divert-to-local.deb");
    let says = "trying to overwrite '/usr/share/refused/g', which is the diverted version of '/usr/share/y'";
    both_refuse(
        &diverts,
        &deb,
        &refusal(1, &[says], says, false),
        "the administrator's divert-to name",
    );
}
