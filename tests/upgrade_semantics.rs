//! The semantics a real distribution upgrade needs (issue 27, item 2), each held to the real
//! dpkg: two fresh roots taken through the same scenario (tests/common/dpkg.rs, `Oracle`), one
//! by `dpkg --unpack`, one by `unpack`, compared after each step, tree and database.
//!
//! `DPKG_ORACLE_SELF_CHECK=1 cargo test --test upgrade_semantics` runs dpkg on both sides: every
//! test must pass then too. The roots hold no symlink that leads out of them (dpkg `--root`
//! follows one to the host).

mod common;

use common::dpkg::*;
use std::path::{Path, PathBuf};

/// The packages of a test, built into a directory of their own.
fn debs() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("unpack-semantics-debs").tempdir().unwrap()
}

/// A symlink the root had before, with a fixed mtime so that two roots compare equal.
fn symlink(root: &Path, path: &str, target: &str) {
    let at = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, &at).unwrap();
    let touch =
        common::run(std::process::Command::new("touch").args(["-h", "-d", "@1700000000"]).arg(&at));
    assert_eq!(touch.code, 0, "{}", touch.stderr);
}

fn link_of(root: &Path, path: &str) -> Option<PathBuf> {
    std::fs::read_link(root.join(path.trim_start_matches('/'))).ok()
}

/// dpkg's existing-directory rules (src/main/archives.c, tarobject): merged /usr, where the
/// root has `bin -> usr/bin` and an installed package lists `/bin` as a directory, meets trixie's
/// base-files shipping `./bin -> usr/bin` itself: the symlink is kept, listed by both, and no
/// conflict is found with the package that lists the directory (dpkg's
/// `linktosameexistingdir`). A directory entry meeting a symlink to a directory keeps the
/// symlink (the old package's files go through it into usr/bin); a symlink entry meeting a
/// real directory keeps the directory, empty or not, whoever lists it.
#[test]
fn existing_directories_and_links_to_them_are_kept_as_dpkg_keeps_them() {
    let dir = debs();
    let lister = Pkg::new("sem-lister", "1.0", "all")
        .dir("/bin", 0o755)
        .file("/bin/sem-tool", b"#!/bin/sh\n", 0o755)
        .dir("/srv/full", 0o755)
        .file("/srv/full/data", b"data\n", 0o644)
        .build(dir.path());
    let links = Pkg::new("sem-links", "1.0", "all")
        // The same directory as the root's symlink: kept, though sem-lister lists /bin.
        .symlink("/bin", "usr/bin")
        .dir("/usr/bin", 0o755)
        // A real directory, not empty, and one that is empty: both kept.
        .symlink("/srv/full", "elsewhere")
        .symlink("/srv/empty", "elsewhere")
        .dir("/srv/elsewhere", 0o755)
        // A symlink to another directory than the root's: replaced.
        .symlink("/opt/other", "../srv/elsewhere")
        .build(dir.path());
    let o = Oracle::new("existing directories");
    o.both(|root| {
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::create_dir_all(root.join("srv/empty")).unwrap();
        std::fs::create_dir_all(root.join("opt/dir")).unwrap();
        symlink(root, "/bin", "usr/bin");
        symlink(root, "/opt/other", "dir");
        Via::Dpkg.unpack(root, &[&lister]);
    });
    o.unpack(&[&links]);
    for root in [o.theirs.path(), o.ours.path()] {
        assert_eq!(link_of(root, "/bin"), Some("usr/bin".into()));
        assert!(root.join("usr/bin/sem-tool").is_file());
        assert!(root.join("srv/full/data").is_file());
        assert!(root.join("srv/empty").is_dir() && link_of(root, "/srv/empty").is_none());
        assert_eq!(link_of(root, "/opt/other"), Some("../srv/elsewhere".into()));
    }
    let list = std::fs::read_to_string(o.ours.admindir().join("info/sem-links.list")).unwrap();
    assert!(list.lines().any(|l| l == "/bin") && list.lines().any(|l| l == "/srv/full"), "{list}");
    o.configure(&[]);
}

