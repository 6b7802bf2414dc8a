//! The dpkg oracle for maintainer scripts and triggers (issue 18): `unpack` then
//! `dpkg --configure -a` must call the same scripts, with the same arguments and environment,
//! and leave the same tree and database as `dpkg --unpack` then `dpkg --configure -a`. Every
//! case takes two roots with a shell (tests/common/dpkg.rs, `DbRoot::with_shell`) through the
//! same scenario in lockstep and compares, after the unpack and after the configure, the trees
//! and databases (`DbSnapshot`) and the fixtures' logs.
//!
//! The fixtures' four scripts each append one line per call to ROOT/var/log/scripts.log:
//! `NAME_VERSION SCRIPT [ARG]...`, then the environment dpkg gives them (`DPKG_MAINTSCRIPT_*`,
//! `DPKG_ROOT`, `DPKG_ADMINDIR`, the working directory and umask), then after ` || ` the two
//! values that name the caller and may differ: `DPKG_RUNNING_VERSION` and `DPKG_FORCE` (left out
//! of the comparison). A script exits 1 when ROOT/fail/NAME_VERSION.SCRIPT.ACTION exists.
//!
//! What dpkg 1.21 does, per case, is written at each test as the exact sequence of calls: it is
//! the sequence the engine must make. Its environment, from the log of a fresh install with
//! `--root=ROOT`: the scripts run chrooted into ROOT with `DPKG_ROOT=` (set, empty),
//! `DPKG_ADMINDIR=/var/lib/dpkg` (inside the chroot), `DPKG_MAINTSCRIPT_PACKAGE=NAME`,
//! `DPKG_MAINTSCRIPT_NAME=SCRIPT`, `DPKG_MAINTSCRIPT_ARCH` the package's architecture,
//! `DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT=1`, `DPKG_MAINTSCRIPT_DEBUG=0`, working directory `/`,
//! umask 022 whatever the caller's (dpkg sets it), `DPKG_RUNNING_VERSION=1.21.22`, and
//! `DPKG_FORCE` the force options in effect (here those of the command line and the host's
//! /etc/dpkg/dpkg.cfg.d: `security-mac,downgrade,...`). dpkg runs a new package's scripts from
//! the archive's control members (extracted into the admin directory's `tmp.ci/`, gone after
//! the call), the installed version's from `info/`; the log does not tell which path ran.
//!
//! dpkg is run with `--no-triggers` (see `NO_TRIGGERS`): without it, it runs the triggers
//! pending in configured packages before it exits, which the engine leaves to
//! `dpkg --configure`.
//!
//! `DPKG_ORACLE_SELF_CHECK=1 cargo test --test dpkg_scripts` runs dpkg on both sides: every test
//! must pass then but `--no-scripts`' (dpkg has no such option) and the many-package failure's
//! (dpkg does not unwind the packages before the failing one; the engine must).

mod common;

use common::dpkg::*;
use common::scripts::*;
use common::Run;
use std::path::{Path, PathBuf};

/// The packages of a test, built into a directory of their own.
struct Debs {
    dir: tempfile::TempDir,
}

impl Debs {
    fn new() -> Debs {
        Debs { dir: tempfile::Builder::new().prefix("unpack-scripts-debs").tempdir().unwrap() }
    }

    /// `NAME_VERSION_amd64.deb` with the four logging scripts and one file of its own,
    /// `/usr/share/NAME/file`, whose content is the version.
    fn logged(&self, name: &str, version: &str) -> PathBuf {
        self.build(logging(Pkg::new(name, version, "amd64"), name, version).file(
            &format!("/usr/share/{name}/file"),
            format!("{name} {version}\n").as_bytes(),
            0o644,
        ))
    }

    fn build(&self, pkg: Pkg) -> PathBuf {
        pkg.build(self.dir.path())
    }
}

/// The trigger queue dpkg leaves out of DbSnapshot (it makes it on every run): compared here,
/// where triggers are the point, an absent file as an empty one.
fn unincorp(root: &Path) -> String {
    std::fs::read_to_string(root.join("var/lib/dpkg/triggers/Unincorp")).unwrap_or_default()
}

/// Two roots with a shell through the same scenario: `theirs` by dpkg, `ours` by `unpack` (or
/// dpkg under DPKG_ORACLE_SELF_CHECK=1).
struct Scripted {
    ours: DbRoot,
    theirs: DbRoot,
    what: String,
}

impl Scripted {
    fn new(what: &str) -> Scripted {
        Scripted { ours: DbRoot::with_shell(), theirs: DbRoot::with_shell(), what: what.into() }
    }

    fn both(&self, prepare: impl Fn(&Path)) {
        prepare(self.theirs.path());
        prepare(self.ours.path());
    }

    /// Makes the script of `who` (`NAME_VERSION`) fail when called as `script action`.
    fn fail(&self, who: &str, script: &str, action: &str) {
        self.both(|root| {
            std::fs::create_dir_all(root.join("fail")).unwrap();
            edit(root, &format!("/fail/{who}.{script}.{action}"), b"");
        });
    }

    /// `dpkg --no-triggers --unpack DEBS` in theirs, `unpack DEBS` in ours, both expected to
    /// exit `code` (dpkg's 1 for a failed script); then the roots must agree.
    fn unpack(&self, debs: &[&Path], code: i32) {
        let theirs = dpkg_try_unpack(self.theirs.path(), &NO_TRIGGERS, debs);
        assert_eq!(
            theirs.code, code,
            "dpkg --unpack {debs:?}:\n{}{}",
            theirs.stdout, theirs.stderr
        );
        let ours = ours_try_unpack(self.ours.path(), &[], debs);
        assert_eq!(ours.code, code, "unpack {debs:?}:\n{}{}", ours.stdout, ours.stderr);
        self.check("after the unpack");
    }

    fn configure(&self) {
        dpkg_configure(self.theirs.path(), &[]);
        dpkg_configure(self.ours.path(), &[]);
        self.check("after dpkg --configure -a");
    }

    fn check(&self, stage: &str) {
        let what = format!("{}, {stage}", self.what);
        assert_eq!(
            calls(self.ours.path()),
            calls(self.theirs.path()),
            "{what}: the scripts' calls (left ours = unpack, right theirs = dpkg)"
        );
        assert_same_db(
            &DbSnapshot::take(self.ours.path()),
            &DbSnapshot::take(self.theirs.path()),
            &what,
        );
        assert_eq!(
            unincorp(self.ours.path()),
            unincorp(self.theirs.path()),
            "{what}: triggers/Unincorp"
        );
    }

    /// Asserts the sequence of calls dpkg made in theirs since the start.
    fn dpkg_called(&self, expected: &[&str]) {
        assert_eq!(sequence(self.theirs.path()), expected, "{}: dpkg's calls", self.what);
    }
}

/// What dpkg is compared with: `--no-triggers`, as apt calls it (its `DPkg::NoTriggers`
/// default). Without it dpkg runs the triggers pending in configured packages before it exits;
/// the engine leaves them to `dpkg --configure`. It changes nothing but that (the test of
/// triggers shows plain dpkg's run too).
const NO_TRIGGERS: [&str; 1] = ["--no-triggers"];

/// `dpkg FLAGS --unpack DEBS` with dependencies left to apt, whatever its exit.
fn dpkg_try_unpack(root: &Path, flags: &[&str], debs: &[&Path]) -> Run {
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(flags);
    args.push("--unpack");
    args.extend(debs.iter().map(|d| d.to_str().unwrap()));
    dpkg(root, &args)
}

