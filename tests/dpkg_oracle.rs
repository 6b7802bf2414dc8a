//! The dpkg oracle (issue 17): `unpack` in database mode, followed by `dpkg --configure -a`,
//! must leave the same tree and the same database as `dpkg --unpack` followed by
//! `dpkg --configure -a`. Every case builds its packages with the real dpkg-deb, takes two
//! fresh roots through the same scenario in lockstep (tests/common/dpkg.rs, `Oracle`), and
//! compares them after the unpack and again after the configure.
//!
//! `DPKG_ORACLE_SELF_CHECK=1 cargo test --test dpkg_oracle` runs dpkg on both sides: every test
//! must pass then, which shows that a failure without it is the engine's. All but two, which
//! call unpack themselves: the refused conflict's (its unpack side asserts what dpkg does not
//! do: leave the database as it was) and `--admindir`'s.
//!
//! What dpkg 1.21 leaves after `--unpack` alone, per case, is said at each test: it is the
//! state the engine must write.

mod common;

use common::dpkg::*;
use common::run;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages of a test, built into a directory of their own.
struct Debs {
    dir: tempfile::TempDir,
}

impl Debs {
    fn new() -> Debs {
        Debs { dir: tempfile::Builder::new().prefix("unpack-oracle-debs").tempdir().unwrap() }
    }

    fn build(&self, pkg: &Pkg) -> PathBuf {
        pkg.build(self.dir.path())
    }
}

fn ok(r: &common::Run, what: &str) {
    assert_eq!(r.code, 0, "{what}:\n{}{}", r.stdout, r.stderr);
}

/// `dpkg-divert --root=ROOT ARGS`, asserted to succeed.
fn divert(root: &Path, args: &[&str]) {
    ok(&tool("dpkg-divert", root, args), &format!("dpkg-divert {args:?}"));
}

/// Case 1. After `--unpack`: `Status: install ok unpacked`, `Conffiles:` with the hash field
/// `newconffile`, no Config-Version; the conffile as `foo.conf.dpkg-new` only; info/ has
/// oracle-fresh.{list,md5sums,conffiles}.
#[test]
fn fresh_install_with_a_dir_a_symlink_a_conffile_and_no_md5sums() {
    let debs = Debs::new();
    let deb = debs.build(
        &Pkg::new("oracle-fresh", "1.0", "amd64")
            .file("/usr/bin/oracle-fresh", b"#!/bin/sh\necho fresh\n", 0o755)
            .file("/usr/share/oracle-fresh/data", b"data\n", 0o644)
            .file("/usr/share/oracle-fresh/secret", b"secret\n", 0o600)
            .dir("/usr/share/oracle-fresh/empty", 0o750)
            .symlink("/usr/bin/oracle-fresh-link", "oracle-fresh")
            .conffile("/etc/oracle-fresh/fresh.conf", b"setting = 1\n")
            .without_md5sums(),
    );
    let o = Oracle::new("fresh install");
    o.unpack(&[&deb]);
    let theirs = o.theirs.admindir();
    let status = parse_status(&std::fs::read_to_string(theirs.join("status")).unwrap());
    let stanza = &status["oracle-fresh:amd64"];
    assert!(stanza.contains(&("Status".into(), "install ok unpacked".into())), "{stanza:?}");
    assert!(
        stanza
            .contains(&("Conffiles".into(), "\n /etc/oracle-fresh/fresh.conf newconffile".into())),
        "{stanza:?}"
    );
    assert!(o.theirs.path().join("etc/oracle-fresh/fresh.conf.dpkg-new").exists());
    assert!(!o.theirs.path().join("etc/oracle-fresh/fresh.conf").exists());
    // dpkg computes the md5sums the package lacks: archive order, conffiles included.
    let expected = format!(
        "{}  etc/oracle-fresh/fresh.conf\n{}  usr/bin/oracle-fresh\n{}  usr/share/oracle-fresh/data\n{}  usr/share/oracle-fresh/secret\n",
        md5_hex(b"setting = 1\n"),
        md5_hex(b"#!/bin/sh\necho fresh\n"),
        md5_hex(b"data\n"),
        md5_hex(b"secret\n")
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("info/oracle-fresh.md5sums")).unwrap(),
        expected
    );
    o.configure(&[]);
}