/// The other side of that rule: a directory entry meeting a symlink that leads to no directory
/// replaces the symlink with a directory, as dpkg does (tarobject `stat`s the name, follows the
/// link, finds no directory, and moves the link aside). Trixie's base-files ships `./var/lock/`
/// where a bookworm root has `var/lock -> /run/lock` and `/run` is an empty mount point: the
/// dist-upgrade's last difference from dpkg was the engine keeping the link and making the
/// directory it names. Here relative links, so that dpkg `--root` stays in its root: one
/// dangling, one to a file.
#[test]
fn a_directory_entry_replaces_a_symlink_that_leads_to_no_directory() {
    let dir = debs();
    let deb = Pkg::new("sem-lock", "1.0", "all")
        .dir("/var/lock", 0o755)
        .file("/var/lock/sem-note", b"note\n", 0o644)
        .dir("/opt/tofile", 0o755)
        .build(dir.path());
    let o = Oracle::new("a directory entry over a symlink to no directory");
    o.both(|root| {
        std::fs::create_dir_all(root.join("run")).unwrap();
        std::fs::create_dir_all(root.join("srv")).unwrap();
        std::fs::write(root.join("srv/file"), b"file\n").unwrap();
        let file = std::fs::File::options().write(true).open(root.join("srv/file")).unwrap();
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000))
            .unwrap();
        symlink(root, "/var/lock", "../run/lock");
        symlink(root, "/opt/tofile", "../srv/file");
    });
    o.unpack(&[&deb]);
    for root in [o.theirs.path(), o.ours.path()] {
        assert_eq!(link_of(root, "/var/lock"), None, "{}", root.display());
        assert_eq!(std::fs::read(root.join("var/lock/sem-note")).unwrap(), b"note\n");
        assert!(!root.join("run/lock").exists(), "the link's target is not made");
        assert!(root.join("opt/tofile").is_dir() && link_of(root, "/opt/tofile").is_none());
        assert_eq!(std::fs::read(root.join("srv/file")).unwrap(), b"file\n");
    }
    o.configure(&[]);
}