/// `unpack -s fsync FLAGS DEBS ROOT` (`dpkg --no-triggers --unpack DEBS` in the self-check, the
/// flags then left out), whatever its exit.
fn ours_try_unpack(root: &Path, flags: &[&str], debs: &[&Path]) -> Run {
    if ours_via() == Via::Dpkg {
        return dpkg_try_unpack(root, &NO_TRIGGERS, debs);
    }
    let mut args = vec!["-s".as_ref(), "fsync".as_ref()];
    args.extend(UNPACK_NO_DEPENDS.iter().chain(flags).map(std::ffi::OsStr::new));
    args.extend(debs.iter().map(|d| d.as_os_str()));
    args.push(root.as_os_str());
    common::unpack(args)
}

/// `dpkg -i DEB` (unpack and configure), asserted to succeed.
fn dpkg_install(root: &Path, deb: &Path) {
    dpkg_unpack(root, &[deb]);
    dpkg_configure(root, &[]);
}

fn status_of(root: &Path, key: &str) -> Vec<(String, String)> {
    parse_status(&std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap())
        .remove(key)
        .unwrap_or_default()
}

fn field(stanza: &[(String, String)], name: &str) -> Option<String> {
    stanza.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

fn content(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| format!("({e})"))
}

/// Fresh install: `new-preinst install`; then `--configure`: `postinst configure ""` (an empty
/// most-recently-configured version). After `--unpack`: `install ok unpacked`.
#[test]
fn fresh_install_calls_preinst_install() {
    let debs = Debs::new();
    let deb = debs.logged("scr-fresh", "1.0");
    let o = Scripted::new("fresh install");
    o.unpack(&[&deb], 0);
    o.dpkg_called(&["scr-fresh_1.0 preinst [install]"]);
    let line = &calls(o.theirs.path())[0];
    assert!(
        line.ends_with("| package=scr-fresh name=preinst arch=amd64 refcount=1 debug=0 root= admindir=/var/lib/dpkg cwd=/ umask=0022"),
        "dpkg's environment: {line}"
    );
    assert_eq!(
        field(&status_of(o.theirs.path(), "scr-fresh:amd64"), "Status").as_deref(),
        Some("install ok unpacked")
    );
    o.configure();
    o.dpkg_called(&["scr-fresh_1.0 preinst [install]", "scr-fresh_1.0 postinst [configure] []"]);
}

/// An upgrade of NAME from a configured 1.0 to 2.0, with the scripts `fails` names
/// (`(VERSION, SCRIPT, ACTION)`) failing: both unpacks must exit `code`, and dpkg must make the
/// calls `unpack_calls` (after 1.0's `preinst install` and `postinst configure`), each written
/// `VERSION SCRIPT [ARG]...`. The roots are compared after the unpack and after `--configure -a`.
fn upgrade(name: &str, fails: &[(&str, &str, &str)], code: i32, unpack_calls: &[&str]) -> Scripted {
    let debs = Debs::new();
    let (v1, v2) = (debs.logged(name, "1.0"), debs.logged(name, "2.0"));
    let o = Scripted::new(&format!("upgrade of {name}"));
    o.both(|root| dpkg_install(root, &v1));
    for (version, script, action) in fails {
        o.fail(&format!("{name}_{version}"), script, action);
    }
    o.unpack(&[&v2], code);
    let installed = ["1.0 preinst [install]", "1.0 postinst [configure] []"];
    let expected: Vec<String> =
        installed.iter().chain(unpack_calls).map(|c| format!("{name}_{c}")).collect();
    assert_eq!(sequence(o.theirs.path()), expected, "{}: dpkg's calls", o.what);
    o
}

/// Asserts dpkg left NAME 1.0 as it was before a failed upgrade: installed, its file.
fn assert_back_to_1_0(o: &Scripted, name: &str) {
    assert_eq!(
        field(&status_of(o.theirs.path(), &format!("{name}:amd64")), "Status").as_deref(),
        Some("install ok installed")
    );
    assert_eq!(
        content(o.theirs.path(), &format!("usr/share/{name}/file")),
        format!("{name} 1.0\n")
    );
}

/// Upgrade of a configured 1.0: `old-prerm upgrade 2.0`, `new-preinst upgrade 1.0 2.0`, the
/// files, `old-postrm upgrade 2.0`. After `--unpack`: Version 2.0, `Config-Version: 1.0`,
/// `install ok unpacked`, 2.0's scripts in info/.
#[test]
fn upgrade_calls_old_prerm_new_preinst_old_postrm() {
    let o = upgrade(
        "scr-up",
        &[],
        0,
        &[
            "1.0 prerm [upgrade] [2.0]",
            "2.0 preinst [upgrade] [1.0] [2.0]",
            "1.0 postrm [upgrade] [2.0]",
        ],
    );
    let stanza = status_of(o.theirs.path(), "scr-up:amd64");
    assert_eq!(field(&stanza, "Config-Version").as_deref(), Some("1.0"), "{stanza:?}");
    o.configure();
    assert_eq!(sequence(o.theirs.path()).last().unwrap(), "scr-up_2.0 postinst [configure] [1.0]");
}

/// NAME 1.0 installed, then removed (`deinstall ok config-files`: its postrm is kept), in both
/// roots; `fails` as in `upgrade`; then the unpack of 2.0, expected to exit `code`.
fn over_config_files(name: &str, fails: &[(&str, &str, &str)], code: i32) -> Scripted {
    let debs = Debs::new();
    let (v1, v2) = (debs.logged(name, "1.0"), debs.logged(name, "2.0"));
    let o = Scripted::new(&format!("{name} from config-files"));
    o.both(|root| {
        dpkg_install(root, &v1);
        let r = dpkg(root, &["--remove", name]);
        assert_eq!(r.code, 0, "dpkg --remove:\n{}{}", r.stdout, r.stderr);
    });
    assert_eq!(
        field(&status_of(o.theirs.path(), &format!("{name}:amd64")), "Status").as_deref(),
        Some("deinstall ok config-files")
    );
    for (version, script, action) in fails {
        o.fail(&format!("{name}_{version}"), script, action);
    }
    o.unpack(&[&v2], code);
    o
}

/// The calls of installing and removing 1.0, before a test's own.
const CF_SETUP: [&str; 4] = [
    "1.0 preinst [install]",
    "1.0 postinst [configure] []",
    "1.0 prerm [remove]",
    "1.0 postrm [remove]",
];

/// From the config-files state (1.0 installed, then `dpkg --remove`): `new-preinst install 1.0
/// 2.0` and nothing of 1.0's. After `--unpack`: Version 2.0, `Config-Version: 1.0`.
#[test]
fn install_over_config_files_calls_preinst_install_with_the_old_version() {
    let o = over_config_files("scr-cf", &[], 0);
    let expected: Vec<String> = CF_SETUP
        .iter()
        .chain(&["2.0 preinst [install] [1.0] [2.0]"])
        .map(|c| format!("scr-cf_{c}"))
        .collect();
    assert_eq!(sequence(o.theirs.path()), expected);
    assert_eq!(
        field(&status_of(o.theirs.path(), "scr-cf:amd64"), "Config-Version").as_deref(),
        Some("1.0")
    );
    o.configure();
}

