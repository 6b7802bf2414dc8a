//! `unpack-crashtest` against the real `unpack`, real ext4 on the virtual disk, real journal
//! replays, the real `unpack --recover` and real fsck (as root). The point is that the checker
//! can fail: `none` must lose data where ext4 is known to lose it, and the durable strategies
//! must not, over hundreds of crash states. The budgets stay small (a package of a few dozen
//! files, at most 120 states a cell); the full matrix is for people.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{fixture, is_root, run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use unpack_lab::crash::bootstrap;
use unpack_lab::crash::check::{after_recovery, Expected, Recovered, Violation};
use unpack_lab::crash::database;
use unpack_lab::crash::expect::Content;
use unpack_lab::crash::record::install_with_dpkg;
use unpack_lab::scratchfs::{LoopDevice, Mounted};

fn crashtest() -> Command {
    Command::new(env!("CARGO_BIN_EXE_unpack-crashtest"))
}

/// A package of 36 files of many sizes in nested directories, a symlink and a hard link,
/// built by dpkg-deb.
fn small_package(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    std::fs::write(
        tree.join("DEBIAN/control"),
        "Package: crashy\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: crash test\n",
    )
    .unwrap();
    for i in 0..36u32 {
        let d = tree.join(format!("usr/share/crashy/d{}", i % 4));
        std::fs::create_dir_all(&d).unwrap();
        let len = 1 + (i as usize * 2749) % 24_000;
        let bytes: Vec<u8> = (0..len).map(|j| (j as u32 * 31 + i) as u8).collect();
        std::fs::write(d.join(format!("f{i:02}")), bytes).unwrap();
    }
    std::os::unix::fs::symlink("d0/f00", tree.join("usr/share/crashy/link")).unwrap();
    std::fs::hard_link(tree.join("usr/share/crashy/d1/f01"), tree.join("usr/share/crashy/hard"))
        .unwrap();
    let deb = dir.join("crashy_1.0_all.deb");
    let r = run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "--build"])
        .arg(&tree)
        .arg(&deb));
    assert_eq!(r.code, 0, "dpkg-deb: {}", r.stderr);
    deb
}

/// Runs the crash test with `args` into a new output directory; returns crash.json and the
/// directory.
fn crash_json(args: &[&str], package: &Path) -> (Value, tempfile::TempDir) {
    crash_json_of(args, Some(package))
}

