//! `unpack-compare` on small roots built here: two roots the real dpkg installed the same
//! packages (built by dpkg-deb) into are the same, and a difference of each kind planted in one
//! of them by hand or by dpkg's own tools is found; two roots built alike by hand are the same
//! (exit 0, nothing printed), and each kind of difference planted in one of them is reported,
//! naming the path or the field, with exit 1; the ignore file leaves out what it covers; what
//! cannot be read is exit 2 naming it; nothing in a root (symlinks out of it, FIFOs, sockets, a
//! mount, a huge directory) makes it leave the root, hang or panic. dpkg's installs, owners and
//! mounts need root; those cases say "skipped" otherwise.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::dpkg::{dpkg, tool, DbRoot, Pkg, NO_DEPENDS};
use common::{is_root, run, Run};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every mtime the roots are built with, so that two builds are the same tree.
const WHEN: i64 = 1_700_000_000;

fn compare(args: &[&std::ffi::OsStr]) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_unpack-compare")).args(args))
}

/// `unpack-compare [EXTRA...] A B`.
fn differences(a: &Path, b: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(|s| s.as_ref()).collect();
    args.extend([a.as_os_str(), b.as_os_str()]);
    compare(&args)
}

const STATUS: &str =
    "Package: tool\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0\n\
    Description: a tool\n more of it\n\nPackage: zlib\nStatus: install ok installed\n\
    Architecture: amd64\nVersion: 2.0\n\n";

/// A small merged-/usr root with a dpkg database: `tool` lists `/bin/tool` (through the `bin ->
/// usr/bin` symlink), its symlink and its doc; `usr/local/unlisted` is no package's.
fn build(dir: &Path) -> PathBuf {
    let root = dir.to_path_buf();
    let file = |rel: &str, bytes: &[u8], mode: u32| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        set_mtime(&p, WHEN);
    };
    file("usr/bin/tool", b"#!/bin/sh\necho tool\n", 0o755);
    file("usr/share/doc/tool/README", b"read me\n", 0o644);
    file("usr/local/unlisted", b"mine\n", 0o644);
    file("etc/tool.conf", b"setting=1\n", 0o644);
    let db = "var/lib/dpkg/";
    file(&format!("{db}status"), STATUS.as_bytes(), 0o644);
    let list = "/.\n/usr\n/usr/bin\n/bin/tool\n/usr/bin/tool-link\n/usr/share/doc/tool/README\n";
    file(&format!("{db}info/tool.list"), list.as_bytes(), 0o644);
    file(
        &format!("{db}info/tool.md5sums"),
        b"0123  usr/bin/tool\n4567  usr/share/doc/tool/README\n",
        0o644,
    );
    file(&format!("{db}info/zlib.list"), b"/.\n", 0o644);
    file(&format!("{db}diversions"), b"/usr/bin/other\n/usr/bin/other.real\ntool\n", 0o644);
    file(&format!("{db}statoverride"), b"root root 0755 /usr/bin/tool\n", 0o644);
    file(&format!("{db}arch"), b"amd64\n", 0o644);
    file(&format!("{db}triggers/File"), b"/usr/share/doc tool\n", 0o644);
    std::fs::create_dir_all(root.join(format!("{db}updates"))).unwrap();
    symlink("usr/bin", &root.join("bin"));
    symlink("tool", &root.join("usr/bin/tool-link"));
    symlink("/etc", &root.join("usr/local/host-etc"));
    symlink("../../../../../..", &root.join("usr/local/up"));
    run(Command::new("mkfifo").arg(root.join("usr/local/fifo")));
    std::os::unix::net::UnixListener::bind(root.join("usr/local/socket")).unwrap();
    root
}

fn symlink(target: &str, at: &Path) {
    std::os::unix::fs::symlink(target, at).unwrap();
    set_mtime(at, WHEN);
}

/// Sets `path`'s mtime (and atime) without following a symlink.
fn set_mtime(path: &Path, secs: i64) {
    let t = rustix::fs::Timespec { tv_sec: secs, tv_nsec: 0 };
    let times = rustix::fs::Timestamps { last_access: t, last_modification: t };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .unwrap();
}

/// Two roots built alike, in one temporary directory.
struct Pair {
    _dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
}

impl Pair {
    fn new() -> Pair {
        let dir = tempfile::Builder::new().prefix("unpack-compare").tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for r in [&a, &b] {
            std::fs::create_dir(r).unwrap();
            build(r);
        }
        Pair { _dir: dir, a, b }
    }