/// A failing new preinst from the config-files state: `new-preinst install 1.0 2.0` (fails),
/// `new-postrm abort-install 1.0 2.0`. Exit 1; the package back in the config-files state as
/// 1.0 (`Version` and `Config-Version` 1.0), but with the selection `install`: `install ok
/// config-files`; no file of 2.0.
#[test]
fn a_failing_preinst_over_config_files_calls_postrm_abort_install_with_the_old_version() {
    let o = over_config_files("scr-cfbad", &[("2.0", "preinst", "install")], 1);
    let expected: Vec<String> = CF_SETUP
        .iter()
        .chain(&["2.0 preinst [install] [1.0] [2.0]", "2.0 postrm [abort-install] [1.0] [2.0]"])
        .map(|c| format!("scr-cfbad_{c}"))
        .collect();
    assert_eq!(sequence(o.theirs.path()), expected);
    let stanza = status_of(o.theirs.path(), "scr-cfbad:amd64");
    assert_eq!(field(&stanza, "Status").as_deref(), Some("install ok config-files"), "{stanza:?}");
    assert_eq!(field(&stanza, "Version").as_deref(), Some("1.0"), "{stanza:?}");
    assert!(!o.theirs.path().join("usr/share/scr-cfbad/file").exists());
    o.configure();
}

/// A failing new preinst on a fresh install: `new-preinst install` (fails), `new-postrm
/// abort-install` (the new package's postrm, from the archive). Exit 1; no file of the package;
/// the database as dpkg leaves it: a stanza `Package`, `Status: install ok not-installed`,
/// `Architecture`, and no info file.
#[test]
fn a_failing_preinst_install_calls_postrm_abort_install() {
    let debs = Debs::new();
    let deb = debs.logged("scr-badpre", "1.0");
    let o = Scripted::new("failing preinst install");
    o.fail("scr-badpre_1.0", "preinst", "install");
    o.unpack(&[&deb], 1);
    o.dpkg_called(&["scr-badpre_1.0 preinst [install]", "scr-badpre_1.0 postrm [abort-install]"]);
    let stanza = status_of(o.theirs.path(), "scr-badpre:amd64");
    let names: Vec<&str> = stanza.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Package", "Status", "Architecture"], "{stanza:?}");
    assert_eq!(field(&stanza, "Status").as_deref(), Some("install ok not-installed"));
    assert!(!o.theirs.path().join("usr/share/scr-badpre").exists());
    o.configure();
}

/// A failing new preinst on an upgrade: `old-prerm upgrade 2.0`, `new-preinst upgrade 1.0 2.0`
/// (fails), `new-postrm abort-upgrade 1.0 2.0`, `old-postinst abort-upgrade 2.0`. Exit 1; 1.0's
/// files; 1.0 `install ok installed` again, its info files as they were.
#[test]
fn a_failing_preinst_upgrade_calls_abort_upgrade() {
    let o = upgrade(
        "scr-badup",
        &[("2.0", "preinst", "upgrade")],
        1,
        &[
            "1.0 prerm [upgrade] [2.0]",
            "2.0 preinst [upgrade] [1.0] [2.0]",
            "2.0 postrm [abort-upgrade] [1.0] [2.0]",
            "1.0 postinst [abort-upgrade] [2.0]",
        ],
    );
    assert_back_to_1_0(&o, "scr-badup");
    o.configure();
}

/// A failing old prerm: `old-prerm upgrade 2.0` (fails), `new-prerm failed-upgrade 1.0 2.0`
/// (succeeds: dpkg goes on, exit 0), `new-preinst upgrade 1.0 2.0`, the files, `old-postrm
/// upgrade 2.0`: the upgrade as if the old prerm had succeeded.
#[test]
fn a_failing_old_prerm_calls_new_prerm_failed_upgrade() {
    let o = upgrade(
        "scr-badrm",
        &[("1.0", "prerm", "upgrade")],
        0,
        &[
            "1.0 prerm [upgrade] [2.0]",
            "2.0 prerm [failed-upgrade] [1.0] [2.0]",
            "2.0 preinst [upgrade] [1.0] [2.0]",
            "1.0 postrm [upgrade] [2.0]",
        ],
    );
    assert_eq!(content(o.theirs.path(), "usr/share/scr-badrm/file"), "scr-badrm 2.0\n");
    o.configure();
}

/// A failing old prerm whose new prerm fails too: `old-prerm upgrade 2.0` (fails), `new-prerm
/// failed-upgrade 1.0 2.0` (fails), `old-postinst abort-upgrade 2.0`. Exit 1, no preinst, 1.0
/// installed as before.
#[test]
fn a_failing_old_prerm_and_new_prerm_calls_old_postinst_abort_upgrade() {
    let o = upgrade(
        "scr-badrm2",
        &[("1.0", "prerm", "upgrade"), ("2.0", "prerm", "failed-upgrade")],
        1,
        &[
            "1.0 prerm [upgrade] [2.0]",
            "2.0 prerm [failed-upgrade] [1.0] [2.0]",
            "1.0 postinst [abort-upgrade] [2.0]",
        ],
    );
    assert_back_to_1_0(&o, "scr-badrm2");
    o.configure();
}

/// A failing old postrm: after the files, `old-postrm upgrade 2.0` (fails), `new-postrm
/// failed-upgrade 1.0 2.0` (succeeds): exit 0, 2.0 unpacked as after a plain upgrade.
#[test]
fn a_failing_old_postrm_calls_new_postrm_failed_upgrade() {
    let o = upgrade(
        "scr-badpost",
        &[("1.0", "postrm", "upgrade")],
        0,
        &[
            "1.0 prerm [upgrade] [2.0]",
            "2.0 preinst [upgrade] [1.0] [2.0]",
            "1.0 postrm [upgrade] [2.0]",
            "2.0 postrm [failed-upgrade] [1.0] [2.0]",
        ],
    );
    assert_eq!(
        field(&status_of(o.theirs.path(), "scr-badpost:amd64"), "Status").as_deref(),
        Some("install ok unpacked")
    );
    o.configure();
}

