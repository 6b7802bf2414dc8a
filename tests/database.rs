//! Database mode beyond what the dpkg oracle compares (tests/dpkg_oracle.rs): a crash at every
//! rename and removal of an upgrade with a database, dpkg's locks, every error path of reading
//! a database, and hostile databases. Each runs the real binary on roots made by it and by the
//! real dpkg.

mod common;

use common::dpkg::{dpkg, dpkg_configure, tool, unpack_db, DbRoot, Pkg};
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A version 1 and a version 2 of one package: v2 changes a file and a conffile, adds a file,
/// and drops a file, a directory and a conffile.
fn pair(dir: &Path) -> (PathBuf, PathBuf) {
    let v1 = Pkg::new("crashdb", "1.0", "all")
        .file("/usr/share/crashdb/kept", b"kept 1\n", 0o644)
        .file("/usr/share/crashdb/dropped", b"dropped\n", 0o644)
        .file("/usr/share/crashdb/old/only", b"only in 1\n", 0o644)
        .conffile("/etc/crashdb/changed.conf", b"changed 1\n")
        .conffile("/etc/crashdb/gone.conf", b"gone\n")
        .build(dir);
    let v2 = Pkg::new("crashdb", "2.0", "all")
        .file("/usr/share/crashdb/kept", b"kept 2\n", 0o644)
        .file("/usr/share/crashdb/added", b"added in 2\n", 0o644)
        .conffile("/etc/crashdb/changed.conf", b"changed 2\n")
        .build(dir);
    (v1, v2)
}

/// A root's non-directory nodes by path (type, mode and content; not times, which the database
/// files take from the clock), the engine's state directory left out.
fn contents(root: &Path) -> BTreeMap<PathBuf, (char, u32, u64, Option<PathBuf>)> {
    snapshot(root)
        .into_iter()
        .filter(|(p, n)| n.kind != 'd' && !p.starts_with("var/lib/unpack"))
        .map(|(p, n)| (p, (n.kind, n.mode, n.content, n.link)))
        .collect()
}

fn cp(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let r = run(Command::new("cp").arg("-a").arg(from).arg(to));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// `unpack -s STRATEGY DEB ROOT` killed by SIGKILL at the `when`-th call of `syscall`.
fn killed_at(root: &Path, deb: &Path, strategy: &str, syscall: &str, when: u32) -> Run {
    run(Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("inject={syscall}:signal=KILL:when={when}"))
        .arg(unpack_bin())
        .args(["-q", "-s", strategy])
        .arg(deb)
        .arg(root))
}

/// SIGKILL at every rename (the package's files, the database's files, the journal's) and
/// every unlink (the removals of what v2 dropped, the old info files) of an upgrade with a
/// database, then `unpack --recover`: the files and the database are together entirely old or
/// entirely new, and the real dpkg agrees (`--audit` silent after a configure, `--verify` clean).
#[test]
fn kill_9_at_every_rename_and_removal_of_an_upgrade_with_a_database_recovers_all_old_or_all_new() {
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let template = DbRoot::new();
    unpack_db(template.path(), &[&v1]);
    dpkg_configure(template.path(), &[]);
    let old = contents(template.path());
    let root = work.path().join("root");
    cp(template.path(), &root);
    unpack_db(&root, &[&v2]);
    let new = contents(&root);
    assert_ne!(old, new);
    for strategy in ["fsync", "syncfs"] {
        let mut seen = (0, 0);
        for syscall in ["renameat", "unlinkat"] {
            for when in 1.. {
                cp(template.path(), &root);
                let r = killed_at(&root, &v2, strategy, syscall, when);
                let what = format!("{strategy}, SIGKILL at {syscall} #{when}");
                let r2 = unpack(["--recover", root.to_str().unwrap()]);
                assert_eq!(r2.code, 0, "{what}: recover: {}", r2.stderr);
                let now = contents(&root);
                if now == new {
                    seen.1 += 1;
                } else {
                    assert_same_contents(&now, &old, &what);
                    seen.0 += 1;
                }
                let audit = dpkg(&root, &["--audit"]);
                let expected_state = if now == new { "unpacked" } else { "" };
                assert!(
                    audit.stdout.contains(expected_state),
                    "{what}: dpkg --audit: {}",
                    audit.stdout
                );
                if now != new {
                    assert!(
                        audit.stdout.is_empty(),
                        "{what}: the old state is configured: {}",
                        audit.stdout
                    );
                }
                let verify = dpkg(&root, &["--verify"]);
                assert!(
                    verify.stdout.is_empty() && verify.code == 0,
                    "{what}: dpkg --verify: {}{}",
                    verify.stdout,
                    verify.stderr
                );
                if r.code == 0 {
                    break; // this call count was never reached: the upgrade ran to its end
                }
                assert!(when < 200, "{what}: still killed");
            }
        }
        assert!(seen.0 > 0 && seen.1 > 0, "{strategy}: both ends reached: {seen:?}");
    }
}