/// The same rule without a database: a symlink entry meeting a directory leaves it.
#[test]
fn a_symlink_entry_meeting_a_directory_leaves_it_without_a_database_too() {
    let dir = debs();
    let deb = Pkg::new("sem-plain", "1.0", "all")
        .symlink("/bin", "usr/bin")
        .symlink("/data", "srv")
        .file("/usr/bin/x", b"x\n", 0o755)
        .build(dir.path());
    let root = tempfile::Builder::new().prefix("unpack-semantics-plain").tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("usr/bin")).unwrap();
    std::fs::create_dir_all(root.path().join("data/kept")).unwrap();
    symlink(root.path(), "/bin", "usr/bin");
    let r =
        common::unpack(["-s".as_ref(), "none".as_ref(), deb.as_os_str(), root.path().as_os_str()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(link_of(root.path(), "/bin"), Some("usr/bin".into()));
    assert!(root.path().join("data/kept").is_dir());
    assert!(root.path().join("usr/bin/x").is_file());
}

/// One call of several packages, as apt makes it: `dpkg --unpack DEBS` in theirs, the engine's
/// `unpack_each` (the front end's call: each package a transaction of its own, in order) in
/// ours; every package must unpack, and the roots then agree.
fn unpack_in_one_call(o: &Oracle, debs: &[&Path]) {
    Via::Dpkg.unpack(o.theirs.path(), debs);
    if ours_via() == Via::Dpkg {
        Via::Dpkg.unpack(o.ours.path(), debs);
    } else {
        let options = unpack::Options::new(unpack::durability::by_name("fsync", 1).unwrap());
        let paths: Vec<PathBuf> = debs.iter().map(|d| d.to_path_buf()).collect();
        let mut failed = Vec::new();
        unpack::unpack_each(&paths, o.ours.path(), &options, &mut |deb, result| {
            if let Err(e) = result {
                failed.push(format!("{}: {e}", deb.display()));
            }
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert!(failed.is_empty(), "{failed:?}");
    }
    o.check("after the call");
}

/// The field `name` of `key`'s status stanza in `root`.
fn status_field(root: &Path, key: &str, name: &str) -> Option<String> {
    let status = parse_status(&std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap());
    status.get(key)?.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

/// trixie's `/etc/login.defs`, which moves from login to a package of its own: in one call the
/// old owner's new version drops the conffile (kept as obsolete), and the new package ships it
/// as its conffile, with no Replaces. The new package records the old owner's hash (not
/// `newconffile`), the old owner's entry stays obsolete and leaves its list, and
/// `dpkg --configure -a` then installs the new version without a question (there is no
/// terminal: a question would fail it).
#[test]
fn a_conffile_moving_to_another_package_keeps_its_hash_and_configure_asks_nothing() {
    let dir = debs();
    let login1 = Pkg::new("sem-login", "1.0", "all")
        .file("/usr/bin/sem-login", b"1\n", 0o755)
        .conffile("/etc/sem/login.defs", b"defaults 1\n")
        .build(dir.path());
    let login2 = Pkg::new("sem-login", "2.0", "all")
        .file("/usr/bin/sem-login", b"2\n", 0o755)
        .build(dir.path());
    let defs = Pkg::new("sem-login-defs", "2.0", "all")
        .conffile("/etc/sem/login.defs", b"defaults 2\n")
        .build(dir.path());
    let o = Oracle::new("a conffile moving to another package");
    o.both(|root| Via::Dpkg.install(root, &[&login1], &[]));
    unpack_in_one_call(&o, &[&login2, &defs]);
    let ours = o.ours.path();
    let hash = md5_hex(b"defaults 1\n");
    assert_eq!(
        status_field(ours, "sem-login-defs:all", "Conffiles"),
        Some(format!("\n /etc/sem/login.defs {hash}"))
    );
    assert_eq!(
        status_field(ours, "sem-login:all", "Conffiles"),
        Some(format!("\n /etc/sem/login.defs {hash} obsolete"))
    );
    let list = std::fs::read_to_string(o.ours.admindir().join("info/sem-login.list")).unwrap();
    assert!(!list.contains("login.defs"), "{list}");
    o.configure(&[]);
    assert_eq!(std::fs::read(ours.join("etc/sem/login.defs")).unwrap(), b"defaults 2\n");
}

/// A conffile taken by Replaces from an installed package, one from a package with only its
/// config files left (no Replaces needed), and one an installed package that replaces the
/// new one keeps (the new package records it obsolete, unlisted). Each unpack its own call.
#[test]
fn conffiles_taken_by_replaces_from_config_files_and_kept_by_a_replacing_owner() {
    let dir = debs();
    let old = Pkg::new("sem-old", "1.0", "all")
        .file("/usr/share/sem-old/data", b"old\n", 0o644)
        .conffile("/etc/sem-old.conf", b"old conf\n")
        .build(dir.path());
    let gone = Pkg::new("sem-gone", "1.0", "all")
        .conffile("/etc/sem-gone.conf", b"gone conf\n")
        .build(dir.path());
    let keeper = Pkg::new("sem-keeper", "1.0", "all")
        .field("Replaces", "sem-heir")
        .conffile("/etc/sem-kept.conf", b"keeper's\n")
        .build(dir.path());
    let heir = Pkg::new("sem-heir", "1.0", "all")
        .field("Replaces", "sem-old")
        .conffile("/etc/sem-old.conf", b"heir's old conf\n")
        .conffile("/etc/sem-gone.conf", b"heir's gone conf\n")
        .conffile("/etc/sem-kept.conf", b"heir's kept\n")
        .build(dir.path());
    let o = Oracle::new("conffiles taken over");
    o.both(|root| {
        Via::Dpkg.install(root, &[&old, &gone, &keeper], &[]);
        let r = dpkg(root, &["--remove", "sem-gone"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    });
    o.unpack(&[&heir]);
    let ours = o.ours.path();
    let conffiles = status_field(ours, "sem-heir:all", "Conffiles").unwrap();
    assert!(conffiles.contains(&format!("/etc/sem-old.conf {}", md5_hex(b"old conf\n"))));
    assert!(conffiles.contains(&format!("/etc/sem-gone.conf {}", md5_hex(b"gone conf\n"))));
    assert!(conffiles.contains(&format!("/etc/sem-kept.conf {} obsolete", md5_hex(b"keeper's\n"))));
    o.configure(&[]);
}

/// trixie's login.defs again, as apt's dist-upgrade orders it: the new owner first (its own
/// call, taking `/etc/login.defs` by Replaces, which marks the old owner's entry obsolete and
/// drops the path from its list), the old owner's new version later (another call). dpkg
/// carries an old conffile forward as obsolete only when the old version's list still names it
/// (src/main/unpack.c pkg_remove_old_files walks the list, newest first): the taken one is
/// forgotten, and the ones the new version drops are recorded, and appended to its list, in
/// the reverse of the old list's order.
#[test]
fn obsolete_conffiles_follow_the_old_list_in_reverse_and_a_taken_one_is_forgotten() {
    let dir = debs();
    let old1 = Pkg::new("sem-cf-old", "1.0", "all")
        .file("/usr/share/sem-cf/data", b"1\n", 0o644)
        .conffile("/etc/sem-cf/a.conf", b"a 1\n")
        .conffile("/etc/sem-cf/b.conf", b"b 1\n")
        .conffile("/etc/sem-cf/c.conf", b"c 1\n")
        .build(dir.path());
    let heir = Pkg::new("sem-cf-heir", "1.0", "all")
        .field("Replaces", "sem-cf-old (<< 2.0)")
        .conffile("/etc/sem-cf/a.conf", b"a 2\n")
        .build(dir.path());
    let old2 = Pkg::new("sem-cf-old", "2.0", "all")
        .file("/usr/share/sem-cf/data", b"2\n", 0o644)
        .build(dir.path());
    let o = Oracle::new("obsolete conffiles after a take-over");
    o.both(|root| Via::Dpkg.install(root, &[&old1], &[]));
    o.unpack(&[&heir]);
    o.unpack(&[&old2]);
    let field = |root: &Path| status_field(root, "sem-cf-old:all", "Conffiles");
    let list = |o: &DbRoot| std::fs::read_to_string(o.admindir().join("info/sem-cf-old.list"));
    assert_eq!(field(o.ours.path()), field(o.theirs.path()));
    assert_eq!(list(&o.ours).unwrap(), list(&o.theirs).unwrap());
    let (b, c) = (md5_hex(b"b 1\n"), md5_hex(b"c 1\n"));
    assert_eq!(
        field(o.ours.path()),
        Some(format!("\n /etc/sem-cf/c.conf {c} obsolete\n /etc/sem-cf/b.conf {b} obsolete"))
    );
    o.configure(&[]);
}

/// A directory two installed packages list, which both their new versions drop in one call,
/// goes (dpkg removes it with the second, once no package lists it); the engine's one
/// transaction for both does the same.
#[test]
fn a_directory_every_upgrade_of_the_call_drops_is_removed() {
    let dir = debs();
    let pkg = |name: &str, version: &str, shared: bool| {
        let p = Pkg::new(name, version, "all").file(
            &format!("/usr/share/{name}/file"),
            version.as_bytes(),
            0o644,
        );
        if shared { p.file(&format!("/usr/share/sem-shared/{name}"), b"x\n", 0o644) } else { p }
            .build(dir.path())
    };
    let (a1, b1) = (pkg("sem-a", "1.0", true), pkg("sem-b", "1.0", true));
    let (a2, b2) = (pkg("sem-a", "2.0", false), pkg("sem-b", "2.0", false));
    let o = Oracle::new("a directory dropped by two upgrades, one call");
    o.both(|root| Via::Dpkg.install(root, &[&a1, &b1], &[]));
    unpack_in_one_call(&o, &[&a2, &b2]);
    assert!(!o.ours.path().join("usr/share/sem-shared").exists());
    let o = Oracle::new("a directory dropped by two upgrades, one transaction");
    o.both(|root| Via::Dpkg.install(root, &[&a1, &b1], &[]));
    o.unpack(&[&a2, &b2]);
    assert!(!o.ours.path().join("usr/share/sem-shared").exists());
}

/// The same package twice in one call, as apt may pass it: dpkg installs the first, then
/// upgrades it to the second; so does the front end's call.
#[test]
fn the_same_package_twice_in_one_call_is_installed_then_upgraded() {
    let dir = debs();
    let v1 = Pkg::new("sem-twice", "1.0", "all")
        .file("/usr/share/sem-twice/one", b"1\n", 0o644)
        .conffile("/etc/sem-twice.conf", b"1\n")
        .build(dir.path());
    let v2 = Pkg::new("sem-twice", "2.0", "all")
        .file("/usr/share/sem-twice/two", b"2\n", 0o644)
        .conffile("/etc/sem-twice.conf", b"2\n")
        .build(dir.path());
    let o = Oracle::new("the same package twice");
    unpack_in_one_call(&o, &[&v1, &v2]);
    assert!(!o.ours.path().join("usr/share/sem-twice/one").exists());
    o.configure(&[]);
}

/// `remove-on-upgrade` conffiles (dpkg 1.20.10): the new version lists them in its conffiles
/// member and does not ship them; after the unpack the unmodified one is removed, the one the
/// administrator edited kept as `.dpkg-old`, a leftover `.dpkg-dist` removed, one already gone
/// left gone, and the status records each with its old hash and the flag. A package that
/// ships a path it marks so is refused (dpkg: "marked for removal on upgrade, shipped in
/// package"), exit 3.
#[test]
fn remove_on_upgrade_conffiles_go_or_are_kept_as_dpkg_old() {
    let dir = debs();
    let v1 = Pkg::new("sem-rou", "1.0", "all")
        .file("/usr/share/sem-rou/f", b"1\n", 0o644)
        .conffile("/etc/sem-rou/plain.conf", b"plain\n")
        .conffile("/etc/sem-rou/edited.conf", b"edited\n")
        .conffile("/etc/sem-rou/dist.conf", b"dist\n")
        .conffile("/etc/sem-rou/gone.conf", b"gone\n")
        .build(dir.path());
    let members = "remove-on-upgrade /etc/sem-rou/plain.conf\nremove-on-upgrade /etc/sem-rou/edited.conf\nremove-on-upgrade /etc/sem-rou/dist.conf\nremove-on-upgrade /etc/sem-rou/gone.conf\n";
    let v2 = Pkg::new("sem-rou", "2.0", "all")
        .file("/usr/share/sem-rou/f", b"2\n", 0o644)
        .member("conffiles", members.as_bytes())
        .build(dir.path());
    let o = Oracle::new("remove-on-upgrade");
    o.both(|root| {
        Via::Dpkg.install(root, &[&v1], &[]);
        edit(root, "/etc/sem-rou/edited.conf", b"the administrator's\n");
        edit(root, "/etc/sem-rou/dist.conf.dpkg-dist", b"left over\n");
        std::fs::remove_file(root.join("etc/sem-rou/gone.conf")).unwrap();
    });
    o.unpack(&[&v2]);
    let ours = o.ours.path();
    assert!(!ours.join("etc/sem-rou/plain.conf").exists());
    assert!(!ours.join("etc/sem-rou/dist.conf.dpkg-dist").exists());
    assert_eq!(
        std::fs::read(ours.join("etc/sem-rou/edited.conf.dpkg-old")).unwrap(),
        b"the administrator's\n"
    );
    let conffiles = status_field(ours, "sem-rou:all", "Conffiles").unwrap();
    assert!(
        conffiles.contains(&format!(
            "/etc/sem-rou/plain.conf {} remove-on-upgrade",
            md5_hex(b"plain\n")
        )),
        "{conffiles}"
    );
    o.configure(&[]);

    // dpkg-deb refuses to build it; --nocheck builds it from the builder's tree.
    let valid = Pkg::new("sem-rou-bad", "1.0", "all")
        .file("/etc/sem-rou-bad.conf", b"x\n", 0o644)
        .build(dir.path());
    let tree = dir.path().join("sem-rou-bad_1.0_all.tree");
    std::fs::write(tree.join("DEBIAN/conffiles"), "remove-on-upgrade /etc/sem-rou-bad.conf\n")
        .unwrap();
    let bad = dir.path().join("sem-rou-bad.deb");
    let built = common::run(
        std::process::Command::new("dpkg-deb")
            .args(["--nocheck", "--root-owner-group", "--build"])
            .arg(&tree)
            .arg(&bad),
    );
    assert_eq!(built.code, 0, "{}", built.stderr);
    std::fs::remove_file(valid).unwrap();
    let r = common::unpack(["-s".as_ref(), "none".as_ref(), bad.as_os_str(), ours.as_os_str()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("marked for removal on upgrade, shipped in package"), "{}", r.stderr);
    let theirs = dpkg(o.theirs.path(), &["--unpack", bad.to_str().unwrap()]);
    assert_ne!(theirs.code, 0);
    assert!(
        theirs.stderr.contains("marked for removal on upgrade, shipped in package"),
        "{}",
        theirs.stderr
    );
    // dpkg leaves a `not-installed` stanza for the failed install, the engine the database as
    // it was (tests/dpkg_oracle.rs says why): no file of it either way.
    assert!(!ours.join("etc/sem-rou-bad.conf").exists());
}

/// A package dpkg refused during its extraction leaves a `not-installed` stanza behind (dpkg
/// writes the new package's stanza before it meets the conflict); the package that is then
/// installed after all replaces that stanza, and so does one installed over its own
/// `config-files` remains: never a second stanza of the same package, which would make every
/// later dpkg refuse the status file.
#[test]
fn a_not_installed_or_config_files_stanza_is_replaced_never_doubled() {
    let dir = debs();
    let owner = Pkg::new("sem-owner", "1.0", "amd64")
        .file("/usr/bin/sem-shared", b"owner's\n", 0o755)
        .build(dir.path());
    let clash = Pkg::new("sem-late", "1.0", "amd64")
        .file("/usr/bin/sem-shared", b"late's\n", 0o755)
        .build(dir.path());
    let fixed = Pkg::new("sem-late", "1.1", "amd64")
        .file("/usr/bin/sem-late", b"late\n", 0o755)
        .conffile("/etc/sem-late.conf", b"1\n")
        .build(dir.path());
    let o = Oracle::new("a not-installed stanza, then config-files");
    o.both(|root| {
        Via::Dpkg.install(root, &[&owner], &[]);
        let mut args: Vec<&str> = NO_DEPENDS.to_vec();
        args.extend(["--unpack", clash.to_str().unwrap()]);
        let r = dpkg(root, &args);
        assert_eq!(r.code, 1, "dpkg accepted the clash:\n{}", r.stderr);
        let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
        assert!(status.contains("Package: sem-late\nStatus: install ok not-installed"), "{status}");
    });
    o.unpack(&[&fixed]);
    o.configure(&[]);
    // Removed, its conffile left: config-files; then installed again over it.
    o.both(|root| {
        let r = dpkg(root, &["--remove", "sem-late"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    });
    o.check("after the removal");
    o.unpack(&[&fixed]);
    for root in [o.ours.path(), o.theirs.path()] {
        let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
        assert_eq!(status.matches("Package: sem-late\n").count(), 1, "{status}");
    }
    o.configure(&[]);
}