/// A failing old postrm whose new postrm fails too, after the files were written. dpkg puts
/// the old files back (from its `.dpkg-tmp` backups) and unwinds: `old-preinst abort-upgrade
/// 2.0`, `new-postrm abort-upgrade 1.0 2.0`, `old-postinst abort-upgrade 2.0`; exit 1; 1.0's
/// files and info files; 1.0 `install ok installed`. The engine's commit point is its journal,
/// before these postrms: it defines the failure as committed (docs/database.md). Exit 1, the
/// same calls up to the failure and no unwinding, 2.0's files and database, and the package
/// recorded `install reinstreq half-installed`: `dpkg --audit` names it, and a reinstall of 2.0
/// by dpkg finishes it as it finishes one of its own half-installed packages.
#[test]
fn a_failing_old_and_new_postrm_is_committed_and_recorded_half_installed() {
    let name = "scr-badpost2";
    let debs = Debs::new();
    let (v1, v2) = (debs.logged(name, "1.0"), debs.logged(name, "2.0"));
    let o = Scripted::new("both postrms fail");
    o.both(|root| dpkg_install(root, &v1));
    o.fail(&format!("{name}_1.0"), "postrm", "upgrade");
    o.fail(&format!("{name}_2.0"), "postrm", "failed-upgrade");
    let theirs = dpkg_try_unpack(o.theirs.path(), &NO_TRIGGERS, &[&v2]);
    assert_eq!(theirs.code, 1, "{}{}", theirs.stdout, theirs.stderr);
    let calls_to_failure = [
        "1.0 prerm [upgrade] [2.0]",
        "2.0 preinst [upgrade] [1.0] [2.0]",
        "1.0 postrm [upgrade] [2.0]",
        "2.0 postrm [failed-upgrade] [1.0] [2.0]",
    ];
    let unwinding = [
        "1.0 preinst [abort-upgrade] [2.0]",
        "2.0 postrm [abort-upgrade] [1.0] [2.0]",
        "1.0 postinst [abort-upgrade] [2.0]",
    ];
    let setup = ["1.0 preinst [install]", "1.0 postinst [configure] []"];
    let named = |calls: &[&str]| calls.iter().map(|c| format!("{name}_{c}")).collect::<Vec<_>>();
    assert_eq!(
        sequence(o.theirs.path()),
        named(&[&setup[..], &calls_to_failure, &unwinding].concat()),
        "dpkg's calls"
    );
    assert_back_to_1_0(&o, name);
    if ours_via() == Via::Dpkg {
        return;
    }
    let ours = ours_try_unpack(o.ours.path(), &[], &[&v2]);
    assert_eq!(ours.code, 1, "{}{}", ours.stdout, ours.stderr);
    assert!(
        ours.stderr.contains("postrm") && ours.stderr.contains("half-installed"),
        "{}",
        ours.stderr
    );
    assert_eq!(
        sequence(o.ours.path()),
        named(&[&setup[..], &calls_to_failure].concat()),
        "the engine's calls: no unwinding behind the commit"
    );
    let stanza = status_of(o.ours.path(), &format!("{name}:amd64"));
    assert_eq!(
        field(&stanza, "Status").as_deref(),
        Some("install reinstreq half-installed"),
        "{stanza:?}"
    );
    assert_eq!(field(&stanza, "Version").as_deref(), Some("2.0"), "{stanza:?}");
    assert_eq!(content(o.ours.path(), &format!("usr/share/{name}/file")), format!("{name} 2.0\n"));
    let audit = dpkg(o.ours.path(), &["--audit"]);
    assert!(audit.stdout.contains(name), "dpkg --audit names it: {}", audit.stdout);
    std::fs::remove_dir_all(o.ours.path().join("fail")).unwrap();
    let reinstall = dpkg_try_unpack(o.ours.path(), &NO_TRIGGERS, &[&v2]);
    assert_eq!(reinstall.code, 0, "dpkg reinstalls it: {}{}", reinstall.stdout, reinstall.stderr);
    dpkg_configure(o.ours.path(), &[]);
    assert_eq!(
        field(&status_of(o.ours.path(), &format!("{name}:amd64")), "Status").as_deref(),
        Some("install ok installed")
    );
}

/// `unpack --no-scripts`: no script runs (the log stays empty) and the packages are recorded
/// `install ok unpacked`, the tree and database as `dpkg --unpack` leaves them (whose preinst
/// changes neither); `dpkg --configure -a` then runs the postinst alone.
#[test]
fn no_scripts_runs_none_and_records_the_package_unpacked() {
    let debs = Debs::new();
    let deb = debs.logged("scr-none", "1.0");
    let o = Scripted::new("--no-scripts");
    dpkg_unpack(o.theirs.path(), &[&deb]);
    let r = ours_try_unpack(o.ours.path(), &["--no-scripts"], &[&deb]);
    assert_eq!(r.code, 0, "unpack --no-scripts:\n{}{}", r.stdout, r.stderr);
    assert_eq!(calls(o.ours.path()), Vec::<String>::new(), "--no-scripts ran scripts");
    assert_eq!(
        field(&status_of(o.ours.path(), "scr-none:amd64"), "Status").as_deref(),
        Some("install ok unpacked")
    );
    assert_same_db(
        &DbSnapshot::take(o.ours.path()),
        &DbSnapshot::take(o.theirs.path()),
        "--no-scripts, after the unpack",
    );
    dpkg_configure(o.theirs.path(), &[]);
    dpkg_configure(o.ours.path(), &[]);
    assert_same_db(
        &DbSnapshot::take(o.ours.path()),
        &DbSnapshot::take(o.theirs.path()),
        "--no-scripts, after dpkg --configure -a",
    );
    let configure = calls(o.theirs.path()).pop().unwrap();
    assert!(configure.starts_with("scr-none_1.0 postinst [configure] []"), "{configure}");
    assert_eq!(calls(o.ours.path()), [configure]);
}

/// A many-package call whose second package's preinst fails. dpkg takes each archive on its
/// own: `dpkg --unpack A B C` runs `A preinst install`, unpacks A (`install ok unpacked`), runs
/// `B preinst install` (fails), `B postrm abort-install` (B: the `not-installed` stanza), goes
/// on to `C preinst install` and unpacks C, and exits 1. The engine's call is one transaction:
/// it must unwind every package whose scripts ran, in reverse order (`A preinst install`,
/// `B preinst install` fails, `B postrm abort-install`, `A postrm abort-install`), run nothing of
/// C, and leave every package it unwound as dpkg leaves one whose preinst failed. That state is
/// taken from dpkg: `dpkg --unpack A B` with both preinsts failing; the calls are dpkg's own
/// (environment included), in the engine's order.
#[test]
fn a_failing_preinst_in_a_many_package_call_unwinds_every_package_whose_scripts_ran() {
    let debs = Debs::new();
    let (a, b, c) = (
        debs.logged("scr-many-a", "1.0"),
        debs.logged("scr-many-b", "1.0"),
        debs.logged("scr-many-c", "1.0"),
    );

    // What dpkg itself does, written down and held here.
    let plain = DbRoot::with_shell();
    std::fs::create_dir_all(plain.path().join("fail")).unwrap();
    edit(plain.path(), "/fail/scr-many-b_1.0.preinst.install", b"");
    let r = dpkg_try_unpack(plain.path(), &[], &[&a, &b, &c]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        sequence(plain.path()),
        [
            "scr-many-a_1.0 preinst [install]",
            "scr-many-b_1.0 preinst [install]",
            "scr-many-b_1.0 postrm [abort-install]",
            "scr-many-c_1.0 preinst [install]"
        ]
    );
    for (key, status) in [
        ("scr-many-a:amd64", "install ok unpacked"),
        ("scr-many-b:amd64", "install ok not-installed"),
        ("scr-many-c:amd64", "install ok unpacked"),
    ] {
        assert_eq!(
            field(&status_of(plain.path(), key), "Status").as_deref(),
            Some(status),
            "{key}"
        );
    }

    // The state the engine must leave: both A and B as dpkg leaves a package whose preinst failed.
    let o = Scripted::new("a failing preinst in a many-package call");
    o.fail("scr-many-b_1.0", "preinst", "install");
    edit(o.theirs.path(), "/fail/scr-many-a_1.0.preinst.install", b"");
    let theirs = dpkg_try_unpack(o.theirs.path(), &[], &[&a, &b]);
    assert_eq!(theirs.code, 1, "{}{}", theirs.stdout, theirs.stderr);
    std::fs::remove_file(o.theirs.path().join("fail/scr-many-a_1.0.preinst.install")).unwrap();
    let ours = ours_try_unpack(o.ours.path(), &[], &[&a, &b, &c]);
    assert_eq!(ours.code, 1, "unpack A B C:\n{}{}", ours.stdout, ours.stderr);
    let dpkgs = calls(o.theirs.path());
    o.dpkg_called(&[
        "scr-many-a_1.0 preinst [install]",
        "scr-many-a_1.0 postrm [abort-install]",
        "scr-many-b_1.0 preinst [install]",
        "scr-many-b_1.0 postrm [abort-install]",
    ]);
    let unwound = [&dpkgs[0], &dpkgs[2], &dpkgs[3], &dpkgs[1]].map(|l| l.to_string());
    assert_eq!(
        calls(o.ours.path()),
        unwound,
        "the engine's calls (left) and dpkg's, in the engine's order (right)"
    );
    assert_same_db(
        &DbSnapshot::take(o.ours.path()),
        &DbSnapshot::take(o.theirs.path()),
        "many-package failure, after the unpack",
    );
}