/// Killed in the rename phase, then dpkg run on the root before unpack's recovery (as an
/// administrator does after a crash): recovery never puts the transaction's older version over
/// dpkg's newer one. It renames nothing and exits 4 naming what changed and the way out, and so
/// does every later call; `unpack --recover --discard` then drops the transaction, leaves
/// dpkg's files as they are, and records the package `reinstreq half-installed`, which `dpkg
/// --audit` names and a reinstall repairs.
#[test]
fn recovery_never_renames_over_what_dpkg_did_since_the_crash() {
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let v3 = Pkg::new("crashdb", "3.0", "all")
        .file("/usr/share/crashdb/kept", b"kept 3\n", 0o644)
        .file("/usr/share/crashdb/added", b"added in 3\n", 0o644)
        .conffile("/etc/crashdb/changed.conf", b"changed 3\n")
        .build(work.path());
    let root = DbRoot::new();
    unpack_db(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    // The journal's rename is the first: killed at the second, the first file's.
    let r = killed_at(root.path(), &v2, "fsync", "renameat", 2);
    assert_ne!(r.code, 0, "the unpack was killed");
    assert!(root.path().join("var/lib/unpack/txn").exists(), "killed in its rename phase");
    let r = dpkg(root.path(), &["--force-depends", "--unpack", v3.to_str().unwrap()]);
    assert_eq!(r.code, 0, "dpkg ran: {}", r.stderr);
    let after_dpkg = contents(root.path());

    for args in [vec!["--recover"], vec!["-s", "none", v1.to_str().unwrap()]] {
        let mut all = args.clone();
        all.push(root.path().to_str().unwrap());
        let r = unpack(all);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        for said in ["changed since", "crashdb 2.0", "--recover --discard"] {
            assert!(r.stderr.contains(said), "{args:?}: {said:?} not in {}", r.stderr);
        }
        assert_eq!(contents(root.path()), after_dpkg, "{args:?} changed the root");
    }

    let r = unpack(["--recover", "--discard", root.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("was dropped"), "{}", r.stdout);
    let status = tool("dpkg-query", root.path(), &["-W", "-f=${Status} ${Version}", "crashdb"]);
    assert_eq!(status.stdout, "install reinstreq half-installed 3.0");
    assert!(dpkg(root.path(), &["--audit"]).stdout.contains("crashdb"));
    let leftovers = leftover_temps(root.path());
    assert!(leftovers.is_empty(), "the transaction's temporary files are gone: {leftovers:?}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("usr/share/crashdb/kept")).unwrap(),
        "kept 3\n"
    );
    let r = dpkg(root.path(), &["--force-depends", "--unpack", v3.to_str().unwrap()]);
    assert_eq!(r.code, 0, "dpkg reinstalls: {}", r.stderr);
    dpkg_configure(root.path(), &[]);
    assert_eq!(dpkg(root.path(), &["--audit"]).stdout, "");
    assert_eq!(unpack(["--recover", root.path().to_str().unwrap()]).code, 0);
}

fn assert_same_contents(
    now: &BTreeMap<PathBuf, (char, u32, u64, Option<PathBuf>)>,
    expected: &BTreeMap<PathBuf, (char, u32, u64, Option<PathBuf>)>,
    what: &str,
) {
    let differ: Vec<_> = now
        .keys()
        .chain(expected.keys())
        .filter(|p| now.get(*p) != expected.get(*p))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: neither all old nor all new; against old these differ: {differ:?}"
    );
}

/// dpkg's `lock-frontend` or `lock` held by another process: exit 5 naming the holder and the
/// file, nothing changed; `DPKG_FRONTEND_LOCKED` (apt runs us holding the frontend lock) skips
/// only the frontend lock, as dpkg does.
#[test]
fn dpkg_s_locks_held_by_another_process_are_exit_5_naming_it() {
    let work = tempfile::tempdir().unwrap();
    let (v1, _) = pair(work.path());
    let root = DbRoot::new();
    let before = contents(root.path());
    for file in ["lock-frontend", "lock"] {
        let holder = LockHolder::new(&root.admindir().join(file));
        let r = unpack(["-q", v1.to_str().unwrap(), root.path().to_str().unwrap()]);
        assert_eq!(r.code, 5, "{file}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("perl (pid {})", holder.0.id())) && r.stderr.contains(file),
            "{file}: {}",
            r.stderr
        );
        let after: BTreeMap<_, _> = contents(root.path())
            .into_iter()
            .filter(|(p, _)| !p.ends_with("lock") && !p.ends_with("lock-frontend"))
            .collect();
        assert_eq!(
            after,
            before
                .clone()
                .into_iter()
                .filter(|(p, _)| !p.ends_with("lock") && !p.ends_with("lock-frontend"))
                .collect::<BTreeMap<_, _>>(),
            "{file}: nothing changed"
        );
    }
    let _frontend = LockHolder::new(&root.admindir().join("lock-frontend"));
    let r = run(Command::new(unpack_bin()).env("DPKG_FRONTEND_LOCKED", "1").args([
        "-q",
        v1.to_str().unwrap(),
        root.path().to_str().unwrap(),
    ]));
    assert_eq!(r.code, 0, "with the frontend lock handed over: {}", r.stderr);
}

/// While unpack works on a root, the real dpkg is locked out of it.
#[test]
fn a_running_unpack_locks_the_real_dpkg_out() {
    let work = tempfile::tempdir().unwrap();
    let (v1, _) = pair(work.path());
    let root = DbRoot::new();
    // Stopped at its first rename (of the commit), with every lock held.
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "inject=renameat:signal=STOP:when=1"])
        .arg(unpack_bin())
        .args(["-q", v1.to_str().unwrap(), root.path().to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // strace's child, in a stop state for a whole second (a traced process passes through
    // brief stops at each system call it makes).
    let strace = child.id();
    let mut still = 0;
    let mut unpack_pid = None;
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("unpack ended ({status}) before its first rename: {err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let children = std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children"))
            .unwrap_or_default();
        unpack_pid = children.split_whitespace().next().map(str::to_string);
        let stat = unpack_pid
            .as_ref()
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
        still = if matches!(state, Some("T" | "t")) { still + 1 } else { 0 };
        if still >= 10 {
            break;
        }
    }
    assert!(still >= 10, "unpack never stopped at its rename");
    let r = dpkg(root.path(), &["--unpack", v1.to_str().unwrap()]);
    let _ = run(Command::new("kill").args(["-CONT", unpack_pid.as_deref().unwrap()]));
    let status = child.wait().unwrap();
    assert_ne!(r.code, 0, "dpkg ran beside unpack: {}", r.stdout);
    assert!(r.stderr.contains("lock"), "{}", r.stderr);
    assert!(status.success(), "unpack, continued, finishes");
}