/// [`crash_json`] of a run with or without a package.
fn crash_json_of(args: &[&str], package: Option<&Path>) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    // Its own TMPDIR, so that what it leaves behind is told apart from a run of another test.
    let tmp = tempfile::tempdir().unwrap();
    let r = run(crashtest()
        .env("TMPDIR", tmp.path())
        .args(args)
        .arg("--out")
        .arg(out.path())
        .args(package));
    assert_eq!(r.code, 0, "unpack-crashtest {args:?}: {}", r.stderr);
    assert_no_leftovers(tmp.path());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "the work directory is removed");
    let text = std::fs::read_to_string(out.path().join("crash.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), out)
}

/// Nothing below `tmp` is still mounted or attached to a loop device.
fn assert_no_leftovers(tmp: &Path) {
    let tmp = tmp.canonicalize().unwrap();
    let tmp = tmp.to_str().unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let ours: Vec<&str> = mounts.lines().filter(|l| l.contains(tmp)).collect();
    assert!(ours.is_empty(), "left mounted: {ours:?}");
    let loops = run(Command::new("losetup").arg("-a"));
    let ours: Vec<&str> = loops.stdout.lines().filter(|l| l.contains(tmp)).collect();
    assert!(ours.is_empty(), "left attached: {ours:?}");
}

fn cells(json: &Value) -> &Vec<Value> {
    json["cells"].as_array().unwrap()
}

fn kind_count(cell: &Value, kind: &str) -> u64 {
    cell["kinds"][kind].as_u64().unwrap_or(0)
}

/// Runs one `none` cell until a run is not disturbed by another process's sync(2) (which
/// writes the delayed data before the periodic commit and so closes the loss window), at most
/// five times; returns the last run's only cell and its output directory.
fn none_cell(options: &str, scenario: &str, package: &Path) -> (Value, tempfile::TempDir) {
    let mut last = None;
    for _ in 0..5 {
        let (json, out) = crash_json(
            &[
                "-s",
                "none",
                "--fs",
                "ext4",
                "-o",
                options,
                "--scenario",
                scenario,
                "--states",
                "40",
            ],
            package,
        );
        let cell = cells(&json)[0].clone();
        assert_eq!(cell["error"], Value::Null, "{cell}");
        let lost = kind_count(&cell, "zero-length") > 0;
        let disturbed = cell["foreign_flushes"].as_u64().unwrap() > 0;
        last = Some((cell, out));
        if lost || !disturbed {
            break;
        }
        eprintln!("none on {options}, {scenario}: disturbed by another process's sync, once more");
    }
    last.unwrap()
}

#[test]
fn none_leaves_zero_length_files_on_ext4_install_defaults_and_upgrade_noauto_da_alloc() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let package = small_package(dir.path());
    for (options, scenario) in [("defaults", "install"), ("noauto_da_alloc", "upgrade")] {
        let (cell, out) = none_cell(options, scenario, &package);
        let what = format!("none, ext4 {options}, {scenario}");
        assert!(kind_count(&cell, "zero-length") > 0, "{what}: no zero-length file in {cell}");
        assert!(cell["states_with_violations"].as_u64().unwrap() > 0);
        assert_eq!(cell["fs_failures"].as_array().unwrap().len(), 0, "{what}: {cell}");
        // Every violation names its state, path, what was expected and what was found.
        let violations = cell["violations"].as_array().unwrap();
        let zero = violations.iter().find(|v| v["kind"] == "zero-length").unwrap();
        assert!(zero["found"].as_str().unwrap().starts_with("file of 0 bytes"), "{zero}");
        assert!(zero["expected_new"].as_str().unwrap().starts_with("file of "), "{zero}");
        let old = if scenario == "install" { "absent" } else { "file of " };
        assert!(zero["expected_old"].as_str().unwrap().starts_with(old), "{zero}");
        let state = zero["state"].as_u64().unwrap();
        let detail =
            cell["states_detail"].as_array().unwrap().iter().find(|s| s["id"] == state).unwrap();
        assert_eq!(detail["after_returned"], true, "the loss comes after the exit: {detail}");
        let lines = std::fs::read_to_string(out.path().join("violations.txt")).unwrap();
        assert_eq!(lines.lines().count(), violations.len());
        let table = std::fs::read_to_string(out.path().join("crash.md")).unwrap();
        assert!(
            table.contains(&format!("| {options} | ")) && table.contains("zero-length"),
            "{table}"
        );

        // --replay rebuilds that state; mounted by hand, the file is empty there.
        let id = cell["id"].as_str().unwrap();
        let path = zero["path"].as_str().unwrap();
        let r = run(crashtest()
            .arg("--out")
            .arg(out.path())
            .arg("--replay")
            .arg(format!("{id}:{state}")));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let image = PathBuf::from(r.stdout.lines().next().unwrap());
        let device = LoopDevice::attach(&image).unwrap();
        let mounted =
            Mounted::mount("ext4", device.path(), &dir.path().join("look"), "defaults").unwrap();
        let len = std::fs::metadata(mounted.path().join("root").join(path)).unwrap().len();
        assert_eq!(len, 0, "{path} in the replayed state {state}");
        mounted.unmount().unwrap();
        drop(device);
    }
}

#[test]
fn fsync_syncfs_and_writeback_keep_every_file_old_or_new_and_new_after_exit_over_200_states_each() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let package = small_package(dir.path());
    let args = [
        "-s",
        "fsync,syncfs,writeback",
        "--fs",
        "ext4",
        "-o",
        "defaults",
        "--states",
        "120",
        "--seed",
        "5",
    ];
    let (json, _out) = crash_json(&args, &package);
    assert_eq!(json["seed"], 5);
    let (mut journals, mut intents) = (0, 0);
    for strategy in ["fsync", "syncfs", "writeback"] {
        let mine: Vec<&Value> = cells(&json).iter().filter(|c| c["strategy"] == strategy).collect();
        assert_eq!(mine.len(), 2, "install and upgrade");
        let mut states = 0;
        for cell in mine {
            let id = &cell["id"];
            assert_eq!(cell["error"], Value::Null, "{cell}");
            let violations = cell["violations"].as_array().unwrap();
            assert!(violations.is_empty(), "{id}: {violations:#?}");
            assert_eq!(
                cell["fs_failures"].as_array().unwrap().len(),
                0,
                "{id}: {}",
                cell["fs_failures"]
            );
            assert!(cell["states_after_returned"].as_u64().unwrap() > 0, "{id}");
            // Invariant 3 ran on every state.
            assert_eq!(cell["states_recovered"], cell["states"], "{id}");
            journals += cell["states_with_journal"].as_u64().unwrap();
            intents += cell["states_with_intent"].as_u64().unwrap();
            states += cell["states"].as_u64().unwrap();
        }
        assert!(states >= 200, "{strategy}: only {states} states");
    }
    // Recovery had work of both kinds: rolling renames forward and a write phase back.
    assert!(journals > 0 && intents > 0, "journals {journals}, intents {intents}");
}