/// `--admindir ROOT/var/lib/dpkg` named on the command line gives what the automatic database
/// mode gives.
#[test]
fn an_admindir_named_on_the_command_line_is_the_same_database() {
    let debs = Debs::new();
    let deb = debs.build(
        &Pkg::new("oracle-admindir", "1.0", "all")
            .file("/usr/share/oracle-admindir/file", b"file\n", 0o644)
            .conffile("/etc/oracle-admindir.conf", b"conf\n"),
    );
    let o = Oracle::new("--admindir");
    Via::Dpkg.unpack(o.theirs.path(), &[&deb]);
    let admindir = o.ours.admindir();
    let r = common::unpack([
        "--admindir".as_ref(),
        admindir.as_os_str(),
        "-s".as_ref(),
        "fsync".as_ref(),
        deb.as_os_str(),
        o.ours.path().as_os_str(),
    ]);
    ok(&r, "unpack --admindir");
    o.check("after the unpack");
    o.configure(&[]);
}

/// A reinstall of the installed version (apt's --reinstall). After `--unpack`: `Version: 1.0`
/// and `Config-Version: 1.0`, Conffiles with the installed hashes, every conffile as
/// `.dpkg-new` beside the old one (configure then finds them unchanged and keeps the old).
#[test]
fn a_reinstall_of_the_installed_version() {
    let debs = Debs::new();
    let (v1, _) = upgrade_pair(&debs);
    let o = Oracle::new("reinstall");
    o.both(|root| Via::Dpkg.install(root, &[&v1], &[]));
    o.unpack(&[&v1]);
    let status =
        parse_status(&std::fs::read_to_string(o.theirs.admindir().join("status")).unwrap());
    assert!(
        status["oracle-up:amd64"].contains(&("Config-Version".into(), "1.0".into())),
        "{status:?}"
    );
    assert!(o.theirs.path().join("etc/oracle-up/gone.conf.dpkg-new").exists());
    o.configure(&[]);
}

/// The status stanza and the info files of a package with every kind of control field and
/// extra control members. After `--unpack` dpkg writes the fields in ITS order, not the
/// control file's: Package, Status, Priority, Section, Installed-Size, Maintainer,
/// Architecture, Multi-Arch, Source, Version, (Config-Version,) Replaces, Provides, Depends,
/// Pre-Depends, Recommends, Suggests, Breaks, Conflicts, Enhances, (Conffiles,) Description,
/// then the fields it does not know in the control file's order; `Essential: no` and
/// `Protected: no` are dropped. Every control member but `control` is kept as
/// info/PKG:ARCH.MEMBER (`Multi-Arch: same` names them PKG:ARCH even for one architecture),
/// unknown names too.
#[test]
fn control_fields_and_members_are_kept_as_dpkg_keeps_them() {
    let mut pkg = Pkg::new("oracle-fields", "1.0-1", "amd64");
    for (name, value) in [
        ("Source", "oracle-src (0.9)"),
        ("Original-Maintainer", "Someone <someone@example.org>"),
        ("Installed-Size", "12"),
        ("Depends", "libc6 (>= 2.1), oracle-missing"),
        ("Pre-Depends", "oracle-pre (>= 1.0)"),
        ("Recommends", "oracle-rec"),
        ("Suggests", "oracle-sug"),
        ("Breaks", "oracle-old (<< 1)"),
        ("Conflicts", "oracle-con"),
        ("Provides", "oracle-virtual"),
        ("Replaces", "oracle-old"),
        ("Enhances", "oracle-enh"),
        ("Section", "libs"),
        ("Priority", "optional"),
        ("Homepage", "https://example.org"),
        ("Built-Using", "foo (= 1)"),
        ("Essential", "no"),
        ("Protected", "no"),
        ("X-Custom", "custom value"),
        ("Multi-Arch", "same"),
        ("Description", "short\n long line one\n .\n long line two"),
    ] {
        pkg = pkg.field(name, value);
    }
    let pkg = pkg
        .file("/usr/lib/liboracle.so.1", b"not really a library\n", 0o644)
        .member("shlibs", b"liboracle 1 oracle-fields\n")
        .member("symbols", b"liboracle.so.1 oracle-fields #MINVER#\n sym@Base 1.0\n")
        .member("templates", b"Template: oracle/question\nType: boolean\n")
        .member("odd", b"a member dpkg has no name for\n");
    let debs = Debs::new();
    let deb = debs.build(&pkg);
    let o = Oracle::new("control fields and members");
    o.unpack(&[&deb]);
    let theirs = DbSnapshot::take(o.theirs.path());
    let names: Vec<&str> =
        theirs.status["oracle-fields:amd64"].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..4], ["Package", "Status", "Priority", "Section"], "{names:?}");
    assert!(!names.contains(&"Essential") && !names.contains(&"Protected"), "{names:?}");
    for member in ["shlibs", "symbols", "templates", "odd", "list", "md5sums"] {
        assert!(
            theirs.files.contains_key(&format!("info/oracle-fields:amd64.{member}")),
            "{member}: {:?}",
            theirs.files.keys()
        );
    }
    o.configure(&[]);
    // apt reads the relations unpack recorded: the same unmet dependencies as on dpkg's root.
    let aside = tempfile::tempdir().unwrap();
    let check = same_answer(&o, "apt-get check", |r| {
        apt_check(r, &aside.path().join(r.file_name().unwrap()))
    });
    assert_eq!(check.code, 100, "{check:?}");
    assert!(
        check.stdout.contains("Depends: oracle-missing but it is not installable"),
        "{}",
        check.stdout
    );
}