/// Asserts dpkg left NAME (installed) waiting for TRIGGER: `install ok triggers-pending`,
/// `Triggers-Pending: TRIGGER`.
fn assert_pending(o: &Scripted, name: &str, trigger: &str) {
    let stanza = status_of(o.theirs.path(), &format!("{name}:amd64"));
    assert_eq!(
        field(&stanza, "Status").as_deref(),
        Some("install ok triggers-pending"),
        "{stanza:?}"
    );
    assert_eq!(field(&stanza, "Triggers-Pending").as_deref(), Some(trigger), "{stanza:?}");
}

/// Asserts dpkg's last calls.
fn assert_ends_with(o: &Scripted, last: &[&str]) {
    let done = sequence(o.theirs.path());
    assert!(
        done.ends_with(&last.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
        "{}: dpkg's calls end {last:?}: {done:?}",
        o.what
    );
}

/// The file-trigger fixture: `scr-ti` declares `interest /usr/share/trig-test` (its postinst
/// logs `triggered /usr/share/trig-test`); `scr-ta` ships /usr/share/trig-test/ta-file.
fn trigger_pair(debs: &Debs) -> (PathBuf, PathBuf) {
    let interested = logging(Pkg::new("scr-ti", "1.0", "amd64"), "scr-ti", "1.0")
        .file("/usr/share/scr-ti/file", b"ti\n", 0o644)
        .member("triggers", b"interest /usr/share/trig-test\n");
    let activator = logging(Pkg::new("scr-ta", "1.0", "amd64"), "scr-ta", "1.0").file(
        "/usr/share/trig-test/ta-file",
        b"ta\n",
        0o644,
    );
    (debs.build(interested), debs.build(activator))
}

/// An activator unpacked while the interested package is installed. Plain `dpkg --unpack`
/// runs the pending triggers before it exits (`scr-ti postinst triggered /usr/share/trig-test`
/// at once); `dpkg --no-triggers --unpack`, as apt calls it, and `unpack` leave them pending:
/// scr-ti `Status: install ok triggers-pending`, `Triggers-Pending: /usr/share/trig-test`;
/// scr-ta `install ok unpacked` with `Triggers-Awaited: scr-ti`; triggers/File
/// `/usr/share/trig-test scr-ti` (written when scr-ti was unpacked), triggers/Unincorp empty.
/// `dpkg --configure -a` then runs `scr-ta postinst configure ""`, then `scr-ti postinst
/// triggered /usr/share/trig-test`, and clears both fields.
#[test]
fn a_file_trigger_is_pending_after_the_unpack_and_runs_in_configure() {
    let debs = Debs::new();
    let (interested, activator) = trigger_pair(&debs);

    let plain = DbRoot::with_shell();
    dpkg_install(plain.path(), &interested);
    dpkg_unpack(plain.path(), &[&activator]);
    assert_eq!(
        sequence(plain.path()).last().unwrap(),
        "scr-ti_1.0 postinst [triggered] [/usr/share/trig-test]",
        "plain dpkg --unpack runs the trigger"
    );

    let o = Scripted::new("file trigger");
    o.both(|root| dpkg_install(root, &interested));
    assert_eq!(
        content(o.theirs.path(), "var/lib/dpkg/triggers/File"),
        "/usr/share/trig-test scr-ti\n"
    );
    o.unpack(&[&activator], 0);
    assert_pending(&o, "scr-ti", "/usr/share/trig-test");
    let ta = status_of(o.theirs.path(), "scr-ta:amd64");
    assert_eq!(field(&ta, "Triggers-Awaited").as_deref(), Some("scr-ti"), "{ta:?}");
    assert_eq!(unincorp(o.theirs.path()), "");
    o.configure();
    assert_ends_with(
        &o,
        &[
            "scr-ta_1.0 postinst [configure] []",
            "scr-ti_1.0 postinst [triggered] [/usr/share/trig-test]",
        ],
    );
    assert_eq!(field(&status_of(o.theirs.path(), "scr-ti:amd64"), "Triggers-Pending"), None);
}

/// The interested package and the activator in the same call: scr-ti is only unpacked, so
/// nothing is pending (its `postinst configure` does the work); its interest goes into
/// triggers/File at the unpack. Both `install ok unpacked`, no trigger field; `--configure -a`
/// runs both postinsts' `configure` (scr-ta's first: dpkg's order, not the call's) and no
/// `triggered`.
#[test]
fn an_interest_unpacked_in_the_same_call_is_recorded_and_not_pending() {
    let debs = Debs::new();
    let (interested, activator) = trigger_pair(&debs);
    let o = Scripted::new("interest and activator in one call");
    o.unpack(&[&interested, &activator], 0);
    assert_eq!(
        content(o.theirs.path(), "var/lib/dpkg/triggers/File"),
        "/usr/share/trig-test scr-ti\n"
    );
    for key in ["scr-ti:amd64", "scr-ta:amd64"] {
        let stanza = status_of(o.theirs.path(), key);
        assert_eq!(field(&stanza, "Status").as_deref(), Some("install ok unpacked"), "{stanza:?}");
        assert!(!stanza.iter().any(|(n, _)| n.starts_with("Triggers-")), "{stanza:?}");
    }
    o.configure();
    // `--configure -a` takes the packages in the order of its own package table, not the
    // call's: the oracle compares that order with ours; here only what was called.
    let mut done = sequence(o.theirs.path());
    done.sort();
    assert_eq!(
        done,
        [
            "scr-ta_1.0 postinst [configure] []",
            "scr-ta_1.0 preinst [install]",
            "scr-ti_1.0 postinst [configure] []",
            "scr-ti_1.0 preinst [install]"
        ]
    );
}

/// An explicit trigger: `scr-ei` declares `interest scr-explicit` (dpkg writes
/// triggers/scr-explicit with the line `scr-ei` when it is unpacked), `scr-ea` declares
/// `activate scr-explicit`. After `dpkg --no-triggers --unpack scr-ea` over a configured
/// scr-ei: scr-ei `install ok triggers-pending` with `Triggers-Pending: scr-explicit`, and, unlike
/// the file trigger's activator, scr-ea gets no `Triggers-Awaited`. `--configure -a` runs
/// `scr-ea postinst configure ""`, then `scr-ei postinst triggered scr-explicit`.
#[test]
fn an_explicit_activate_trigger_is_pending_after_the_unpack_and_runs_in_configure() {
    let debs = Debs::new();
    let interested = debs.build(
        logging(Pkg::new("scr-ei", "1.0", "amd64"), "scr-ei", "1.0")
            .file("/usr/share/scr-ei/file", b"ei\n", 0o644)
            .member("triggers", b"interest scr-explicit\n"),
    );
    let activator = debs.build(
        logging(Pkg::new("scr-ea", "1.0", "amd64"), "scr-ea", "1.0")
            .file("/usr/share/scr-ea/file", b"ea\n", 0o644)
            .member("triggers", b"activate scr-explicit\n"),
    );
    let o = Scripted::new("explicit trigger");
    o.both(|root| dpkg_install(root, &interested));
    assert_eq!(content(o.theirs.path(), "var/lib/dpkg/triggers/scr-explicit"), "scr-ei\n");
    o.unpack(&[&activator], 0);
    assert_pending(&o, "scr-ei", "scr-explicit");
    assert_eq!(field(&status_of(o.theirs.path(), "scr-ea:amd64"), "Triggers-Awaited"), None);
    o.configure();
    assert_ends_with(
        &o,
        &["scr-ea_1.0 postinst [configure] []", "scr-ei_1.0 postinst [triggered] [scr-explicit]"],
    );
}

/// A package whose every file a new one takes over (`Replaces`) disappears: after the files,
/// dpkg calls `old-postrm disappear NEW-PACKAGE NEW-VERSION` with the disappearing package's
/// environment (`DPKG_MAINTSCRIPT_PACKAGE=scr-dx`), then drops its stanza and info files.
#[test]
fn a_package_whose_files_are_all_taken_calls_its_postrm_disappear() {
    let debs = Debs::new();
    let old = debs.logged("scr-dx", "1.0");
    let taker = debs.build(
        logging(Pkg::new("scr-dy", "1.0", "amd64"), "scr-dy", "1.0")
            .field("Replaces", "scr-dx")
            .file("/usr/share/scr-dx/file", b"taken by scr-dy\n", 0o644),
    );
    let o = Scripted::new("postrm disappear");
    o.both(|root| dpkg_install(root, &old));
    o.unpack(&[&taker], 0);
    o.dpkg_called(&[
        "scr-dx_1.0 preinst [install]",
        "scr-dx_1.0 postinst [configure] []",
        "scr-dy_1.0 preinst [install]",
        "scr-dx_1.0 postrm [disappear] [scr-dy] [1.0]",
    ]);
    let disappear = calls(o.theirs.path()).pop().unwrap();
    assert!(disappear.contains("| package=scr-dx name=postrm "), "{disappear}");
    assert!(status_of(o.theirs.path(), "scr-dx:amd64").is_empty());
    o.configure();
}

/// A command run in `chroot ROOT` with the environment `tool` gives dpkg: a fixed PATH, the C
/// locale, no variable of a calling dpkg or apt.
/// A preinst that adds a diversion of one of its package's own files (as `dpkg-divert --local
/// --rename` would, here by writing dpkg's `diversions` file: the oracle's roots have no dpkg
/// inside): the file is written where dpkg writes it, read from the diversions as they are
/// after the preinst.
#[test]
fn a_diversion_the_preinst_adds_applies_to_the_package_s_files() {
    let debs = Debs::new();
    let name = "scr-pdiv";
    let preinst = format!(
        "{}printf '/usr/share/{name}/file\\n/usr/share/{name}/file.real\\n:\\n' >> /var/lib/dpkg/diversions\n",
        logging_script(&format!("{name}_1.0"), "preinst").replace("exit 0\n", "")
    );
    let pkg = logging(Pkg::new(name, "1.0", "amd64"), name, "1.0")
        .file(&format!("/usr/share/{name}/file"), b"diverted\n", 0o644)
        .script("preinst", &preinst);
    let deb = debs.build(pkg);
    let o = Scripted::new("a diversion made by the preinst");
    o.unpack(&[&deb], 0);
    assert_eq!(
        content(o.theirs.path(), &format!("usr/share/{name}/file.real")),
        "diverted\n",
        "dpkg reads the diversions the preinst made"
    );
    o.configure();
}

/// A preinst that adds a statoverride for one of its package's own files (as
/// `dpkg-statoverride --add` would, here by writing dpkg's `statoverride` file): dpkg read its
/// overrides before the preinst and writes the file with the archive's mode (the override
/// applies from the next unpack, or `dpkg-statoverride --update`), and so does the engine.
#[test]
fn a_statoverride_the_preinst_adds_applies_from_the_next_unpack_as_with_dpkg() {
    let debs = Debs::new();
    let name = "scr-pstat";
    let preinst = format!(
        "{}echo 'root root 0600 /usr/share/{name}/file' >> /var/lib/dpkg/statoverride\n",
        logging_script(&format!("{name}_1.0"), "preinst").replace("exit 0\n", "")
    );
    let pkg = logging(Pkg::new(name, "1.0", "amd64"), name, "1.0")
        .file(&format!("/usr/share/{name}/file"), b"private\n", 0o644)
        .script("preinst", &preinst);
    let deb = debs.build(pkg);
    let o = Scripted::new("a statoverride made by the preinst");
    o.unpack(&[&deb], 0);
    let mode = std::fs::metadata(o.theirs.path().join(format!("usr/share/{name}/file")))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o7777,
        0o644,
        "dpkg's mode is the archive's"
    );
    o.configure();
}