#[test]
fn sigterm_while_its_filesystem_is_mounted_takes_everything_down_and_exits_143() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    /// Kills the child on the way out if an assertion fails first.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Reap(
        crashtest()
            .env("TMPDIR", tmp.path())
            .args(["-s", "none", "-o", "defaults", "--scenario", "install", "--settle", "600"])
            .arg("--out")
            .arg(out.path())
            .arg(fixture("pkg-v2_2.0_all.deb"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let canonical = tmp.path().canonicalize().unwrap();
    let ext4_mounted = || {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        table.lines().any(|l| l.contains(canonical.to_str().unwrap()) && l.contains(" - ext4 "))
    };
    // The unpack into the ext4 filesystem is over within seconds; the settle time is not.
    while !ext4_mounted() {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "it ended before its filesystem was mounted"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_no_leftovers(tmp.path());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "the work directory is removed");
}

#[test]
fn bad_arguments_and_non_root_exit_2_and_say_why() {
    let package = fixture("pkg-v2_2.0_all.deb");
    let r = run(crashtest().args(["-s", "nosuch"]).arg(&package));
    if is_root() {
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("nosuch"), "{}", r.stderr);
        let r = run(crashtest().args(["--fs", "zfs"]).arg(&package));
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("zfs"), "{}", r.stderr);
        let r = run(Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_unpack-crashtest"))
            .arg(&package));
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("root"), "{}", r.stderr);
    } else {
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("root"), "{}", r.stderr);
    }
    let r = run(crashtest().args(["--states", "0"]).arg(&package));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = run(crashtest().args(["--replay", "x:1"]));
    assert_eq!(r.code, 2, "--replay needs --out: {}", r.stderr);
}

/// A cell that cannot be run (here: a mount option ext4 refuses) leaves the matrix incomplete:
/// exit 3, the cell named on stderr and under the tables, and never a clean verdict over zero
/// states.
#[test]
fn cells_that_could_not_be_run_exit_3_and_are_named_and_zero_states_give_no_verdict() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let package = fixture("pkg-v2_2.0_all.deb");
    let base =
        ["-s", "none", "--scenario", "install", "--states", "5", "--settle", "0", "--seed", "1"];
    let crashtest_in = |tmp: &Path, sets: &[&str]| {
        let mut cmd = crashtest();
        cmd.env("TMPDIR", tmp).args(base);
        for set in sets {
            cmd.args(["-o", set]);
        }
        run(cmd.arg(&package))
    };
    let bad = "ext4/no_such_option/install/none";

    // Every cell fails: no state was checked, and the matrix says so instead of "found nothing".
    let tmp = tempfile::tempdir().unwrap();
    let r = crashtest_in(tmp.path(), &["no_such_option"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("1 of 1 cells could not be run, the matrix is incomplete: {bad}")),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("No crash state was checked: this matrix has no verdict."),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("fsck found nothing"),
        "a clean verdict over zero states: {}",
        r.stdout
    );
    assert!(r.stdout.contains("## Cells that could not be run\n\n1 of 1 cells"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("- {bad}: ")), "{}", r.stdout);
    assert_no_leftovers(tmp.path());

    // One cell runs, one does not: the matrix is made, still incomplete.
    let tmp = tempfile::tempdir().unwrap();
    let r = crashtest_in(tmp.path(), &["defaults", "no_such_option"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("1 of 2 cells could not be run, the matrix is incomplete: {bad}")),
        "{}",
        r.stderr
    );
    let verdict = r
        .stdout
        .lines()
        .find(|l| l.starts_with("Filesystem: each of the "))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let states: u64 = verdict.split(' ').nth(4).unwrap().parse().unwrap();
    assert!((1..=5).contains(&states), "the states of the cell that ran: {verdict}");
    assert!(
        r.stdout.contains("| defaults | ") && r.stdout.contains("| no_such_option | error |"),
        "{}",
        r.stdout
    );
    assert_no_leftovers(tmp.path());
}