/// The two versions of case 2 and 3. v2 drops /usr/bin/oracle-old and the directory
/// /usr/share/oracle-up/old with its file, keeps same.conf, changes changed.conf and drops
/// gone.conf (which dpkg keeps on disk and marks obsolete).
fn upgrade_pair(debs: &Debs) -> (PathBuf, PathBuf) {
    let v1 = Pkg::new("oracle-up", "1.0", "amd64")
        .file("/usr/bin/oracle-up", b"version 1\n", 0o755)
        .file("/usr/bin/oracle-old", b"dropped in 2\n", 0o755)
        .file("/usr/share/oracle-up/old/file", b"old dir\n", 0o644)
        .file("/usr/share/oracle-up/kept", b"kept\n", 0o644)
        .conffile("/etc/oracle-up/same.conf", b"same\n")
        .conffile("/etc/oracle-up/changed.conf", b"changed 1\n")
        .conffile("/etc/oracle-up/gone.conf", b"gone\n");
    let v2 = Pkg::new("oracle-up", "2.0", "amd64")
        .file("/usr/bin/oracle-up", b"version 2\n", 0o755)
        .file("/usr/share/oracle-up/kept", b"kept\n", 0o644)
        .file("/usr/share/oracle-up/new", b"new in 2\n", 0o644)
        .conffile("/etc/oracle-up/same.conf", b"same\n")
        .conffile("/etc/oracle-up/changed.conf", b"changed 2\n");
    (debs.build(&v1), debs.build(&v2))
}

/// The state dpkg leaves after `--unpack` of v2 over a configured v1, which the engine must
/// write: Version 2.0, `Config-Version: 1.0`, `Conffiles:` with v1's hashes (the ones
/// `--configure` compares with) and gone.conf's line ending in ` obsolete`; info/PKG.list in
/// v2's archive order with `/etc/oracle-up/gone.conf` appended last; info/PKG.conffiles v2's
/// two; `.dpkg-new` beside BOTH kept conffiles, the unchanged one too; the dropped file and
/// directory gone, gone.conf still there.
fn assert_upgrade_unpacked(root: &Path) {
    let status = parse_status(&std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap());
    let stanza = &status["oracle-up:amd64"];
    let field = |n: &str| stanza.iter().find(|(f, _)| f == n).map(|(_, v)| v.as_str());
    assert_eq!(field("Status"), Some("install ok unpacked"));
    assert_eq!(field("Version"), Some("2.0"));
    assert_eq!(field("Config-Version"), Some("1.0"));
    let conffiles = format!(
        "\n /etc/oracle-up/same.conf {}\n /etc/oracle-up/changed.conf {}\n /etc/oracle-up/gone.conf {} obsolete",
        md5_hex(b"same\n"),
        md5_hex(b"changed 1\n"),
        md5_hex(b"gone\n")
    );
    assert_eq!(field("Conffiles"), Some(conffiles.as_str()));
    let list = std::fs::read_to_string(root.join("var/lib/dpkg/info/oracle-up.list")).unwrap();
    assert_eq!(list.lines().last(), Some("/etc/oracle-up/gone.conf"), "{list}");
    for gone in ["usr/bin/oracle-old", "usr/share/oracle-up/old"] {
        assert!(!root.join(gone).exists(), "{gone} left");
    }
    for there in [
        "etc/oracle-up/same.conf.dpkg-new",
        "etc/oracle-up/changed.conf.dpkg-new",
        "etc/oracle-up/gone.conf",
    ] {
        assert!(root.join(there).exists(), "{there} missing");
    }
}