    fn lines(&self, extra: &[&str]) -> Vec<String> {
        let out = differences(&self.a, &self.b, extra);
        assert_eq!(out.code, if out.stdout.is_empty() { 0 } else { 1 }, "{out:?}");
        assert_eq!(out.stderr, "", "{out:?}");
        out.stdout.lines().map(String::from).collect()
    }
}

#[test]
fn two_roots_built_alike_are_the_same() {
    let p = Pair::new();
    let out = differences(&p.a, &p.b, &[]);
    assert_eq!((out.code, out.stdout.as_str(), out.stderr.as_str()), (0, "", ""));
    let json = differences(&p.a, &p.b, &["--json"]).json();
    assert_eq!(json["differences"], serde_json::json!([]));
    assert_eq!(json["ignored"], 0);
}

#[test]
fn every_kind_of_tree_difference_is_reported_naming_the_path() {
    let p = Pair::new();
    let b = &p.b;
    std::fs::set_permissions(b.join("etc/tool.conf"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    std::fs::hard_link(b.join("etc/tool.conf"), b.join("etc/tool.conf.bak")).unwrap();
    std::fs::write(b.join("usr/share/doc/tool/README"), b"READ ME\n").unwrap();
    set_mtime(&b.join("usr/share/doc/tool/README"), WHEN);
    std::fs::remove_file(b.join("usr/bin/tool-link")).unwrap();
    symlink("tool2", &b.join("usr/bin/tool-link"));
    std::fs::remove_file(b.join("usr/local/fifo")).unwrap();
    std::fs::create_dir(b.join("usr/local/fifo")).unwrap();
    std::fs::write(b.join("usr/local/new"), b"new\n").unwrap();
    std::fs::remove_file(p.a.join("usr/local/unlisted")).unwrap();
    // Listed as /bin/tool, through the bin -> usr/bin symlink.
    set_mtime(&b.join("usr/bin/tool"), WHEN + 1);
    // No package lists it: a time of the run, not of a package.
    set_mtime(&b.join("usr/local/host-etc"), WHEN + 1);
    let md5 = common::dpkg::md5_hex;
    let me = owner();
    assert_eq!(
        p.lines(&[]),
        [
            "etc/tool.conf: links: 1 in A, 2 in B".to_string(),
            "etc/tool.conf: mode: 0644 in A, 0600 in B".to_string(),
            format!("etc/tool.conf.bak: path only in B: file, 0600, {me}, 10 bytes"),
            "usr/bin/tool: mtime: 1700000000.000000000 in A, 1700000001.000000000 in B".to_string(),
            "usr/bin/tool-link: target: tool in A, tool2 in B".to_string(),
            "usr/local/fifo: type: fifo in A, directory in B".to_string(),
            format!("usr/local/new: path only in B: file, 0644, {me}, 4 bytes"),
            format!("usr/local/unlisted: path only in B: file, 0644, {me}, 5 bytes"),
            format!(
                "usr/share/doc/tool/README: content: {} in A, {} in B",
                md5(b"read me\n"),
                md5(b"READ ME\n")
            ),
        ]
    );
}

/// The owner the roots' files get: the test's own user's.
fn owner() -> String {
    format!("{}:{}", rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw())
}

#[test]
fn every_kind_of_database_difference_is_reported_naming_the_field_or_line() {
    let p = Pair::new();
    let db = p.b.join("var/lib/dpkg");
    // Same size: only the database part may report it, and it says which field.
    let status = STATUS.replace("Version: 1.0", "Version: 1.1").replace("more of it", "less of it");
    std::fs::write(db.join("status"), status).unwrap();
    std::fs::write(
        db.join("info/tool.md5sums"),
        b"0123  usr/bin/tool\n4567  usr/share/doc/tool/READ\n",
    )
    .unwrap();
    std::fs::write(db.join("diversions"), b"/usr/bin/other\n/usr/bin/other.distrib\ntool\n")
        .unwrap();
    std::fs::write(db.join("statoverride"), b"root staff 4755 /usr/bin/tool\n").unwrap();
    std::fs::write(db.join("triggers/File"), b"/usr/share/doc tool/noawait\n").unwrap();
    std::fs::write(db.join("arch"), b"i386\n").unwrap();
    assert_eq!(
        p.lines(&[]),
        [
            "var/lib/dpkg/arch: line only in A: amd64",
            "var/lib/dpkg/arch: line only in B: i386",
            "var/lib/dpkg/diversions/usr/bin/other: diversion: to /usr/bin/other.real by tool in A, to /usr/bin/other.distrib by tool in B",
            "var/lib/dpkg/info/tool.md5sums: line only in A: 4567  usr/share/doc/tool/README",
            "var/lib/dpkg/info/tool.md5sums: line only in B: 4567  usr/share/doc/tool/READ",
            "var/lib/dpkg/statoverride/usr/bin/tool: override: root root 0755 in A, root staff 4755 in B",
            "var/lib/dpkg/status/tool:amd64/Description: field: a tool\\n more of it in A, a tool\\n less of it in B",
            "var/lib/dpkg/status/tool:amd64/Version: field: 1.0 in A, 1.1 in B",
            "var/lib/dpkg/triggers/File: line only in A: /usr/share/doc tool",
            "var/lib/dpkg/triggers/File: line only in B: /usr/share/doc tool/noawait",
        ]
    );
}

#[test]
fn stanzas_and_fields_only_one_status_has_and_their_order_are_reported() {
    let p = Pair::new();
    let db = p.b.join("var/lib/dpkg");
    let (tool, zlib) = STATUS.trim_end().split_once("\n\n").unwrap();
    let tool =
        tool.replace("Status: install ok installed\n", "") + "\nStatus: install ok installed";
    std::fs::write(
        db.join("status"),
        format!("{zlib}\n\n{tool}\n\nPackage: new\nArchitecture: all\n"),
    )
    .unwrap();
    std::fs::write(db.join("info/tool.list"), b"/.\n/usr\n").unwrap();
    std::fs::create_dir(db.join("updates/sub")).unwrap();
    std::fs::write(p.a.join("var/lib/dpkg/updates/0001"), b"Package: tool\n").unwrap();
    std::fs::write(db.join("updates/0001"), b"Package: tool\n").unwrap();
    let lines = p.lines(&[]);
    for expected in [
        "var/lib/dpkg/status: stanza order: #1 tool:amd64 in A, #1 zlib:amd64 in B",
        "var/lib/dpkg/status/new:all: stanza only in B: Package, Architecture",
        "var/lib/dpkg/status/tool:amd64: field order: #2 Status in A, #2 Architecture in B",
        "var/lib/dpkg/info/tool.list: line only in A: /bin/tool",
        "var/lib/dpkg/updates/0001: pending: not folded into status, 14 bytes in A, not folded into status, 14 bytes in B",
        "var/lib/dpkg/updates/sub: path only in B: directory, 0755",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(expected)), "{expected:?} not in {lines:#?}");
    }
}