/// A filesystem whose mkfs is not in PATH fails before any cell (a matrix runs for hours),
/// naming the package to install, as unpack-bench does.
#[test]
fn a_missing_mkfs_fails_before_any_cell_and_names_the_package_to_install() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (fs, package) in [("ext4", "e2fsprogs"), ("xfs", "xfsprogs"), ("btrfs", "btrfs-progs")] {
        let r = run(crashtest()
            .env("PATH", empty.path())
            .env("TMPDIR", tmp.path())
            .args(["-s", "none", "--fs", fs])
            .arg(fixture("pkg-v2_2.0_all.deb")));
        assert_eq!(r.code, 1, "{}", r.stderr);
        let says = format!("unpack-crashtest: mkfs.{fs}: not found in PATH: install the Debian package {package}\n");
        assert_eq!(
            r.stderr.split_once('\n').map_or("", |(_, rest)| rest),
            says,
            "after the seed line: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "no matrix: {}", r.stdout);
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "nothing was made");
}

/// The `upgrade-db` pair made from the small package, and the scenario's old and new states
/// as the real dpkg leaves them: a root where it installed and configured the older version,
/// and a copy of it where it then unpacked the newer one.
fn dpkg_roots(dir: &Path) -> (database::Db, PathBuf, PathBuf) {
    let package = small_package(dir);
    let (older, newer) = database::write_pair(&package, dir).unwrap();
    let db = database::Db::of_debs(&older, &newer).unwrap();
    let old_root = dir.join("old-root");
    std::fs::create_dir(&old_root).unwrap();
    install_with_dpkg(&older, &old_root).unwrap();
    let new_root = copy_root(&old_root, dir, "new-root");
    let r = run(Command::new("dpkg")
        .arg(format!("--root={}", new_root.display()))
        .arg("--unpack")
        .arg(&newer));
    assert_eq!(r.code, 0, "dpkg --unpack: {}", r.stderr);
    (db, old_root, new_root)
}

/// A copy of `root` in a new directory of `dir`, owners and modes kept.
fn copy_root(root: &Path, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    let r = run(Command::new("cp").arg("-a").arg(root).arg(&copy));
    assert_eq!(r.code, 0, "cp: {}", r.stderr);
    copy
}

/// (kind, path) of every violation.
fn kinds_and_paths(violations: &[Violation]) -> Vec<(&'static str, String)> {
    violations.iter().map(|v| (v.kind.name(), v.path.display().to_string())).collect()
}

#[test]
fn the_database_invariant_holds_on_the_roots_the_real_dpkg_leaves_before_and_after_the_upgrade() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, old_root, new_root) = dpkg_roots(dir.path());
    // The pair is what the scenario promises: versions in dpkg's order, a conffile, a dropped file.
    assert_eq!(db.package, "crashy");
    assert_eq!((db.old.version.as_str(), db.new.version.as_str()), ("1.0~older", "1.0"));
    let r = run(Command::new("dpkg").args(["--compare-versions", "1.0~older", "lt", "1.0"]));
    assert_eq!(r.code, 0);
    let conffile = Path::new(database::CONFFILE);
    assert!(db.old.conffiles.contains(conffile) && db.new.conffiles.contains(conffile));
    assert!(db.old.tree.0.contains_key(Path::new(database::DROPPED)));
    assert!(!db.new.tree.0.contains_key(Path::new(database::DROPPED)));
    let pending = PathBuf::from(format!("{}.dpkg-new", database::CONFFILE));
    assert_eq!(db.new_tree().get(&pending), db.new.tree.get(conffile));
    assert_eq!(db.new_tree().get(conffile), db.old.tree.get(conffile));
    assert_ne!(db.old.tree.get(conffile), db.new.tree.get(conffile));

    // Old: the older version configured by dpkg.
    let found = database::check(&old_root, &db, 0);
    assert!(found.is_empty(), "old state: {found:#?}");
    // New: dpkg --unpack of the newer version over it.
    assert!(new_root.join(&pending).exists() && !new_root.join(database::DROPPED).exists());
    let found = database::check(&new_root, &db, 0);
    assert!(found.is_empty(), "new state: {found:#?}");
}