/// v1 installed by dpkg in both roots, `edits` made in both, v2 unpacked by each tool (the
/// roots compared, and dpkg's checked to be in the state `assert_upgrade_unpacked` describes),
/// then configured with `answer`.
fn upgrade(answer: &str, edits: impl Fn(&Path)) -> Oracle {
    let debs = Debs::new();
    let (v1, v2) = upgrade_pair(&debs);
    let o = Oracle::new(&format!("upgrade, {answer}"));
    o.both(|root| {
        Via::Dpkg.install(root, &[&v1], &[]);
        edits(root);
    });
    o.unpack(&[&v2]);
    assert_upgrade_unpacked(o.theirs.path());
    o.configure(&[answer]);
    o
}

/// Case 2: an upgrade where the administrator touched nothing, with each answer of configure.
#[test]
fn upgrade_drops_files_and_a_directory_and_handles_each_kind_of_conffile() {
    for answer in ["--force-confold", "--force-confnew"] {
        upgrade(answer, |_| {});
    }
}

/// Case 2, what stays: v2 drops a directory that holds a file the administrator put there and
/// a directory another package still has a file in; dpkg removes the dropped files and keeps
/// both directories. For the administrator's it warns "unable to delete old directory
/// '/usr/share/oracle-up/old': Directory not empty"; the one another package lists it keeps
/// silently, in that package's list only.
#[test]
fn upgrade_keeps_a_dropped_directory_that_is_not_empty() {
    let debs = Debs::new();
    let (v1, v2) = upgrade_pair(&debs);
    let other = debs.build(&Pkg::new("oracle-neighbour", "1.0", "all").file(
        "/usr/share/oracle-up/old/neighbour",
        b"not oracle-up's\n",
        0o644,
    ));
    for with in ["an administrator's file", "another package's file"] {
        let o = Oracle::new(&format!("upgrade dropping a directory with {with}"));
        o.both(|root| {
            Via::Dpkg.install(root, &[&v1], &[]);
            if with == "an administrator's file" {
                edit(root, "/usr/share/oracle-up/old/local", b"the administrator's\n");
            } else {
                Via::Dpkg.install(root, &[&other], &[]);
            }
        });
        o.unpack(&[&v2]);
        assert!(o.theirs.path().join("usr/share/oracle-up/old").is_dir(), "{with}");
        assert!(!o.theirs.path().join("usr/share/oracle-up/old/file").exists(), "{with}");
        o.configure(&[]);
    }
}

/// Case 3: the administrator edited a kept conffile, the changed one and the obsolete one
/// between v1 and v2. dpkg keeps each edit; on the changed one `--force-confold` leaves v2's as
/// changed.conf.dpkg-dist and `--force-confnew` installs v2's and keeps the edit as
/// changed.conf.dpkg-old. After `--unpack` the state is that of case 2, the edits in place.
#[test]
fn upgrade_over_conffiles_the_administrator_edited() {
    for answer in ["--force-confold", "--force-confnew"] {
        let o = upgrade(answer, |root| {
            edit(root, "/etc/oracle-up/same.conf", b"same, edited\n");
            edit(root, "/etc/oracle-up/changed.conf", b"changed 1, edited\n");
            edit(root, "/etc/oracle-up/gone.conf", b"gone, edited\n");
        });
        let (kept, aside) = if answer == "--force-confold" {
            ("changed 1, edited\n", ("changed.conf.dpkg-dist", "changed 2\n"))
        } else {
            ("changed 2\n", ("changed.conf.dpkg-old", "changed 1, edited\n"))
        };
        let etc = o.theirs.path().join("etc/oracle-up");
        assert_eq!(std::fs::read_to_string(etc.join("changed.conf")).unwrap(), kept);
        assert_eq!(std::fs::read_to_string(etc.join(aside.0)).unwrap(), aside.1);
        assert_eq!(std::fs::read_to_string(etc.join("same.conf")).unwrap(), "same, edited\n");
        assert_eq!(std::fs::read_to_string(etc.join("gone.conf")).unwrap(), "gone, edited\n");
    }
}

fn diverted_pkg() -> Pkg {
    Pkg::new("oracle-div", "1.0", "amd64")
        .file("/usr/bin/oracle-x", b"the package's x\n", 0o755)
        .file("/usr/bin/oracle-y", b"y\n", 0o755)
}