/// A new script runs as dpkg runs it, from `ADMIN/tmp.ci/`, beside the rest of its control
/// archive (debconf's frontend reads `templates` beside `$0` and the package's name from
/// `tmp.ci/control`): the preinst logs `$0`, the Package line of `tmp.ci/control` and its
/// `templates`, the same under dpkg and unpack. A `tmp.ci` planted as a symlink to a host
/// directory is removed, never followed, and nothing is left at the name after the call.
#[test]
fn the_new_preinst_runs_from_tmp_ci_beside_its_control_archive_as_under_dpkg() {
    let debs = Debs::new();
    let preinst = "#!/bin/sh\n{ echo \"$0 $*\"; while read -r line; do case \"$line\" in Package:*) echo \"$line\";; esac; done < /var/lib/dpkg/tmp.ci/control; while read -r line; do echo \"$line\"; done < \"${0%/*}/templates\"; } >> /var/log/tmp-ci.log\n";
    let deb = debs.build(
        Pkg::new("scr-ci", "1.0", "amd64")
            .file("/usr/share/scr-ci/file", b"1\n", 0o644)
            .script("preinst", preinst)
            .member("templates", b"Template: scr-ci/question\n"),
    );
    let o = Scripted::new("tmp.ci");
    let host = tempfile::Builder::new().prefix("unpack-host-dir").tempdir().unwrap();
    std::fs::write(host.path().join("keep"), "host file\n").unwrap();
    std::os::unix::fs::symlink(host.path(), o.ours.path().join("var/lib/dpkg/tmp.ci")).unwrap();
    o.unpack(&[&deb], 0);
    let log = |root: &Path| std::fs::read_to_string(root.join("var/log/tmp-ci.log")).unwrap();
    assert_eq!(log(o.ours.path()), log(o.theirs.path()));
    assert_eq!(
        log(o.ours.path()),
        "/var/lib/dpkg/tmp.ci/preinst install\nPackage: scr-ci\nTemplate: scr-ci/question\n"
    );
    assert_eq!(
        std::fs::read_dir(host.path()).unwrap().count(),
        1,
        "the host directory behind the planted symlink is untouched"
    );
    assert_eq!(std::fs::read_to_string(host.path().join("keep")).unwrap(), "host file\n");
    assert!(
        std::fs::symlink_metadata(o.ours.path().join("var/lib/dpkg/tmp.ci")).is_err(),
        "nothing is left at tmp.ci"
    );
}

/// `cmd` started under umask 077, as a caller with a strict umask starts it.
fn under_umask_077(cmd: &mut std::process::Command) -> Run {
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", "umask 077; exec \"$0\" \"$@\""]).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    common::run(&mut sh)
}