#[test]
fn the_database_invariant_names_what_a_doctored_root_breaks() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, old_root, new_root) = dpkg_roots(dir.path());
    let file = "usr/share/crashy/d1/f05";
    let list = format!("var/lib/dpkg/info/{}.list", db.package);
    let pending = format!("{}.dpkg-new", database::CONFFILE);
    // What a case does to the root, and the violations (kind, path) the invariant must report.
    type Doctor = fn(&Path, &Path, &str, &str);
    type Case<'a> = (&'a str, Doctor, Vec<(&'a str, &'a str)>);
    let cases: [Case; 5] = [
        (
            "a listed file missing",
            |root, _, file, _| std::fs::remove_file(root.join(file)).unwrap(),
            vec![("db-tree", file)],
        ),
        (
            "a file with another md5sum",
            |root, _, file, _| std::fs::write(root.join(file), "other bytes").unwrap(),
            vec![("db-tree", file)],
        ),
        (
            "the status says the newer version, the list is the older one's",
            |root, old_root, _, list| {
                std::fs::copy(old_root.join(list), root.join(list)).unwrap();
            },
            // dpkg --verify, reading the older list, misses the dropped file.
            vec![("half-registered", list.as_str()), ("db-tree", database::DROPPED)],
        ),
        (
            "a .dpkg-new with the wrong content",
            |root, _, _, _| {
                std::fs::write(root.join(format!("{}.dpkg-new", database::CONFFILE)), "edited\n")
                    .unwrap()
            },
            vec![("db-tree", pending.as_str())],
        ),
        (
            "the status says the newer version is installed",
            |root, _, _, _| {
                let status = root.join("var/lib/dpkg/status");
                let text = std::fs::read_to_string(&status)
                    .unwrap()
                    .replace("install ok unpacked", "install ok installed");
                std::fs::write(status, text).unwrap();
            },
            vec![("half-registered", "var/lib/dpkg/status")],
        ),
    ];
    for (i, (what, doctor, want)) in cases.into_iter().enumerate() {
        let root = copy_root(&new_root, dir.path(), &format!("doctored-{i}"));
        doctor(&root, &old_root, file, &list);
        let found = database::check(&root, &db, 7);
        let got = kinds_and_paths(&found);
        let want: Vec<(&str, String)> = want.into_iter().map(|(k, p)| (k, p.to_string())).collect();
        // Each expected violation is there, and nothing of another kind or path.
        for w in &want {
            assert!(got.contains(w), "{what}: no {w:?} in {found:#?}");
        }
        assert!(got.iter().all(|g| want.contains(g)), "{what}: {found:#?}");
        assert!(found.iter().all(|v| v.state == 7), "{what}");
    }

    // dpkg --verify is one of the judges: a missing file is named by it too.
    let root = copy_root(&new_root, dir.path(), "missing");
    std::fs::remove_file(root.join(file)).unwrap();
    let found = database::check(&root, &db, 0);
    assert!(
        found.iter().any(|v| v.found.to_string().starts_with("dpkg --verify: missing")),
        "{found:#?}"
    );
    // The status is dpkg's: with the records in updates/ it has not merged yet (here, what dpkg
    // journals as it starts to unpack the newer version over a configured older one).
    let root = copy_root(&old_root, dir.path(), "journaled");
    let record = format!(
        "Package: {}\nStatus: install reinstreq half-installed\nVersion: {}\nConfig-Version: {}\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: x\n",
        db.package, db.new.version, db.old.version
    );
    std::fs::write(root.join("var/lib/dpkg/updates/0000"), record).unwrap();
    let found = database::check(&root, &db, 0);
    assert_eq!(
        kinds_and_paths(&found),
        [("half-registered", "var/lib/dpkg/status".to_string())],
        "{found:#?}"
    );
    assert!(found[0].found.to_string().contains("half-installed"), "{found:#?}");
    // dpkg --audit is the other: a package the transaction does not know of, left half
    // installed, is named by it.
    for (root, name) in [(&old_root, "old-audited"), (&new_root, "new-audited")] {
        let root = copy_root(root, dir.path(), name);
        let status = root.join("var/lib/dpkg/status");
        let mut text = std::fs::read_to_string(&status).unwrap();
        text.push_str("\nPackage: bystander\nStatus: install reinstreq half-installed\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: x\n");
        std::fs::write(&status, text).unwrap();
        let found = database::check(&root, &db, 0);
        assert_eq!(
            kinds_and_paths(&found),
            [("db-audit", "var/lib/dpkg".to_string())],
            "{name}: {found:#?}"
        );
        assert!(found[0].found.to_string().contains("bystander"), "{found:#?}");
    }
}