/// Case 4: a path another package (or the admin, `--local`) diverted is written to the
/// divert-to name. After `--unpack`: /usr/bin/oracle-x.real holds the package's file, nothing
/// at /usr/bin/oracle-x, and info/oracle-div.list names /usr/bin/oracle-x (the package's own
/// name, not the diverted one).
#[test]
fn a_path_diverted_by_another_package_or_the_admin_goes_to_its_divert_to_name() {
    for owner in [["--package", "oracle-other"], ["--local", "--quiet"]] {
        let debs = Debs::new();
        let deb = debs.build(&diverted_pkg());
        let o = Oracle::new(&format!("diversion {owner:?}"));
        o.both(|root| {
            divert(
                root,
                &[
                    owner[0],
                    owner[1],
                    "--rename",
                    "--divert",
                    "/usr/bin/oracle-x.real",
                    "--add",
                    "/usr/bin/oracle-x",
                ],
            )
        });
        o.unpack(&[&deb]);
        let theirs = o.theirs.path();
        assert_eq!(
            std::fs::read(theirs.join("usr/bin/oracle-x.real")).unwrap(),
            b"the package's x\n"
        );
        assert!(!theirs.join("usr/bin/oracle-x").exists());
        let list =
            std::fs::read_to_string(o.theirs.admindir().join("info/oracle-div.list")).unwrap();
        assert!(list.lines().any(|l| l == "/usr/bin/oracle-x"), "{list}");
        o.configure(&[]);
    }
}

/// Case 4, the diverter itself: the package that holds the diversion gets its file at the
/// original name; another package shipping the same path, unpacked after it, gets its file at
/// the divert-to name, no conflict.
#[test]
fn the_diverting_package_writes_its_own_file_at_the_diverted_name() {
    let debs = Debs::new();
    let diverter = debs.build(&diverted_pkg());
    let diverted = debs.build(&Pkg::new("oracle-orig", "1.0", "amd64").file(
        "/usr/bin/oracle-x",
        b"the original x\n",
        0o755,
    ));
    let o = Oracle::new("diversion by the package itself");
    o.both(|root| {
        divert(
            root,
            &[
                "--package",
                "oracle-div",
                "--divert",
                "/usr/bin/oracle-x.real",
                "--add",
                "/usr/bin/oracle-x",
            ],
        )
    });
    o.unpack(&[&diverter]);
    assert_eq!(
        std::fs::read(o.theirs.path().join("usr/bin/oracle-x")).unwrap(),
        b"the package's x\n"
    );
    assert!(!o.theirs.path().join("usr/bin/oracle-x.real").exists());
    o.configure(&[]);
    o.unpack(&[&diverted]);
    assert_eq!(
        std::fs::read(o.theirs.path().join("usr/bin/oracle-x.real")).unwrap(),
        b"the original x\n"
    );
    assert_eq!(
        std::fs::read(o.theirs.path().join("usr/bin/oracle-x")).unwrap(),
        b"the package's x\n"
    );
    o.configure(&[]);
}

fn alpha() -> Pkg {
    Pkg::new("oracle-alpha", "1.0", "amd64")
        .file("/usr/bin/oracle-shared", b"alpha's\n", 0o755)
        .file("/usr/share/oracle-alpha/only", b"only alpha\n", 0o644)
}

/// Case 5: beta `Replaces: oracle-alpha` and ships one of alpha's files: ownership moves. After
/// `--unpack`: alpha's stanza unchanged (still `install ok installed`), its .list without the
/// moved path, its md5sums unchanged (the moved path's line stays).
#[test]
fn replaces_moves_a_file_to_the_new_package() {
    let debs = Debs::new();
    let a = debs.build(&alpha());
    let b = debs.build(
        &Pkg::new("oracle-beta", "1.0", "amd64").field("Replaces", "oracle-alpha").file(
            "/usr/bin/oracle-shared",
            b"beta's\n",
            0o755,
        ),
    );
    let o = Oracle::new("Replaces, one file");
    o.both(|root| Via::Dpkg.install(root, &[&a], &[]));
    o.unpack(&[&b]);
    let list = std::fs::read_to_string(o.theirs.admindir().join("info/oracle-alpha.list")).unwrap();
    assert!(!list.contains("/usr/bin/oracle-shared"), "{list}");
    let sums =
        std::fs::read_to_string(o.theirs.admindir().join("info/oracle-alpha.md5sums")).unwrap();
    assert!(sums.contains("usr/bin/oracle-shared"), "{sums}");
    o.configure(&[]);
}

