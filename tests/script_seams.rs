//! Crashes at the seams between the transaction and the maintainer scripts (issue 26): what a
//! call killed while a script runs leaves, held to what dpkg leaves when killed at the same
//! point; what a killed call's leftovers do to the next call; and a script that removes what
//! the call has pending. Roots with a shell (tests/common/dpkg.rs, `DbRoot::with_shell`), the
//! real dpkg beside the real binary.

mod common;

use common::dpkg::*;
use common::Run;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A preinst that writes `/PKG.preinst-ran`, changes the tree (`/etc/scr-seam.conf` emptied, as
/// `dpkg-maintscript-helper rm_conffile` moves a conffile away), then blocks reading the FIFO
/// `/hold` until it is killed. Built-ins only: the root's shell is a lone busybox.
const BLOCKING_PREINST: &str = "#!/bin/sh
echo \"$@\" > /scr-seam.preinst-ran
: > /etc/scr-seam.conf
read x < /hold
exit 0
";

fn build(dir: &Path, version: &str, preinst: Option<&str>) -> PathBuf {
    let mut pkg = Pkg::new("scr-seam", version, "amd64")
        .file("/usr/share/scr-seam/file", version.as_bytes(), 0o644)
        .conffile("/etc/scr-seam.conf", format!("conf {version}\n").as_bytes());
    if let Some(body) = preinst {
        pkg = pkg.script("preinst", body);
    }
    pkg.build(dir)
}

/// Runs `cmd` in a process group of its own until `root/marker` appears, then kills the whole
/// group (the program and the script it runs) with SIGKILL, as a power cut ends them.
fn kill_when(mut cmd: Command, root: &Path, marker: &str) {
    let mut child = cmd.process_group(0).spawn().unwrap();
    let started = Instant::now();
    while !root.join(marker).exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{cmd:?} ended ({status}) before {marker} appeared");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{marker} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let group = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process_group(group, rustix::process::Signal::KILL).unwrap();
    child.wait().unwrap();
}

fn mkfifo(path: &Path) {
    let r = common::run(Command::new("mkfifo").arg(path));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// `dpkg-query -W -f '${Status} ${Version}'` of scr-seam in `root`.
fn status(root: &Path) -> String {
    let r = dpkg_query(root, &["-W", "-f=${Status} ${Version}", "scr-seam"]);
    assert_eq!(r.code, 0, "dpkg-query: {}", r.stderr);
    r.stdout
}

fn dpkg_query(root: &Path, args: &[&str]) -> Run {
    tool("dpkg-query", root, args)
}

/// Killed while the new preinst of an upgrade runs, after it changed the tree: dpkg has noted
/// the package `install reinstreq half-installed` before the preinst, and so has the engine
/// (dpkg's `updates/` record, which the real dpkg reads over status), so that after recovery
/// `dpkg --audit` names it on both sides; running the same unpack again finishes it, the
/// record gone, the two databases the same.
#[test]
fn killed_in_a_new_preinst_the_package_is_recorded_half_installed_as_dpkg_records_it() {
    let debs = tempfile::tempdir().unwrap();
    let v1 = build(debs.path(), "1.0", None);
    let v2 = build(debs.path(), "2.0", Some(BLOCKING_PREINST));
    let (ours, theirs) = (DbRoot::with_shell(), DbRoot::with_shell());
    for root in [&ours, &theirs] {
        dpkg_unpack(root.path(), &[&v1]);
        dpkg_configure(root.path(), &[]);
        mkfifo(&root.path().join("hold"));
    }

    let mut dpkg_cmd = Command::new("dpkg");
    dpkg_cmd.arg(format!("--root={}", theirs.path().display())).args(NO_DEPENDS);
    dpkg_cmd.args(["--no-triggers", "--unpack"]).arg(&v2);
    clean_env(&mut dpkg_cmd);
    kill_when(dpkg_cmd, theirs.path(), "scr-seam.preinst-ran");
    let mut unpack_cmd = Command::new(common::unpack_bin());
    unpack_cmd.args(["-q", "-s", "fsync"]).arg(&v2).arg(ours.path());
    kill_when(unpack_cmd, ours.path(), "scr-seam.preinst-ran");

    let recovered = common::unpack(["--recover".as_ref(), ours.path().as_os_str()]);
    assert_eq!(recovered.code, 0, "{}", recovered.stderr);
    assert_eq!(status(theirs.path()), "install reinstreq half-installed 1.0");
    assert_eq!(status(ours.path()), status(theirs.path()), "what dpkg reads of each root");
    let audit = |root: &Path| {
        let r = dpkg(root, &["--audit"]);
        (r.code, r.stdout)
    };
    let (code, said) = audit(ours.path());
    assert!(said.contains("scr-seam"), "dpkg --audit names the package: {said}");
    assert_eq!((code, said), audit(theirs.path()), "dpkg --audit, ours (left) and dpkg's");
    assert_eq!(
        std::fs::read_to_string(ours.path().join("usr/share/scr-seam/file")).unwrap(),
        "1.0"
    );

    // Run again: the preinst does not block any more (an empty file in the FIFO's place).
    for root in [&ours, &theirs] {
        std::fs::remove_file(root.path().join("hold")).unwrap();
        std::fs::write(root.path().join("hold"), b"").unwrap();
    }
    dpkg_unpack(theirs.path(), &[&v2]);
    let again = common::unpack([
        "-q".as_ref(),
        "-s".as_ref(),
        "fsync".as_ref(),
        v2.as_os_str(),
        ours.path().as_os_str(),
    ]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    // What the preinst and this test wrote, at the same time on both sides: only the database
    // is compared (the two `hold` files were written a clock tick apart, now and then).
    for root in [&ours, &theirs] {
        for made in ["etc/scr-seam.conf", "scr-seam.preinst-ran", "hold"] {
            let r = common::run(
                Command::new("touch").arg("-d").arg("@1700000000").arg(root.path().join(made)),
            );
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
    }
    assert_eq!(status(ours.path()), "install ok unpacked 2.0");
    let records = std::fs::read_dir(ours.admindir().join("updates")).unwrap().count();
    assert_eq!(records, 0, "the records are gone once status holds them");
    assert_same_db(
        &DbSnapshot::take(ours.path()),
        &DbSnapshot::take(theirs.path()),
        "after the unpack run again",
    );
}

/// What a call killed after its commit (in an old `postrm upgrade`) left of the new scripts'
/// directory, `tmp.ci.unpack-new/`, is never run by the next call as another package's: the
/// next call removes it first.
#[test]
fn a_killed_call_s_scripts_are_never_run_by_the_next_one() {
    let debs = tempfile::tempdir().unwrap();
    let v1 = build(debs.path(), "1.0", None);
    let v2 = build(debs.path(), "2.0", None);
    let root = DbRoot::with_shell();
    dpkg_unpack(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    // The first package of that call had an old postrm, kept aside, when the call was killed.
    let left = root.admindir().join("tmp.ci.unpack-new/0");
    std::fs::create_dir_all(&left).unwrap();
    edit(
        root.path(),
        "/var/lib/dpkg/tmp.ci.unpack-new/0/old-postrm",
        b"#!/bin/sh\necho \"$@\" > /ran-as-scr-seam\n",
    );
    common::run(Command::new("chmod").arg("755").arg(left.join("old-postrm")));
    let r = common::unpack([
        "-q".as_ref(),
        "-s".as_ref(),
        "fsync".as_ref(),
        v2.as_os_str(),
        root.path().as_os_str(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !root.path().join("ran-as-scr-seam").exists(),
        "a killed call's script ran as scr-seam's"
    );
    assert!(!root.admindir().join("tmp.ci.unpack-new").exists());
}

/// A later package's preinst removes a directory an earlier package of the same call has a
/// file pending in: the call fails (exit 1, naming the path) and rolls back, instead of writing
/// a journal whose rename can never be done, after which every call and `--recover` would exit
/// 4. The root is usable at once: `--recover` has nothing to do, and the packages unpack one
/// call each.
#[test]
fn a_script_that_removes_a_pending_directory_never_wedges_the_root() {
    let debs = tempfile::tempdir().unwrap();
    let first = Pkg::new("scr-first", "1.0", "amd64")
        .file("/usr/share/scr-shared/first", b"first\n", 0o644)
        .build(debs.path());
    let second = Pkg::new("scr-second", "1.0", "amd64")
        .file("/usr/share/scr-second/file", b"second\n", 0o644)
        .script("preinst", "#!/bin/sh\nrm -rf /usr/share/scr-shared\n")
        .build(debs.path());
    let root = DbRoot::with_shell();
    std::fs::create_dir_all(root.path().join("usr/share/scr-shared")).unwrap();
    let unpack = |debs: &[&PathBuf]| {
        let mut args: Vec<&std::ffi::OsStr> = vec!["-s".as_ref(), "fsync".as_ref()];
        args.extend(debs.iter().map(|d| d.as_os_str()));
        args.push(root.path().as_os_str());
        common::unpack(args)
    };
    let r = unpack(&[&first, &second]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("usr/share/scr-shared/first"), "{}", r.stderr);
    let recovered = common::unpack(["--recover".as_ref(), root.path().as_os_str()]);
    assert_eq!(recovered.code, 0, "{}", recovered.stderr);
    assert!(recovered.stdout.contains("nothing to recover"), "{}", recovered.stdout);
    std::fs::create_dir_all(root.path().join("usr/share/scr-shared")).unwrap();
    for deb in [&second, &first] {
        let r = unpack(&[deb]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    assert!(root.path().join("usr/share/scr-shared/first").is_file());
    dpkg_configure(root.path(), &[]);
    assert_eq!(dpkg(root.path(), &["--audit"]).stdout, "");
}