/// Awaits the engine's database mode: until `unpack` writes dpkg's database, its upgrade in a
/// root with one overwrites the conffile and keeps the dropped file, which this cell reports.
#[test]
fn an_upgrade_db_cell_of_fsync_finds_no_violation_of_the_files_or_the_database() {
    clean_cell("fsync", "upgrade-db", "30", "3");
}

/// The only cell of a run on the small package, ext4 `defaults`, which must have checked states
/// after recovering each and found no violation and no filesystem failure; and the run's output
/// directory. `None`, the test skipped, when not root.
fn clean_cell(
    strategy: &str,
    scenario: &str,
    states: &str,
    seed: &str,
) -> Option<(Value, tempfile::TempDir)> {
    if !is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let package = small_package(dir.path());
    let args = [
        "-s",
        strategy,
        "--fs",
        "ext4",
        "-o",
        "defaults",
        "--scenario",
        scenario,
        "--states",
        states,
        "--seed",
        seed,
    ];
    let (json, out) = crash_json(&args, &package);
    let cell = cells(&json)[0].clone();
    assert_eq!(cell["id"], format!("ext4/defaults/{scenario}/{strategy}"));
    assert_eq!(cell["error"], Value::Null, "{cell}");
    assert_eq!(cell["states_recovered"], cell["states"], "{cell}");
    assert!(cell["states"].as_u64().unwrap() > 0);
    let violations = cell["violations"].as_array().unwrap();
    assert!(violations.is_empty(), "{violations:#?}");
    assert_eq!(cell["fs_failures"].as_array().unwrap().len(), 0, "{}", cell["fs_failures"]);
    Some((cell, out))
}

/// Bootstrap cells cut the power in all three of the call's transactions: states before the
/// second stage's journal (recovered to nothing, the layout or the first stage, where the
/// bootstrap is run again) and after it (the whole system), and a durable strategy leaves no
/// violation in any.
#[test]
fn a_bootstrap_cell_of_syncfs_finds_no_violation_before_or_after_the_second_stages_journal() {
    let Some((cell, out)) = clean_cell("syncfs", "bootstrap", "40", "4") else { return };
    let states = cell["states"].as_u64().unwrap();
    let by_stage = &cell["bootstrap"]["states_by_stage"];
    let at = |stage: &str| by_stage[stage].as_u64().unwrap_or(0);
    let before = at("nothing") + at("layout") + at("first-stage");
    assert!(
        before > 0 && at("second-stage") > 0,
        "states before and after the second stage's journal: {by_stage}"
    );
    assert_eq!(before + at("second-stage"), states, "every state is at a stage: {by_stage}");
    assert_eq!(
        cell["bootstrap"]["states_redone"].as_u64().unwrap(),
        before,
        "the bootstrap ran again on every state before"
    );
    let table = std::fs::read_to_string(out.path().join("crash.md")).unwrap();
    let redone = cell["bootstrap"]["states_redone"].as_u64().unwrap();
    let row = format!(
        "| defaults | {} / {} / {} / {} (redone {redone}) |",
        at("nothing"),
        at("layout"),
        at("first-stage"),
        at("second-stage")
    );
    assert!(table.contains("## ext4, bootstrap") && table.contains(&row), "no {row} in {table}");
}

/// The bootstrap's packages made from the small package, and a root `unpack --bootstrap` made
/// of them, with what checks it after a crash.
struct Bootstrapped {
    dir: tempfile::TempDir,
    bootstrap: bootstrap::Bootstrap,
    root: PathBuf,
}

impl Bootstrapped {
    fn new() -> Bootstrapped {
        let dir = tempfile::tempdir().unwrap();
        let package = small_package(dir.path());
        let bootstrap = bootstrap::Bootstrap::write(&package, &dir.path().join("debs")).unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let r = run(Command::new(common::unpack_bin())
            .args(["--json", "-s", "fsync"])
            .args(bootstrap::FLAGS)
            .args(&bootstrap.packages)
            .arg(&root));
        assert_eq!(r.code, 0, "unpack --bootstrap: {}", r.stderr);
        // The scenario's point: the first stage writes the Essential copy, the second adopts it.
        let essential = serde_json::json!([bootstrap.registered[0].0]);
        let first_stage = &r.json()["first_stage"];
        assert_eq!(
            (&first_stage["packages"], &first_stage["adopted"]),
            (&essential, &essential),
            "{first_stage}"
        );
        Bootstrapped { dir, bootstrap, root }
    }