/// Case 5: beta takes every file of alpha: dpkg says "Noting disappearance of oracle-alpha"
/// and after `--unpack` alpha has no stanza and no info file left.
#[test]
fn replaces_of_every_file_makes_the_old_package_disappear() {
    let debs = Debs::new();
    let a = debs.build(&alpha());
    let b = debs.build(
        &Pkg::new("oracle-beta", "1.0", "amd64")
            .field("Replaces", "oracle-alpha")
            .file("/usr/bin/oracle-shared", b"beta's\n", 0o755)
            .file("/usr/share/oracle-alpha/only", b"beta's too\n", 0o644),
    );
    let o = Oracle::new("Replaces, every file");
    o.both(|root| Via::Dpkg.install(root, &[&a], &[]));
    o.unpack(&[&b]);
    let theirs = DbSnapshot::take(o.theirs.path());
    assert!(
        !theirs.status.keys().any(|k| k.starts_with("oracle-alpha:")),
        "{:?}",
        theirs.status.keys()
    );
    assert!(
        !theirs.files.keys().any(|k| k.starts_with("info/oracle-alpha.")),
        "{:?}",
        theirs.files.keys()
    );
    o.configure(&[]);
}

/// Case 6: beta ships alpha's file without Replaces. dpkg refuses (exit 1, "trying to
/// overwrite") but leaves a stanza `oracle-beta: install ok not-installed` behind; unpack must
/// refuse with exit 1, name both packages and the path, and leave tree and database exactly as
/// they were.
#[test]
fn a_file_of_another_package_without_replaces_is_refused_and_nothing_changes() {
    let debs = Debs::new();
    let a = debs.build(&alpha());
    let b = debs.build(
        &Pkg::new("oracle-beta", "1.0", "amd64")
            .file("/usr/bin/oracle-shared", b"beta's\n", 0o755)
            .file("/usr/bin/oracle-beta", b"b\n", 0o755),
    );
    let theirs = DbRoot::new();
    Via::Dpkg.install(theirs.path(), &[&a], &[]);
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(["--unpack", b.to_str().unwrap()]);
    let r = dpkg(theirs.path(), &args);
    assert_eq!(r.code, 1, "dpkg accepted the conflict:\n{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(
            "trying to overwrite '/usr/bin/oracle-shared', which is also in package oracle-alpha"
        ),
        "{}",
        r.stderr
    );

    let ours = DbRoot::new();
    Via::Dpkg.install(ours.path(), &[&a], &[]);
    let before = DbSnapshot::take(ours.path());
    let status_before = std::fs::read(ours.admindir().join("status")).unwrap();
    let r =
        common::unpack(["-s".as_ref(), "fsync".as_ref(), b.as_os_str(), ours.path().as_os_str()]);
    assert_eq!(r.code, 1, "unpack did not refuse the conflict:\n{}{}", r.stdout, r.stderr);
    for name in ["oracle-alpha", "oracle-beta", "/usr/bin/oracle-shared"] {
        assert!(r.stderr.contains(name), "the message does not name {name}: {}", r.stderr);
    }
    assert_same_db(
        &DbSnapshot::take(ours.path()),
        &before,
        "a refused conflict, after against before",
    );
    assert_eq!(
        std::fs::read(ours.admindir().join("status")).unwrap(),
        status_before,
        "status changed"
    );
}

/// Case 7: `Multi-Arch: same` for amd64 and i386 in one call, sharing the copyright file.
/// After `--unpack`: two stanzas `libm`-style (same Package, Architecture amd64 and i386, each
/// with `Multi-Arch: same` before `Version`), info files `oracle-ma:amd64.*` and
/// `oracle-ma:i386.*`, and both lists naming the shared file.
#[test]
fn multi_arch_same_for_two_architectures() {
    let debs = Debs::new();
    let pkg = |arch: &str| {
        Pkg::new("oracle-ma", "1.0", arch)
            .field("Multi-Arch", "same")
            .file("/usr/share/doc/oracle-ma/copyright", b"shared by both\n", 0o644)
            .file(&format!("/usr/lib/oracle-{arch}/liboracle.so.1"), arch.as_bytes(), 0o644)
    };
    let (amd64, i386) = (debs.build(&pkg("amd64")), debs.build(&pkg("i386")));
    let o = Oracle::new("Multi-Arch: same");
    o.both(|root| ok(&dpkg(root, &["--add-architecture", "i386"]), "dpkg --add-architecture i386"));
    o.unpack(&[&amd64, &i386]);
    let theirs = DbSnapshot::take(o.theirs.path());
    for arch in ["amd64", "i386"] {
        assert!(theirs.status.contains_key(&format!("oracle-ma:{arch}")));
        let list = String::from_utf8(theirs.files[&format!("info/oracle-ma:{arch}.list")].clone())
            .unwrap();
        assert!(list.lines().any(|l| l == "/usr/share/doc/oracle-ma/copyright"), "{list}");
    }
    o.configure(&[]);
}