/// Runs `unpack` on a root whose database `spoil` changed, and checks exit code, message and
/// that nothing changed.
fn refused(spoil: impl Fn(&Path), args: &[&str], code: i32, says: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let root = DbRoot::new();
    unpack_db(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    spoil(root.path());
    let before = snapshot(root.path());
    let mut all: Vec<&str> = args.to_vec();
    all.extend([v2.to_str().unwrap(), root.path().to_str().unwrap()]);
    let r = unpack(all);
    assert_eq!(r.code, code, "{says:?}: {}", r.stderr);
    for s in says {
        assert!(r.stderr.contains(s), "{s:?} not in: {}", r.stderr);
    }
    let after = snapshot(root.path());
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, n)| !p.starts_with("var/lib/unpack") && before.get(*p) != Some(n))
        .map(|(p, _)| p)
        .collect();
    assert!(changed.is_empty(), "{says:?}: changed {changed:?}");
}

/// dpkg's lock files are the root owner's to shape: a FIFO there must not hang the call (it is
/// opened without blocking), a symlink to a file elsewhere must not be followed and a hard link
/// to one must not empty it (never truncated, and locked as it is); only a regular file is
/// locked.
#[test]
fn dpkg_s_lock_files_planted_as_a_fifo_a_symlink_or_a_directory_are_exit_4_and_touch_nothing() {
    let host = tempfile::tempdir().unwrap();
    let victim = host.path().join("victim");
    std::fs::write(&victim, b"the host's").unwrap();
    for name in ["lock-frontend", "lock"] {
        let replace = |root: &Path| {
            let path = root.join("var/lib/dpkg").join(name);
            let _ = std::fs::remove_file(&path);
            path
        };
        let fifo = |root: &Path| {
            assert!(Command::new("mkfifo").arg(replace(root)).status().unwrap().success())
        };
        refused(fifo, &[], 4, &[name, "not a regular file"]);
        let victim = victim.clone();
        refused(
            move |root: &Path| std::os::unix::fs::symlink(&victim, replace(root)).unwrap(),
            &[],
            4,
            &[name],
        );
        refused(|root: &Path| std::fs::create_dir(replace(root)).unwrap(), &[], 4, &[name]);
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"the host's");

    let work = tempfile::tempdir().unwrap();
    let (v1, _) = pair(work.path());
    let root = DbRoot::new();
    std::fs::hard_link(&victim, root.path().join("var/lib/dpkg/lock")).unwrap();
    unpack_db(root.path(), &[&v1]);
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"the host's",
        "a lock hard-linked to another file is locked, never emptied"
    );
}