    /// The checks after a crash (recovery, the stages, the database, the redo) on `root`.
    fn check(&self, root: &Path) -> Recovered {
        let expected = Expected {
            old: self.bootstrap.first(),
            new: self.bootstrap.last(),
            root: Path::new(""),
            fstype: "ext4",
            unpack: Path::new(common::unpack_bin()),
            strategy: "fsync",
            deeper: Some(&self.bootstrap),
        };
        after_recovery(root, &expected, 3, false)
    }

    /// A copy of the bootstrapped root, named `name`.
    fn copy(&self, name: &str) -> PathBuf {
        copy_root(&self.root, self.dir.path(), name)
    }

    /// The paths the second stage adds to the first stage's tree, deepest first.
    fn second_stage_paths(&self) -> Vec<PathBuf> {
        let [.., first, whole] = &self.bootstrap.stages;
        let mut paths: Vec<PathBuf> =
            whole.0.keys().filter(|p| first.get(p) != whole.get(p)).cloned().collect();
        paths.reverse();
        paths
    }

    /// Takes the second stage's paths out of `root`, the ones a directory holds with it.
    fn remove_second_stage_files(&self, root: &Path) {
        for path in self.second_stage_paths() {
            let path = root.join(path);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
                Ok(_) => std::fs::remove_file(&path).unwrap(),
                Err(_) => {}
            }
        }
    }
}