#[test]
fn the_ignore_file_leaves_out_what_its_patterns_cover() {
    let p = Pair::new();
    std::fs::write(p.b.join("etc/machine-id"), b"0123\n").unwrap();
    std::fs::write(p.b.join("etc/tool.conf"), b"setting=2\n").unwrap();
    set_mtime(&p.b.join("etc/tool.conf"), WHEN);
    std::fs::set_permissions(
        p.b.join("usr/share/doc/tool/README"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let status = STATUS.replace("Version: 2.0", "Version: 2.1");
    std::fs::write(p.b.join("var/lib/dpkg/status"), status).unwrap();
    let ignore = p.a.parent().unwrap().join("noise.ignore");
    std::fs::write(
        &ignore,
        "# the noise of two runs\n\
         /etc/machine-id   # made at first boot\n\
         etc/*.conf content,size\n\
         \n\
         var/lib/dpkg/status/zlib:*/Version\n",
    )
    .unwrap();
    let all = p.lines(&[]);
    assert_eq!(all.len(), 4, "{all:#?}");
    let ignore_arg = format!("--ignore={}", ignore.display());
    assert_eq!(
        p.lines(&[&ignore_arg]),
        ["usr/share/doc/tool/README: mode: 0644 in A, 0600 in B"],
        "the README's mode is no pattern's; the conffile's content is, its mode would not be"
    );
    let json = differences(&p.a, &p.b, &["--json", &ignore_arg]).json();
    assert_eq!(json["ignored"], 3);
    assert_eq!(
        json["differences"],
        serde_json::json!([{"subject": "usr/share/doc/tool/README", "aspect": "mode", "a": "0644", "b": "0600"}])
    );
}

#[test]
fn what_cannot_be_read_is_exit_2_naming_it() {
    let p = Pair::new();
    let missing = p.a.parent().unwrap().join("missing");
    let out = differences(&p.a, &missing, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.starts_with("unpack-compare: error: ")
            && out.stderr.contains(&*missing.to_string_lossy()),
        "{}",
        out.stderr
    );
    let bad = p.a.parent().unwrap().join("bad.ignore");
    std::fs::write(&bad, "ok\nnot\\\n").unwrap();
    let out = differences(&p.a, &p.b, &["--ignore", bad.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains(&format!("{}:2: ", bad.display())), "{}", out.stderr);
    let out = compare(&["only-one".as_ref()]);
    assert_eq!(out.code, 2, "a usage error: {out:?}");
    if is_root() {
        eprintln!("skipped: an unreadable file needs a user without CAP_DAC_OVERRIDE");
        return;
    }
    let secret = p.b.join("etc/tool.conf");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = differences(&p.a, &p.b, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains(&*secret.to_string_lossy()), "{}", out.stderr);
}

#[test]
fn an_owner_a_device_and_a_mount_are_compared_as_root() {
    if !is_root() {
        eprintln!("skipped: needs root (chown, mknod, mount)");
        return;
    }
    let p = Pair::new();
    std::os::unix::fs::lchown(p.b.join("etc/tool.conf"), Some(1), Some(50)).unwrap();
    for (root, minor) in [(&p.a, 3), (&p.b, 5)] {
        let dev = rustix::fs::makedev(1, minor);
        let mode = rustix::fs::Mode::from_raw_mode(0o666);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("usr/local/null"),
            rustix::fs::FileType::CharacterDevice,
            mode,
            dev,
        )
        .unwrap();
        std::fs::create_dir(root.join("usr/local/mnt")).unwrap();
    }
    let mnt = p.b.join("usr/local/mnt");
    let mounted = run(Command::new("mount").args(["-t", "tmpfs", "unpack-compare-test"]).arg(&mnt));
    assert_eq!(mounted.code, 0, "{mounted:?}");
    std::fs::write(mnt.join("inside"), b"not walked\n").unwrap();
    let lines = p.lines(&[]);
    let unmounted = run(Command::new("umount").arg(&mnt));
    assert_eq!(unmounted.code, 0, "{unmounted:?}");
    assert_eq!(
        lines
            .iter()
            .filter(
                |l| !l.starts_with("usr/local/mnt: mode") && !l.starts_with("usr/local/mnt: owner")
            )
            .collect::<Vec<_>>(),
        [
            "etc/tool.conf: owner: 0:0 in A, 1:50 in B",
            "usr/local/mnt: mount: not a mount point in A, a mount point (not walked) in B",
            "usr/local/null: device: 1,3 in A, 1,5 in B",
        ]
    );
}

#[test]
fn a_huge_directory_and_a_deep_tree_are_walked_without_leaving_the_root() {
    let p = Pair::new();
    for root in [&p.a, &p.b] {
        let huge = root.join("usr/share/huge");
        std::fs::create_dir(&huge).unwrap();
        for i in 0..20_000 {
            std::fs::write(huge.join(format!("f{i}")), b"").unwrap();
        }
        let mut deep = root.join("usr/share/deep");
        for _ in 0..500 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("bottom"), root.to_string_lossy().as_bytes()).unwrap();
    }
    std::fs::remove_file(p.b.join("usr/share/huge/f12345")).unwrap();
    let lines = p.lines(&[]);
    let md5 = |root: &Path| common::dpkg::md5_hex(root.to_string_lossy().as_bytes());
    let bottom = format!("usr/share/deep{}/bottom", "/d".repeat(500));
    assert_eq!(
        lines,
        [
            format!("{bottom}: content: {} in A, {} in B", md5(&p.a), md5(&p.b)),
            format!("usr/share/huge/f12345: path only in A: file, 0644, {}, 0 bytes", owner()),
        ]
    );
}

/// The real dpkg's work: `tool` (a program, its doc, a conffile, a symlink, a file trigger
/// interest) and `lib` (a file and a symlink) built by dpkg-deb and installed by `dpkg --root
/// --install` into two empty roots: nothing differs. Then one difference of each kind is planted
/// in B, by hand (content, size, mode, owner, type, link target, the mtime of a package's file, an
/// info file, a trigger) or by dpkg's own tools (a selection in status, a diversion, a
/// statoverride), and each is found, naming the path or the field.
#[test]
fn real_dpkg_installs_are_the_same_and_each_planted_difference_is_found() {
    if !is_root() {
        eprintln!("skipped: needs root (dpkg --install sets owners, the plants chown)");
        return;
    }
    let debs = tempfile::Builder::new().prefix("unpack-compare-debs").tempdir().unwrap();
    let (a, b) = installed_by_dpkg(debs.path());
    let out = differences(a.path(), b.path(), &[]);
    assert_eq!((out.code, out.stdout.as_str(), out.stderr.as_str()), (0, "", ""), "{out:?}");

    plant_in_tree(b.path());
    plant_in_database(b.path(), debs.path());
    let out = differences(a.path(), b.path(), &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let expected = planted();
    for line in &expected {
        assert!(lines.contains(&line.as_str()), "{line:?} not in {lines:#?}");
    }
    // Besides: the listed file's mtime (not its directory's), and dpkg's backups of the
    // database files its tools rewrote (`status-old`, `diversions-old`, `statoverride-old`).
    let others: Vec<&str> =
        lines.iter().copied().filter(|l| !expected.iter().any(|e| e == l)).collect();
    assert!(others.iter().any(|l| l.starts_with("usr/lib/lib.txt: mtime: ")), "{lines:#?}");
    for line in &others {
        let subject = line.split(": ").next().unwrap();
        assert!(
            line.starts_with("usr/lib/lib.txt: mtime: ")
                || (subject.starts_with("var/lib/dpkg/") && subject.ends_with("-old")),
            "{line:?} was not planted: {lines:#?}"
        );
    }
}

/// `tool` and `lib` (see the test above) built into `debs` and installed by the real dpkg into
/// two empty roots, each with the same local diversion and statoverride.
fn installed_by_dpkg(debs: &Path) -> (DbRoot, DbRoot) {
    let tool_deb = Pkg::new("tool", "1.0", "amd64")
        .file("/usr/bin/tool", b"#!/bin/sh\necho tool\n", 0o755)
        .file("/usr/share/doc/tool/README", b"read me\n", 0o644)
        .conffile("/etc/tool.conf", b"setting=1\n")
        .symlink("/usr/bin/tool-link", "tool")
        .member("triggers", b"interest /usr/share/tool-plugins\n")
        .build(debs);
    let lib_deb = Pkg::new("lib", "1.0", "all")
        .file("/usr/lib/lib.txt", b"library\n", 0o644)
        .symlink("/usr/lib/lib-link", "lib.txt")
        .build(debs);
    let (a, b) = (DbRoot::new(), DbRoot::new());
    for root in [&a, &b] {
        let mut args: Vec<&str> = NO_DEPENDS.to_vec();
        args.extend(["--install", tool_deb.to_str().unwrap(), lib_deb.to_str().unwrap()]);
        let r = dpkg(root.path(), &args);
        assert_eq!(r.code, 0, "dpkg --install: {r:?}");
        // So that B's next ones are records of files both roots have.
        for (name, args) in [divert("/usr/bin/other"), statoverride("/usr/lib/lib.txt")] {
            let r = tool(name, root.path(), &args.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(r.code, 0, "{name}: {r:?}");
        }
    }
    (a, b)
}

/// The seconds and nanoseconds of `path`'s mtime, not following a symlink.
fn mtime_of(path: &Path) -> (i64, i64) {
    let st = rustix::fs::lstat(path).unwrap();
    #[allow(clippy::unnecessary_cast)] // other types on other architectures
    (st.st_mtime as i64, st.st_mtime_nsec as i64)
}

/// `change` done to `path`, its mtime kept: what a package's file looks like after a change that
/// keeps its time.
fn keeping_mtime(path: &Path, change: impl FnOnce(&Path)) {
    let (secs, nsecs) = mtime_of(path);
    change(path);
    let t = rustix::fs::Timespec { tv_sec: secs, tv_nsec: nsecs };
    let times = rustix::fs::Timestamps { last_access: t, last_modification: t };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .unwrap();
}

/// One difference of each kind in the tree of the dpkg root `b`, every package file's mtime
/// kept but where the mtime is the difference.
fn plant_in_tree(b: &Path) {
    keeping_mtime(&b.join("usr/share/doc/tool/README"), |p| {
        std::fs::write(p, b"READ ME\n").unwrap()
    });
    keeping_mtime(&b.join("etc/tool.conf"), |p| std::fs::write(p, b"setting=22\n").unwrap());
    keeping_mtime(&b.join("usr/lib/lib.txt"), |p| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    });
    keeping_mtime(&b.join("usr/bin/tool"), |p| {
        std::os::unix::fs::lchown(p, Some(1), Some(50)).unwrap();
    });
    keeping_mtime(&b.join("usr/bin/tool-link"), |p| {
        std::fs::remove_file(p).unwrap();
        std::os::unix::fs::symlink("tool2", p).unwrap();
    });
    keeping_mtime(&b.join("usr/lib/lib-link"), |p| {
        std::fs::remove_file(p).unwrap();
        std::fs::write(p, b"").unwrap();
    });
    // A directory's mtime is never compared; a listed file's is.
    set_mtime(&b.join("usr/share/doc/tool"), mtime_of(&b.join("usr/share/doc/tool")).0 + 1);
    set_mtime(&b.join("usr/lib/lib.txt"), mtime_of(&b.join("usr/lib/lib.txt")).0 + 1);
}

/// One difference of each kind in the database of the dpkg root `b`: an info file and a trigger
/// by hand, a selection, a diversion and a statoverride by dpkg's own tools.
fn plant_in_database(b: &Path, debs: &Path) {
    let db = b.join("var/lib/dpkg");
    let md5sums = std::fs::read_to_string(db.join("info/tool.md5sums")).unwrap();
    let readme = common::dpkg::md5_hex(b"read me\n");
    std::fs::write(db.join("info/tool.md5sums"), md5sums.replace(&readme, &"0".repeat(32)))
        .unwrap();
    let triggers = std::fs::read_to_string(db.join("triggers/File")).unwrap();
    assert_eq!(triggers, "/usr/share/tool-plugins tool\n", "dpkg's record of the interest");
    std::fs::write(db.join("triggers/File"), "/usr/share/tool-plugins tool/noawait\n").unwrap();
    let hold = debs.join("hold");
    std::fs::write(&hold, "lib hold\n").unwrap();
    let selections = run(common::dpkg::clean_env(&mut Command::new("dpkg"))
        .arg(format!("--root={}", b.display()))
        .arg("--set-selections")
        .stdin(std::fs::File::open(&hold).unwrap()));
    assert_eq!(selections.code, 0, "{selections:?}");
    for (name, args) in [divert("/usr/bin/more"), statoverride("/usr/bin/tool")] {
        let r = tool(name, b, &args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(r.code, 0, "{name}: {r:?}");
    }
}

/// The lines `plant_in_tree` and `plant_in_database` must make (dpkg's backups of its files and
/// the mtime aside).
fn planted() -> Vec<String> {
    let md5 = common::dpkg::md5_hex;
    let (readme, zeros) = (md5(b"read me\n"), "0".repeat(32));
    let db = "var/lib/dpkg";
    vec![
        format!(
            "etc/tool.conf: content: {} in A, {} in B",
            md5(b"setting=1\n"),
            md5(b"setting=22\n")
        ),
        "etc/tool.conf: size: 10 in A, 11 in B".into(),
        "usr/bin/tool: owner: 0:0 in A, 1:50 in B".into(),
        "usr/bin/tool-link: target: tool in A, tool2 in B".into(),
        "usr/lib/lib-link: type: symlink in A, file in B".into(),
        "usr/lib/lib.txt: mode: 0644 in A, 0600 in B".into(),
        format!("usr/share/doc/tool/README: content: {readme} in A, {} in B", md5(b"READ ME\n")),
        format!("{db}/diversions/usr/bin/more: diversion only in B: to /usr/bin/more.real by :"),
        format!("{db}/info/tool.md5sums: line only in A: {readme}  usr/share/doc/tool/README"),
        format!("{db}/info/tool.md5sums: line only in B: {zeros}  usr/share/doc/tool/README"),
        format!("{db}/statoverride/usr/bin/tool: override only in B: root staff 4755"),
        format!(
            "{db}/status/lib:all/Status: field: install ok installed in A, hold ok installed in B"
        ),
        format!("{db}/triggers/File: line only in A: /usr/share/tool-plugins tool"),
        format!("{db}/triggers/File: line only in B: /usr/share/tool-plugins tool/noawait"),
    ]
}

/// `dpkg-divert` arguments: a local diversion of `path` to `path.real`, no file renamed.
fn divert(path: &str) -> (&'static str, Vec<String>) {
    let real = format!("{path}.real");
    let args = ["--local", "--no-rename", "--divert", &real, "--add", path];
    ("dpkg-divert", args.map(String::from).to_vec())
}

/// `dpkg-statoverride` arguments: `path` overridden to root, staff, 4755 (the file left as it is).
fn statoverride(path: &str) -> (&'static str, Vec<String>) {
    ("dpkg-statoverride", ["--add", "root", "staff", "4755", path].map(String::from).to_vec())
}