/// Case 8: a statoverride registered before the install wins over the archive's owner and mode,
/// already after `--unpack`.
#[test]
fn a_statoverride_wins_over_the_archive() {
    let debs = Debs::new();
    let deb = debs.build(&Pkg::new("oracle-so", "1.0", "all").file(
        "/usr/bin/oracle-so",
        b"setuid me\n",
        0o755,
    ));
    let o = Oracle::new("statoverride");
    o.both(|root| {
        ok(
            &tool(
                "dpkg-statoverride",
                root,
                &["--add", "daemon", "staff", "4750", "/usr/bin/oracle-so"],
            ),
            "dpkg-statoverride --add",
        )
    });
    o.unpack(&[&deb]);
    let m = std::fs::symlink_metadata(o.theirs.path().join("usr/bin/oracle-so")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o4750, 1, 50));
    o.configure(&[]);
}

/// Case 8b: a statoverride is keyed on the package's path, and applies to what is written for
/// it: a conffile's `NAME.dpkg-new` (0600, kept through the configure), and a diverted setuid
/// binary's divert-to name (the override takes the setuid bit away there too).
#[test]
fn a_statoverride_applies_to_a_conffile_s_dpkg_new_and_a_divert_to_name() {
    let debs = Debs::new();
    let deb =
        debs.build(
            &Pkg::new("oracle-so2", "1.0", "all")
                .conffile("/etc/oracle-so2.conf", b"secret\n")
                .file("/usr/bin/oracle-so2", b"setuid me\n", 0o4755),
        );
    let o = Oracle::new("statoverride on a conffile and a diverted file");
    o.both(|root| {
        for args in [
            ["--add", "root", "root", "0600", "/etc/oracle-so2.conf"],
            ["--add", "root", "root", "0755", "/usr/bin/oracle-so2"],
        ] {
            ok(&tool("dpkg-statoverride", root, &args), "dpkg-statoverride --add");
        }
        divert(root, &["--local", "--divert", "/usr/bin/oracle-so2.real", "/usr/bin/oracle-so2"]);
    });
    o.unpack(&[&deb]);
    let mode =
        |rel: &str| std::fs::symlink_metadata(o.theirs.path().join(rel)).unwrap().mode() & 0o7777;
    assert_eq!(mode("etc/oracle-so2.conf.dpkg-new"), 0o600, "dpkg's");
    assert_eq!(mode("usr/bin/oracle-so2.real"), 0o755, "dpkg's");
    o.configure(&[]);
}

/// Runs `args` on both roots; the outputs must be equal, and are returned (ours).
fn same_answer(o: &Oracle, what: &str, cmd: impl Fn(&Path) -> common::Run) -> common::Run {
    let (ours, theirs) = (cmd(o.ours.path()), cmd(o.theirs.path()));
    assert_eq!(
        (ours.code, &ours.stdout, &ours.stderr),
        (theirs.code, &theirs.stdout, &theirs.stderr),
        "{what}: ours, then dpkg's root"
    );
    ours
}

/// `apt-get check` on ROOT's status, with apt's configuration, lists and cache in `aside`, so
/// that it reads nothing of the host's sources and writes nothing into ROOT.
fn apt_check(root: &Path, aside: &Path) -> common::Run {
    let etc = aside.join("etc/apt");
    for d in ["sources.list.d", "preferences.d", "apt.conf.d", "trusted.gpg.d"] {
        std::fs::create_dir_all(etc.join(d)).unwrap();
    }
    std::fs::write(etc.join("sources.list"), "").unwrap();
    std::fs::create_dir_all(aside.join("lists/partial")).unwrap();
    std::fs::create_dir_all(aside.join("cache")).unwrap();
    let opt = |k: &str, v: &Path| ["-o".to_string(), format!("{k}={}", v.display())];
    let mut cmd = Command::new("apt-get");
    cmd.arg("check").env("LC_ALL", "C");
    for (k, v) in [
        ("Dir", root),
        ("Dir::State::status", &root.join("var/lib/dpkg/status")),
        ("Dir::Etc", &etc),
        ("Dir::State::Lists", &aside.join("lists")),
        ("Dir::Cache", &aside.join("cache")),
    ] {
        cmd.args(opt(k, v));
    }
    run(&mut cmd)
}

