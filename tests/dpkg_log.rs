//! Database mode's dpkg.log: `unpack` appends to the root's own `var/log/dpkg.log` the lines
//! dpkg writes to its log for the same call (the real dpkg told `--log=` that file is the
//! oracle), and the file is the root's: reached through its confined resolution, never through
//! a symlink that leads out of it.

mod common;

use common::dpkg::*;
use common::{unpack, Run};
use std::path::Path;

/// The messages of a log, its time stamps cut off.
fn messages(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.get(20..).unwrap_or(l).to_string())
        .collect()
}

fn unpack_into(root: &Path, deb: &Path) -> Run {
    let r = unpack(["-s".as_ref(), "none".as_ref(), deb.as_os_str(), root.as_os_str()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r
}

#[test]
fn unpack_logs_dpkgs_lines_in_the_roots_dpkg_log() {
    let debs = tempfile::tempdir().unwrap();
    let a1 =
        Pkg::new("la", "1.0", "amd64").file("/usr/share/la/1", b"1\n", 0o644).build(debs.path());
    let b = Pkg::new("lb", "1.0", "all")
        .field("Replaces", "la")
        .file("/usr/share/la/1", b"b\n", 0o644)
        .build(debs.path());
    let (theirs, ours) = (DbRoot::with_shell(), DbRoot::with_shell());
    let log = |root: &Path| root.join("var/log/dpkg.log");
    for deb in [&a1, &b] {
        let flag = format!("--log={}", log(theirs.path()).display());
        let r = dpkg(theirs.path(), &[&flag, "--no-triggers", "--unpack", deb.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        unpack_into(ours.path(), deb);
    }
    assert_eq!(messages(&log(ours.path())), messages(&log(theirs.path())));
    assert_eq!(
        messages(&log(ours.path())),
        [
            "startup archives unpack",
            "install la:amd64 <none> 1.0",
            "status half-installed la:amd64 1.0",
            "status unpacked la:amd64 1.0",
            "startup archives unpack",
            "install lb:all <none> 1.0",
            "status half-installed lb:all 1.0",
            "disappear la:amd64 1.0 <none>",
            "status not-installed la:amd64 <none>",
            "status unpacked lb:all 1.0",
        ]
    );
}

#[test]
fn a_log_that_leads_out_of_the_root_is_not_written() {
    let debs = tempfile::tempdir().unwrap();
    let a = Pkg::new("la", "1.0", "all").file("/usr/share/la/1", b"1\n", 0o644).build(debs.path());
    let host = tempfile::tempdir().unwrap();
    let host_log = host.path().join("dpkg.log");
    std::fs::write(&host_log, "the host's\n").unwrap();

    let root = DbRoot::with_shell();
    std::os::unix::fs::symlink(&host_log, root.path().join("var/log/dpkg.log")).unwrap();
    let r = unpack_into(root.path(), &a);
    assert!(r.stderr.contains("no dpkg.log lines for this call"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&host_log).unwrap(), "the host's\n");

    let root = DbRoot::with_shell();
    std::fs::remove_dir(root.path().join("var/log")).unwrap();
    std::os::unix::fs::symlink(host.path(), root.path().join("var/log")).unwrap();
    unpack_into(root.path(), &a);
    assert_eq!(std::fs::read_to_string(&host_log).unwrap(), "the host's\n");
    assert_eq!(
        std::fs::read_dir(host.path()).unwrap().count(),
        1,
        "nothing made in the host's directory"
    );
}

#[test]
fn a_root_without_var_log_gets_no_log_and_no_warning() {
    let debs = tempfile::tempdir().unwrap();
    let a = Pkg::new("la", "1.0", "all").file("/usr/share/la/1", b"1\n", 0o644).build(debs.path());
    let root = DbRoot::new();
    let r = unpack_into(root.path(), &a);
    assert!(!r.stderr.contains("dpkg.log"), "{}", r.stderr);
    assert!(!root.path().join("var/log").exists());
}