#[test]
fn the_bootstrap_invariant_holds_on_a_bootstrapped_root_and_names_what_a_doctored_one_breaks() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let b = Bootstrapped::new();
    let (essential, second) = (&b.bootstrap.registered[0].0, &b.bootstrap.registered[1].0);
    let whole = b.check(&b.root);
    assert!(whole.violations.is_empty(), "{:#?}", whole.violations);
    assert_eq!(
        (whole.stage.side, whole.stage.redone),
        (Some(bootstrap::STAGES.len() - 1), false),
        "the whole system, not redone"
    );
    let [_, _, first, last] = &b.bootstrap.stages;
    // The new install is what the trees say: the Essential conffile at its name and as
    // .dpkg-new, the second package's only as .dpkg-new.
    let conffile = |name: &str| PathBuf::from(format!("{name}.dpkg-new"));
    assert_eq!(
        last.get(&conffile(bootstrap::ESSENTIAL_CONFFILE)),
        first.get(Path::new(bootstrap::ESSENTIAL_CONFFILE))
    );
    assert!(
        b.root.join(conffile(bootstrap::ESSENTIAL_CONFFILE)).is_file()
            && b.root.join(conffile(database::CONFFILE)).is_file()
    );
    assert!(!b.root.join(database::CONFFILE).exists());

    // A first-stage file gone: the first stage is not all there.
    let gone = first
        .0
        .iter()
        .find(|(p, c)| matches!(c, Content::File { .. }) && p.starts_with("usr/share"))
        .map(|(p, _)| p.clone())
        .unwrap();
    let root = b.copy("first-stage-file-gone");
    std::fs::remove_file(root.join(&gone)).unwrap();
    let found = b.check(&root);
    assert_eq!(
        kinds_and_paths(&found.violations),
        [("mixed", gone.display().to_string())],
        "{:#?}",
        found.violations
    );
    assert!(!found.stage.redone, "the status lists the packages: no redo");

    // The second stage's files gone, its records kept: registered without its files.
    let root = b.copy("second-stage-files-gone");
    b.remove_second_stage_files(&root);
    let found = b.check(&root);
    assert_eq!(found.stage.side, Some(2), "the tree is the first stage's");
    assert_eq!(
        kinds_and_paths(&found.violations),
        [("half-registered", "var/lib/dpkg/status".to_string())],
        "{:#?}",
        found.violations
    );
    assert!(
        found.violations[0].found.to_string().contains(second.as_str()),
        "{:#?}",
        found.violations
    );

    // Only the first stage done (its files, an empty database): the bootstrap again finishes
    // the system, with nothing to report.
    let root = b.copy("first-stage-only");
    b.remove_second_stage_files(&root);
    for name in [essential, second] {
        for entry in std::fs::read_dir(root.join("var/lib/dpkg/info")).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_str().unwrap().starts_with(&format!("{name}.")) {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let found = b.check(&root);
    assert_eq!((found.stage.side, found.stage.redone), (Some(2), true), "{:#?}", found.violations);
    assert!(found.violations.is_empty(), "{:#?}", found.violations);
    assert!(
        b.check(&root).violations.is_empty() && root.join(conffile(database::CONFFILE)).is_file(),
        "the system is whole"
    );

    // The same, with a dpkg journal record the engine will not take: the redo fails, and
    // says how.
    let root = b.copy("first-stage-and-a-journal");
    b.remove_second_stage_files(&root);
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(root.join("var/lib/dpkg/updates/0000"), "").unwrap();
    let found = b.check(&root);
    let kinds: Vec<&str> = found.violations.iter().map(|v| v.kind.name()).collect();
    assert!(found.stage.redone && kinds.contains(&"redo-failed"), "{:#?}", found.violations);
    let failed = found.violations.iter().find(|v| v.kind.name() == "redo-failed").unwrap();
    assert!(failed.found.to_string().contains("updates"), "{failed:?}");
}

/// Issue 28, item 2: `apt-get upgrade` of the apt-local set (24 packages) in a minbase, cut 30
/// times through unpack-dpkg with syncfs and 30 times with apt and the real dpkg (`-s dpkg`):
/// syncfs leaves every package where dpkg's status says with that place's files, and the
/// administrator's repair always finishes the system; the dpkg row is there with its counts,
/// which are what they are. Needs root and the network (fixtures/fetch-minbase.sh).
#[test]
fn an_apt_upgrade_through_unpack_dpkg_leaves_every_package_old_or_new_and_the_dpkg_row_is_counted()
{
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let minbase = tempfile::Builder::new().prefix("unpack-crash-apt-minbase").tempdir().unwrap();
    let fetch =
        run(Command::new(common::repo().join("fixtures/fetch-minbase.sh")).arg(minbase.path()));
    assert_eq!(fetch.code, 0, "fixtures/fetch-minbase.sh: {}", fetch.stderr);
    let dir = minbase.path().to_str().unwrap();
    let args = [
        "-s",
        "syncfs,dpkg",
        "--fs",
        "ext4",
        "-o",
        "defaults",
        "--scenario",
        "apt",
        "--minbase",
        dir,
        "--states",
        "30",
        "--seed",
        "28",
    ];
    let (json, _out) = crash_json_of(&args, None);
    let cells = cells(&json);
    assert_eq!(cells.len(), 2, "{json}");
    for (cell, strategy) in cells.iter().zip(["syncfs", "dpkg"]) {
        assert_eq!(cell["id"], format!("ext4/defaults/apt/{strategy}"));
        assert_eq!(cell["strategy"], strategy);
        assert_eq!(cell["error"], Value::Null, "{cell}");
        let states = cell["states"].as_u64().unwrap();
        assert_eq!(states, 30, "{cell}");
        let apt = &cell["apt"];
        let count = |name: &str| apt[name].as_u64().unwrap_or_else(|| panic!("{name}: {apt}"));
        assert_eq!(count("states_repaired") + count("states_repair_failed"), states, "{apt}");
        assert!(count("states_needing_reinstall") <= states, "{apt}");
        assert!(count("packages_needing_reinstall") >= count("states_needing_reinstall"), "{apt}");
        let mixed = count("packages_needing_reinstall_mixed");
        assert!(mixed <= count("packages_needing_reinstall"), "{apt}");
        // The engine's transaction leaves a package it records for a reinstall at one version.
        assert!(strategy == "dpkg" || mixed == 0, "{apt}");
        assert!(count("states_apt_fix") <= count("states_repaired"), "{apt}");
        assert!(count("states_with_violations_after_recovery") <= states, "{apt}");
        let listed: u64 = apt["packages_by_status"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert!(listed <= 24 * states, "{apt}");
        eprintln!("{strategy}: {states} states, {apt}");
    }
    let syncfs = &cells[0];
    let violations = syncfs["violations"].as_array().unwrap();
    assert!(violations.is_empty(), "{violations:#?}");
    assert_eq!(syncfs["fs_failures"].as_array().unwrap().len(), 0, "{}", syncfs["fs_failures"]);
}