/// Case 9: a root where `unpack` installed v1 and upgraded to v2 (each followed by
/// `dpkg --configure -a`): dpkg's and apt's queries answer as on dpkg's root, and agree with
/// the tree: every path `dpkg -L` lists exists and `dpkg -S` finds its package, `--verify` and
/// `--audit` say nothing, `apt-get check` passes.
#[test]
fn dpkg_and_apt_queries_agree_with_a_root_unpack_installed_and_upgraded() {
    let debs = Debs::new();
    let (v1, v2) = upgrade_pair(&debs);
    let o = Oracle::new("queries after an upgrade");
    o.unpack(&[&v1]);
    o.configure(&[]);
    o.unpack(&[&v2]);
    o.configure(&["--force-confold"]);

    let listed = same_answer(&o, "dpkg -L", |r| dpkg(r, &["-L", "oracle-up"]));
    ok(&listed, "dpkg -L");
    let paths: Vec<&str> = listed.stdout.lines().collect();
    assert!(
        paths.contains(&"/etc/oracle-up/gone.conf") && !paths.contains(&"/usr/bin/oracle-old"),
        "{paths:?}"
    );
    for path in &paths {
        let full = o.ours.path().join(path.trim_start_matches('/'));
        let m = std::fs::symlink_metadata(&full)
            .unwrap_or_else(|e| panic!("dpkg -L lists {path}, not in the tree: {e}"));
        if !m.is_dir() {
            let owner = same_answer(&o, "dpkg -S", |r| dpkg(r, &["-S", path]));
            assert_eq!(owner.stdout, format!("oracle-up: {path}\n"), "dpkg -S {path}");
        }
    }
    let gone =
        same_answer(&o, "dpkg -S of a dropped file", |r| dpkg(r, &["-S", "/usr/bin/oracle-old"]));
    assert_eq!(gone.code, 1, "{gone:?}");
    for query in [&["--verify"][..], &["--audit"]] {
        let r = same_answer(&o, &format!("dpkg {query:?}"), |r| dpkg(r, query));
        assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""), "dpkg {query:?}");
    }
    let aside = tempfile::tempdir().unwrap();
    let check = same_answer(&o, "apt-get check", |r| {
        apt_check(r, &aside.path().join(r.file_name().unwrap()))
    });
    assert_eq!((check.code, check.stderr.as_str()), (0, ""), "apt-get check: {}", check.stdout);
}

/// The harness can fail: two roots dpkg took through the same upgrade compare equal, and one
/// extra file, one changed status field, one changed list line or one info file's mode each
/// make a difference that names what differs.
#[test]
fn the_comparison_sees_a_file_a_status_field_and_a_list_line() {
    let debs = Debs::new();
    let (v1, v2) = upgrade_pair(&debs);
    let (one, two) = (DbRoot::new(), DbRoot::new());
    for root in [&one, &two] {
        Via::Dpkg.install(root.path(), &[&v1], &[]);
        Via::Dpkg.install(root.path(), &[&v2], &["--force-confnew"]);
    }
    let base = DbSnapshot::take(one.path());
    assert_same_db(&DbSnapshot::take(two.path()), &base, "two roots dpkg made alike");

    let changed = |change: &dyn Fn(&Path), names: &str| {
        let root = DbRoot::new();
        Via::Dpkg.install(root.path(), &[&v1], &[]);
        Via::Dpkg.install(root.path(), &[&v2], &["--force-confnew"]);
        change(root.path());
        let diffs = db_differences(&DbSnapshot::take(root.path()), &base);
        assert_eq!(diffs.len(), 1, "{diffs:#?}");
        assert!(diffs[0].contains(names), "{names} not named in {}", diffs[0]);
    };
    changed(
        &|r| std::fs::write(r.join("usr/share/oracle-up/extra"), "").unwrap(),
        "usr/share/oracle-up/extra",
    );
    let rewrite = |r: &Path, file: &str, from: &str, to: &str| {
        let p = r.join("var/lib/dpkg").join(file);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{file}: {text}");
        std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
    };
    changed(
        &|r| rewrite(r, "status", "Version: 2.0", "Version: 2.1"),
        "status oracle-up:amd64: field",
    );
    changed(
        &|r| {
            rewrite(
                r,
                "info/oracle-up.list",
                "/usr/share/oracle-up/kept\n",
                "/usr/share/oracle-up/kept2\n",
            )
        },
        "info/oracle-up.list: line",
    );
    let private = |r: &Path| {
        std::fs::set_permissions(
            r.join("var/lib/dpkg/info/oracle-up.list"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap()
    };
    changed(&private, "mode of info/oracle-up.list");
}