/// The scripts' environment is dpkg's whatever the caller's: umask 022 under a caller's 077;
/// the second Multi-Arch: same instance's preinst counts itself in
/// `DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT` (2), as dpkg has recorded it half-installed before; and
/// of what may differ, `DPKG_FORCE` is dpkg's defaults and `DPKG_RUNNING_VERSION` a version
/// (the root's dpkg's, or the dpkg the engine follows), which a script can compare.
#[test]
fn the_scripts_get_dpkg_s_environment_whatever_the_caller_s() {
    let debs = Debs::new();
    let ma = |arch: &str| {
        debs.build(
            logging(Pkg::new("scr-ma", "1.0", arch), "scr-ma", "1.0")
                .field("Multi-Arch", "same")
                .file(&format!("/usr/lib/scr-ma/{arch}"), arch.as_bytes(), 0o644),
        )
    };
    let (amd64, i386) = (ma("amd64"), ma("i386"));
    let o = Scripted::new("a second Multi-Arch: same instance under umask 077");
    o.both(|root| {
        let r = dpkg(root, &["--add-architecture", "i386"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        dpkg_install(root, &amd64);
    });
    let mut args: Vec<String> = NO_DEPENDS.iter().map(|s| s.to_string()).collect();
    args.extend(["--no-triggers", "--unpack"].map(String::from));
    args.push(i386.display().to_string());
    let mut theirs = std::process::Command::new("dpkg");
    theirs.arg(format!("--root={}", o.theirs.path().display())).args(&args);
    let r = under_umask_077(clean_env(&mut theirs));
    assert_eq!(r.code, 0, "dpkg --unpack: {}", r.stderr);
    if ours_via() == Via::Dpkg {
        let mut ours = std::process::Command::new("dpkg");
        ours.arg(format!("--root={}", o.ours.path().display())).args(&args);
        assert_eq!(under_umask_077(clean_env(&mut ours)).code, 0);
    } else {
        let mut ours = std::process::Command::new(common::unpack_bin());
        ours.args(["-s", "fsync"]).arg(&i386).arg(o.ours.path());
        let r = under_umask_077(&mut ours);
        assert_eq!(r.code, 0, "unpack: {}", r.stderr);
    }
    o.check("after the unpack");
    let line = calls(o.theirs.path()).pop().unwrap();
    assert!(
        line.ends_with(
            "arch=i386 refcount=2 debug=0 root= admindir=/var/lib/dpkg cwd=/ umask=0022"
        ),
        "{line}"
    );
    if ours_via() == Via::Unpack {
        let log = std::fs::read_to_string(o.ours.path().join(LOG)).unwrap();
        let last = log.lines().last().unwrap();
        let (_, caller) = last.split_once(" || ").unwrap();
        assert!(caller.ends_with(" force=security-mac,downgrade"), "{caller}");
        let running = caller.strip_prefix("running=").unwrap().split(' ').next().unwrap();
        let r = common::run(std::process::Command::new("dpkg").args([
            "--compare-versions",
            running,
            "ge",
            "1.21",
        ]));
        assert_eq!(r.code, 0, "DPKG_RUNNING_VERSION {running:?} is a dpkg version: {}", r.stderr);
    }
}

/// Old conffiles as dpkg forgets them at unpack: one the new preinst removed (what
/// `dpkg-maintscript-helper rm_conffile` does) leaves `Conffiles:` and the list; one the new
/// version ships as a plain file is one of its files, no conffile; one it drops that is still
/// on disk stays, `obsolete`, and stays in the list.
#[test]
fn conffiles_a_preinst_removed_or_now_plain_files_are_forgotten_as_dpkg_forgets_them() {
    let debs = Debs::new();
    let v1 = debs.build(
        Pkg::new("scr-conf", "1.0", "amd64")
            .conffile("/etc/scr-conf/a.conf", b"a 1\n")
            .conffile("/etc/scr-conf/b.conf", b"b 1\n")
            .conffile("/etc/scr-conf/c.conf", b"c 1\n"),
    );
    let v2 = debs.build(
        Pkg::new("scr-conf", "2.0", "amd64")
            .file("/etc/scr-conf/b.conf", b"b 2\n", 0o644)
            .script("preinst", "#!/bin/sh\nrm -f /etc/scr-conf/a.conf\n"),
    );
    let o = Scripted::new("conffiles forgotten at an upgrade");
    o.both(|root| dpkg_install(root, &v1));
    o.unpack(&[&v2], 0);
    let stanza = status_of(o.theirs.path(), "scr-conf:amd64");
    let conffiles = field(&stanza, "Conffiles").unwrap_or_default();
    assert!(!conffiles.contains("a.conf") && !conffiles.contains("b.conf"), "{conffiles}");
    assert!(
        conffiles.contains("/etc/scr-conf/c.conf") && conffiles.contains("obsolete"),
        "{conffiles}"
    );
    o.configure();
}

/// `NAME 1.0` interested in `interests` (a triggers member's lines), configured in both roots.
fn interested(debs: &Debs, name: &str, triggers: &str) -> PathBuf {
    debs.build(
        logging(Pkg::new(name, "1.0", "amd64"), name, "1.0")
            .file(&format!("/usr/share/{name}/file"), b"i\n", 0o644)
            .member("triggers", triggers.as_bytes()),
    )
}

/// What an upgrade's directives activate, as dpkg records it: the installed version's
/// `activate` directives too (v1's, which v2 dropped), an `activate /PATH` directive the file
/// interests in the path's parents, and, the activator having been installed, an explicit
/// activation leaves it awaiting the interested package (`Triggers-Awaited`, its status
/// `triggers-awaited` until dpkg --configure).
#[test]
fn an_upgrade_s_old_and_new_activate_directives_are_recorded_as_dpkg_records_them() {
    let debs = Debs::new();
    let ei = interested(
        &debs,
        "scr-tx",
        "interest scr-tx-old\ninterest scr-tx-new\ninterest /usr/share/scr-watch\n",
    );
    let activator = |version: &str, triggers: &str| {
        debs.build(
            logging(Pkg::new("scr-tz", version, "amd64"), "scr-tz", version)
                .file("/usr/share/scr-tz/file", version.as_bytes(), 0o644)
                .member("triggers", triggers.as_bytes()),
        )
    };
    let v1 = activator("1.0", "activate-noawait scr-tx-old\n");
    let v2 =
        activator("2.0", "activate scr-tx-new\nactivate-noawait /usr/share/scr-watch/deeper/x\n");
    let o = Scripted::new("an upgrade's activate directives");
    o.both(|root| {
        dpkg_install(root, &ei);
        dpkg_install(root, &v1);
        dpkg_configure(root, &[]);
    });
    o.unpack(&[&v2], 0);
    let tx = status_of(o.theirs.path(), "scr-tx:amd64");
    let pending = field(&tx, "Triggers-Pending").unwrap_or_default();
    for t in ["scr-tx-old", "scr-tx-new", "/usr/share/scr-watch"] {
        assert!(pending.split(' ').any(|p| p == t), "dpkg made {t} pending: {tx:?}");
    }
    let tz = status_of(o.theirs.path(), "scr-tz:amd64");
    assert_eq!(field(&tz, "Triggers-Awaited").as_deref(), Some("scr-tx"), "{tz:?}");
    o.configure();
}

/// A file-trigger interest whose line changes form across a cross-grade (`scr-tf:i386`, a
/// Multi-Arch: same i386 instance's, to `scr-tf/noawait`, the amd64 version that replaces it):
/// the old line goes, as dpkg's interest delete finds it by package, never left beside the new
/// one (dpkg then refuses the database: "duplicate file trigger interest").
#[test]
fn an_interest_that_changes_form_replaces_the_old_line() {
    let debs = Debs::new();
    let v1 = debs.build(
        logging(Pkg::new("scr-tf", "1.0", "i386"), "scr-tf", "1.0")
            .field("Multi-Arch", "same")
            .file("/usr/share/scr-tf/file", b"1\n", 0o644)
            .member("triggers", b"interest /usr/share/scr-form\n"),
    );
    let v2 = debs.build(
        logging(Pkg::new("scr-tf", "2.0", "amd64"), "scr-tf", "2.0")
            .file("/usr/share/scr-tf/file", b"2\n", 0o644)
            .member("triggers", b"interest-noawait /usr/share/scr-form\n"),
    );
    let o = Scripted::new("an interest changing form");
    o.both(|root| {
        let r = dpkg(root, &["--add-architecture", "i386"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        dpkg_install(root, &v1);
    });
    assert_eq!(
        content(o.theirs.path(), "var/lib/dpkg/triggers/File"),
        "/usr/share/scr-form scr-tf:i386\n"
    );
    o.unpack(&[&v2], 0);
    assert_eq!(
        content(o.theirs.path(), "var/lib/dpkg/triggers/File"),
        "/usr/share/scr-form scr-tf/noawait\n"
    );
    o.configure();
}

/// What a maintainer script queues with `dpkg-trigger` (a line `TRIGGER AWAITER` appended to
/// triggers/Unincorp, as dpkg-trigger appends it) is incorporated after the unpack phase's
/// scripts, as dpkg incorporates it after each script: the interested package pending, the
/// awaiter awaiting it, Unincorp empty again.
#[test]
fn a_trigger_a_preinst_queues_with_dpkg_trigger_is_incorporated() {
    let debs = Debs::new();
    let ei = interested(&debs, "scr-tq", "interest scr-tq-queued\n");
    let preinst = format!(
        "{}echo 'scr-tq-queued scr-tw' >> /var/lib/dpkg/triggers/Unincorp\nexit 0\n",
        logging_script("scr-tw_1.0", "preinst").replace("exit 0\n", "")
    );
    let queuer = debs.build(
        logging(Pkg::new("scr-tw", "1.0", "amd64"), "scr-tw", "1.0")
            .file("/usr/share/scr-tw/file", b"w\n", 0o644)
            .script("preinst", &preinst),
    );
    let o = Scripted::new("dpkg-trigger in a preinst");
    o.both(|root| dpkg_install(root, &ei));
    o.unpack(&[&queuer], 0);
    assert_pending(&o, "scr-tq", "scr-tq-queued");
    let tw = status_of(o.theirs.path(), "scr-tw:amd64");
    assert_eq!(field(&tw, "Triggers-Awaited").as_deref(), Some("scr-tq"), "{tw:?}");
    o.configure();
}

/// Two file triggers made pending by one package: `Triggers-Pending` lists the newest first,
/// as dpkg prepends each.
#[test]
fn two_pending_file_triggers_are_listed_as_dpkg_lists_them() {
    let debs = Debs::new();
    let ei =
        interested(&debs, "scr-t2", "interest /usr/share/scr-t2a\ninterest /usr/share/scr-t2b\n");
    let activator = debs.build(
        logging(Pkg::new("scr-t2x", "1.0", "amd64"), "scr-t2x", "1.0")
            .file("/usr/share/scr-t2a/x", b"a\n", 0o644)
            .file("/usr/share/scr-t2b/x", b"b\n", 0o644),
    );
    let o = Scripted::new("two pending triggers");
    o.both(|root| dpkg_install(root, &ei));
    o.unpack(&[&activator], 0);
    o.configure();
}

/// `scr-ms` VERSION for ARCH, Multi-Arch: same, with the logging scripts and a shared file
/// whose content is `shared`.
fn multi_arch(debs: &Debs, version: &str, arch: &str, shared: &str) -> PathBuf {
    debs.build(
        logging(Pkg::new("scr-ms", version, arch), "scr-ms", version)
            .field("Multi-Arch", "same")
            .file("/usr/share/scr-ms/shared", shared.as_bytes(), 0o644)
            .file(&format!("/usr/lib/scr-ms/{arch}"), arch.as_bytes(), 0o644),
    )
}

/// Both roots with i386 enabled and scr-ms 1.0:amd64 installed.
fn multi_arch_roots(what: &str, amd64: &Path) -> Scripted {
    let o = Scripted::new(what);
    o.both(|root| {
        let r = dpkg(root, &["--add-architecture", "i386"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        dpkg_install(root, amd64);
    });
    o
}

/// A Multi-Arch: same instance whose shared file differs from the installed instance's, both
/// of one version: refused as dpkg refuses it ("trying to overwrite shared ..., which is
/// different from other instances"), exit 1; the same file is accepted.
#[test]
fn a_multi_arch_same_shared_file_must_be_the_same_in_every_instance() {
    let debs = Debs::new();
    let amd64 = multi_arch(&debs, "1.0", "amd64", "shared\n");
    let differs = multi_arch(&debs, "1.0", "i386", "not the same\n");
    let o = multi_arch_roots("a shared file that differs", &amd64);
    let theirs = dpkg_try_unpack(o.theirs.path(), &NO_TRIGGERS, &[&differs]);
    assert_eq!(theirs.code, 1, "{}", theirs.stderr);
    assert!(theirs.stderr.contains("which is different from other instances"), "{}", theirs.stderr);
    let ours = ours_try_unpack(o.ours.path(), &[], &[&differs]);
    assert_eq!(ours.code, 1, "{}", ours.stderr);
    assert!(ours.stderr.contains("/usr/share/scr-ms/shared"), "{}", ours.stderr);
    assert_eq!(content(o.ours.path(), "usr/share/scr-ms/shared"), "shared\n");

    let same = multi_arch(&debs, "1.0", "i386", "shared\n");
    let o = multi_arch_roots("a shared file that is the same", &amd64);
    o.unpack(&[&same], 0);
    o.configure();
}

/// An instance of another version takes the set out of sync: dpkg deconfigures the installed
/// instance first (recorded `half-configured`, then its `prerm deconfigure in-favour
/// scr-ms:i386 2.0`), and so does the engine: the same calls, environment and database.
#[test]
fn an_instance_of_another_version_deconfigures_the_installed_ones_as_dpkg_does() {
    let debs = Debs::new();
    let amd64 = multi_arch(&debs, "1.0", "amd64", "1\n");
    let i386 = multi_arch(&debs, "2.0", "i386", "2\n");
    let o = multi_arch_roots("a Multi-Arch: same set out of sync", &amd64);
    o.unpack(&[&i386], 0);
    assert_ends_with(
        &o,
        &[
            "scr-ms_1.0 prerm [deconfigure] [in-favour] [scr-ms:i386] [2.0]",
            "scr-ms_2.0 preinst [install]",
        ],
    );
    let stanza = status_of(o.theirs.path(), "scr-ms:amd64");
    assert_eq!(
        field(&stanza, "Status").as_deref(),
        Some("install ok half-configured"),
        "{stanza:?}"
    );
    // dpkg --configure refuses a set of two versions on both sides alike (apt would unpack
    // scr-ms:amd64 2.0 first); dpkg --audit says the same of both.
    let audit = |root: &Path| dpkg(root, &["--audit"]).stdout;
    assert_eq!(audit(o.ours.path()), audit(o.theirs.path()));
}