#[test]
fn an_unparseable_status_is_exit_4_naming_the_file_and_line() {
    refused(
        |root| {
            let status = root.join("var/lib/dpkg/status");
            let mut text = std::fs::read_to_string(&status).unwrap();
            text.push_str("Package: broken\nno colon here\n");
            std::fs::write(status, text).unwrap();
        },
        &[],
        4,
        &["var/lib/dpkg/status", "line", "reading dpkg's database"],
    );
}

#[test]
fn a_missing_list_of_an_installed_package_is_exit_4() {
    refused(
        |root| std::fs::remove_file(root.join("var/lib/dpkg/info/crashdb.list")).unwrap(),
        &[],
        4,
        &["crashdb.list", "missing"],
    );
}

/// dpkg's journal, `updates/`: records a dpkg (or an unpack) that was interrupted left are read
/// over status as dpkg reads them, and the unpack that writes status removes them; a record
/// dpkg could not read either (a Status of no state) is exit 4, naming it.
#[test]
fn records_dpkg_has_not_merged_are_read_as_dpkg_reads_them() {
    refused(
        |root| {
            let record = "Package: crashdb\nStatus: install ok bogus\n";
            std::fs::write(root.join("var/lib/dpkg/updates/0000"), record).unwrap()
        },
        &[],
        4,
        &["updates/0000"],
    );

    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let root = DbRoot::new();
    unpack_db(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    let status = std::fs::read_to_string(root.path().join("var/lib/dpkg/status")).unwrap();
    let record =
        status.replace("Status: install ok installed", "Status: install reinstreq half-installed");
    assert_ne!(record, status);
    std::fs::write(
        root.path().join("var/lib/dpkg/updates/0000"),
        record.trim_end().to_string() + "\n",
    )
    .unwrap();
    let query = |root: &Path| {
        let r = tool("dpkg-query", root, &["-W", "-f=${Status} ${Version}", "crashdb"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    assert_eq!(query(root.path()), "install reinstreq half-installed 1.0");
    unpack_db(root.path(), &[&v2]);
    assert_eq!(query(root.path()), "install ok unpacked 2.0");
    assert!(!root.path().join("var/lib/dpkg/updates/0000").exists(), "the record is gone");
}

#[test]
fn an_admindir_outside_the_root_or_without_status_is_exit_2() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("status"), "").unwrap();
    let dir = outside.path().to_str().unwrap().to_string();
    refused(|_| {}, &["--admindir", &dir], 2, &["not inside the root"]);
    refused(
        |root| std::fs::create_dir_all(root.join("srv/empty")).unwrap(),
        &["--admindir", "/nonexistent-admindir"],
        2,
        &["--admindir"],
    );
}

#[test]
fn an_admindir_that_is_not_dpkg_s_is_exit_2() {
    let work = tempfile::tempdir().unwrap();
    let (v1, _) = pair(work.path());
    let root = DbRoot::new();
    std::fs::create_dir_all(root.path().join("srv/empty")).unwrap();
    let r = unpack([
        "--admindir",
        root.path().join("srv/empty").to_str().unwrap(),
        v1.to_str().unwrap(),
        root.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no status file"), "{}", r.stderr);
}

/// A list may name as a file what the root now has as a directory with something in it: the
/// upgrade that drops it leaves the directory and what it holds.
#[test]
fn a_dropped_path_that_is_now_a_non_empty_directory_is_left() {
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let root = DbRoot::new();
    unpack_db(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    let dropped = root.path().join("usr/share/crashdb/dropped");
    std::fs::remove_file(&dropped).unwrap();
    std::fs::create_dir(&dropped).unwrap();
    std::fs::write(dropped.join("mine"), b"the administrator's").unwrap();
    unpack_db(root.path(), &[&v2]);
    assert_eq!(std::fs::read(dropped.join("mine")).unwrap(), b"the administrator's");
    assert!(!root.path().join("usr/share/crashdb/old/only").exists());
}

/// No package writes a file into dpkg's database (exit 3, nothing changed); its directories
/// (the dpkg package ships var/lib/dpkg/info/ and others) are fine.
#[test]
fn a_package_file_in_dpkg_s_database_is_exit_3() {
    let work = tempfile::tempdir().unwrap();
    let root = DbRoot::new();
    let dirs_only = Pkg::new("dirs", "1", "all")
        .dir("/var/lib/dpkg/parts", 0o755)
        .file("/usr/share/dirs/f", b"f", 0o644)
        .build(work.path());
    unpack_db(root.path(), &[&dirs_only]);
    for path in ["/var/lib/dpkg/status", "/var/lib/dpkg/info/other.postinst"] {
        let evil =
            Pkg::new("evil", "1", "all").file(path, b"Package: evil\n", 0o644).build(work.path());
        let before = snapshot(root.path());
        let r = unpack([evil.to_str().unwrap(), root.path().to_str().unwrap()]);
        assert_eq!(r.code, 3, "{path}: {}", r.stderr);
        assert!(r.stderr.contains("dpkg's database"), "{}", r.stderr);
        assert_eq!(
            snapshot(root.path())
                .into_iter()
                .filter(|(p, _)| !p.starts_with("var/lib/unpack"))
                .collect::<BTreeMap<_, _>>(),
            before
                .into_iter()
                .filter(|(p, _)| !p.starts_with("var/lib/unpack"))
                .collect::<BTreeMap<_, _>>()
        );
    }
}

/// Hostile databases: names with `..`, NUL, relative or oversized entries are exit 4 before
/// anything changes; names that lead through a symlink out of the root are resolved inside it,
/// so a removal never touches a file outside.
#[test]
fn hostile_database_entries_never_touch_a_path_outside_the_root() {
    let append = |file: &'static str, text: &'static [u8]| {
        move |root: &Path| {
            let path = root.join("var/lib/dpkg").join(file);
            let mut bytes = std::fs::read(&path).unwrap_or_default();
            bytes.extend_from_slice(text);
            std::fs::write(path, bytes).unwrap();
        }
    };
    refused(
        append("info/crashdb.list", b"/usr/../../../etc/passwd\n"),
        &[],
        4,
        &["crashdb.list", "'..'"],
    );
    refused(
        append("info/crashdb.list", b"usr/relative\n"),
        &[],
        4,
        &["crashdb.list", "not absolute"],
    );
    refused(append("info/crashdb.list", b"/usr/nul\0byte\n"), &[], 4, &["crashdb.list", "NUL"]);
    refused(
        append("diversions", b"/usr/share/crashdb/kept\n/../../tmp/x\n:\n"),
        &[],
        4,
        &["diversions"],
    );
    refused(append("statoverride", b"root root 0755 /usr/../x\n"), &[], 4, &["statoverride"]);
    refused(
        |root| {
            let f = std::fs::File::create(root.join("var/lib/dpkg/info/crashdb.list")).unwrap();
            f.set_len(65 << 20).unwrap(); // sparse
        },
        &[],
        4,
        &["crashdb.list", "more than"],
    );
    // A dropped path whose directory is now a symlink to a host directory holding a file of
    // that name: resolved inside the root, where it leads nowhere, so the package's directory
    // entry replaces the symlink as dpkg's would (tests/upgrade_semantics.rs); the host's file
    // stays, and nothing is written where the link points.
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("dropped"), b"the host's").unwrap();
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let root = DbRoot::new();
    unpack_db(root.path(), &[&v1]);
    dpkg_configure(root.path(), &[]);
    let dir = root.path().join("usr/share/crashdb");
    std::fs::rename(&dir, root.path().join("usr/share/crashdb-moved")).unwrap();
    std::os::unix::fs::symlink(host.path(), &dir).unwrap();
    let r = unpack(["-q", v2.to_str().unwrap(), root.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(host.path().join("dropped")).unwrap(), b"the host's");
    assert!(dir.is_dir() && !dir.is_symlink(), "the symlink is replaced by the directory");
    assert!(dir.join("kept").is_file());
    assert!(!root.path().join(host.path().strip_prefix("/").unwrap()).exists());
    assert_eq!(
        std::fs::read_dir(host.path()).unwrap().count(),
        1,
        "the host's directory untouched"
    );
}

/// The JSON report says per package what happened in the database; the human report says it
/// in a line. A root without a database gets none (an extraction, no var/lib/dpkg).
#[test]
fn the_reports_say_installed_or_upgraded_what_was_removed_and_which_conffiles_wait() {
    let work = tempfile::tempdir().unwrap();
    let (v1, v2) = pair(work.path());
    let root = DbRoot::new();
    let r = unpack(["--json", v1.to_str().unwrap(), root.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = &r.json()["packages"][0]["database"];
    assert_eq!(db["action"], "installed");
    assert!(db["previous_version"].is_null());
    assert_eq!(
        db["conffiles_new"],
        serde_json::json!(["/etc/crashdb/changed.conf", "/etc/crashdb/gone.conf"])
    );
    dpkg_configure(root.path(), &[]);
    let r = unpack([v2.to_str().unwrap(), root.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("upgraded from 1.0")
            && r.stdout.contains("/etc/crashdb/changed.conf.dpkg-new"),
        "{}",
        r.stdout
    );
    // dropped, old/only and the directory old/ go; the obsolete conffile stays.
    assert!(r.stdout.contains("removed 3 paths"), "{}", r.stdout);
    let bare = tempfile::tempdir().unwrap();
    let r = unpack(["--json", v1.to_str().unwrap(), bare.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.json()["packages"][0].get("database").is_none());
    assert!(!bare.path().join("var/lib/dpkg").exists());
    assert!(
        bare.path().join("etc/crashdb/changed.conf").exists(),
        "no database: conffiles are plain files"
    );
}
