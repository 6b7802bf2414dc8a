//! Nothing lost: interrupted transactions (kill -9 at any moment, SIGINT and SIGTERM), full
//! disks, read-only and unwritable roots, and two unpacks at once. Each test runs the real
//! binary on a real ext4 on a loop device and checks the root afterwards.

mod common;

use common::deb_builder::{text_tree, write_deb};
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The non-directory nodes of a tree: what "entirely old or entirely new" is about (directory
/// times legitimately differ after a rollback by recovery).
fn files_of(tree: &BTreeMap<PathBuf, Node>) -> BTreeMap<PathBuf, Node> {
    tree.iter().filter(|(_, n)| n.kind != 'd').map(|(p, n)| (p.clone(), n.clone())).collect()
}

/// The same, with the paths of directories, to compare an install that may be rolled back.
fn paths_of(tree: &BTreeMap<PathBuf, Node>) -> Vec<PathBuf> {
    tree.keys().cloned().collect()
}

struct Versions {
    old: BTreeMap<PathBuf, Node>,
    new: BTreeMap<PathBuf, Node>,
}

fn versions(fs: &Scratch) -> Versions {
    Versions {
        old: files_of(&reference_tree(&fixture("pkg-v1_1.0_all.deb"), &fs.path().join("ref-old"))),
        new: files_of(&reference_tree(&fixture("pkg-v2_2.0_all.deb"), &fs.path().join("ref-new"))),
    }
}

fn install_old(root: &Path) {
    let r = unpack([
        "-q",
        "-s",
        "fsync",
        fixture("pkg-v1_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Runs `unpack -s STRATEGY pkg-v2 ROOT` under strace, which delivers `signal` at the `when`-th
/// call of `syscall`. Returns the run.
fn upgrade_with_injected_signal(
    root: &Path,
    strategy: &str,
    syscall: &str,
    signal: &str,
    when: u32,
) -> Run {
    let deb = fixture("pkg-v2_2.0_all.deb");
    unpack_with_injected_signal(&deb, root, strategy, &format!("{syscall}:signal={signal}"), when)
}

/// Runs `unpack -s STRATEGY DEB ROOT` under strace, which injects `what` (`SYSCALLS:signal=SIG`)
/// at the `when`-th call.
fn unpack_with_injected_signal(
    deb: &Path,
    root: &Path,
    strategy: &str,
    what: &str,
    when: u32,
) -> Run {
    run(Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("inject={what}:when={when}"))
        .arg(unpack_bin())
        .args(["-q", "-s", strategy])
        .arg(deb)
        .arg(root))
}

/// A kill at the `when`-th rename of `unpack -s STRATEGY DEB ROOT`: it must be the kill that
/// ended the run, not an error.
fn killed_at_rename(deb: &Path, root: &Path, strategy: &str, when: u32) {
    let renames = "rename,renameat,renameat2:signal=KILL";
    let r = unpack_with_injected_signal(deb, root, strategy, renames, when);
    assert_ne!(r.code, 0, "killed at rename {when}");
    assert!(!r.stderr.contains("error"), "killed, not failed: {}", r.stderr);
}

fn recover(root: &Path) -> Run {
    let r = unpack(["--recover", root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "recover: {}", r.stderr);
    r
}

/// After recovery the package is entirely old or entirely new, with no temporary file left.
/// Returns true for new.
fn assert_old_or_new(root: &Path, v: &Versions, what: &str) -> bool {
    let now = files_of(&snapshot(root));
    assert!(
        leftover_temps(root).is_empty(),
        "{what}: temporary files left: {:?}",
        leftover_temps(root)
    );
    if now == v.new {
        return true;
    }
    assert_same_tree(
        &now,
        &v.old,
        &format!("{what}: neither entirely new nor entirely old; compared with old"),
    );
    false
}

/// kill -9 at every rename of the rename phase, and at points of the write phase, for every
/// strategy: after `unpack --recover` the package is entirely old or entirely new, and after a
/// kill in the rename phase (the journal is on disk) it is entirely new.
#[test]
fn kill_9_at_every_rename_and_write_then_recover_gives_all_old_or_all_new() {
    let fs = scratch("ext4", "defaults");
    let v = versions(&fs);
    let renames = v.new.len() as u32 + 1; // the package's and the journal's
    for strategy in ["none", "fsync", "batch", "syncfs", "writeback", "parallel"] {
        for when in 1..=renames {
            let root = fs.subdir(&format!("{strategy}-rename-{when}"));
            install_old(&root);
            let r = upgrade_with_injected_signal(
                &root,
                strategy,
                "rename,renameat,renameat2",
                "KILL",
                when,
            );
            assert_ne!(r.code, 0, "{strategy}: killed at rename {when}");
            let rec = recover(&root);
            let is_new =
                assert_old_or_new(&root, &v, &format!("{strategy}, kill at rename {when}"));
            // The first rename is the journal's: from the second on the journal is on disk.
            if when >= 2 && when <= renames {
                assert!(
                    is_new,
                    "{strategy}: killed at rename {when}, after the journal: must roll forward"
                );
                assert!(rec.stdout.contains("rename phase"), "{}", rec.stdout);
            }
        }
        for when in [1, 3, 7, 12] {
            let root = fs.subdir(&format!("{strategy}-write-{when}"));
            install_old(&root);
            let r = upgrade_with_injected_signal(&root, strategy, "write", "KILL", when);
            assert_ne!(r.code, 0);
            let rec = recover(&root);
            assert!(
                !assert_old_or_new(&root, &v, &format!("{strategy}, kill at write {when}")),
                "killed in the write phase: old"
            );
            assert!(
                rec.stdout.contains("write phase") || rec.stdout.contains("nothing to recover"),
                "{}",
                rec.stdout
            );
        }
    }
}

/// An upgrade of hundreds of files in a dozen directories renames them from several threads
/// (commit.rs); kill -9 among those renames leaves some subset done, and recovery finishes it:
/// entirely new.
#[test]
fn kill_9_among_parallel_renames_then_recovery_finishes_the_upgrade() {
    let fs = scratch("ext4", "defaults");
    let (old, new) = (text_tree(600, 100), text_tree(600, 300));
    let old = write_deb(fs.path(), "text_1.0_all.deb", "data.tar", &old);
    let new = write_deb(fs.path(), "text_2.0_all.deb", "data.tar", &new);
    let expected = files_of(&reference_tree(&new, &fs.path().join("ref-new")));
    // strace counts renames per thread: the journal's is the first of the committing thread,
    // the package's are spread over the pool's.
    for when in [2, 50, 150, 280] {
        let root = fs.subdir(&format!("kill-{when}"));
        let r = unpack(["-q", "-s", "none", old.to_str().unwrap(), root.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        killed_at_rename(&new, &root, "syncfs", when);
        let rec = recover(&root);
        assert!(rec.stdout.contains("rename phase"), "kill at rename {when}: {}", rec.stdout);
        assert!(leftover_temps(&root).is_empty(), "kill at rename {when}: temporary files left");
        assert_same_tree(
            &files_of(&snapshot(&root)),
            &expected,
            &format!("kill at rename {when}, recovered"),
        );
    }
}

/// kill -9 after a random delay, hundreds of times, across strategies; recovery happens in the
/// next unpack itself (not `--recover`), which then installs the package.
#[test]
fn kill_9_at_random_moments_then_the_next_unpack_recovers_first() {
    let fs = scratch("ext4", "defaults");
    let v = versions(&fs);
    let strategies = ["none", "fsync", "batch", "syncfs", "writeback", "parallel"];
    // A small xorshift generator: the delays need variety, not quality; the seed is printed so a
    // failure can be replayed.
    let mut seed: u64 = std::env::var("UNPACK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    println!("seed {seed}");
    let mut outcomes = BTreeMap::new();
    for i in 0..240 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let strategy = strategies[i % strategies.len()];
        let delay = std::time::Duration::from_micros(seed % 40_000);
        let root = fs.subdir(&format!("random-{i}"));
        install_old(&root);
        let mut child = Command::new(unpack_bin())
            .args(["-q", "-s", strategy])
            .arg(fixture("pkg-v2_2.0_all.deb"))
            .arg(&root)
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait().unwrap();
        // What the kill left, as recovery sees it.
        let before = if status.success() { "finished" } else { "killed" };
        let r = unpack([
            "-q",
            "-s",
            strategy,
            fixture("other_1.0_all.deb").to_str().unwrap(),
            root.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let mut tree = files_of(&snapshot(&root));
        tree.retain(|p, _| v.old.contains_key(p) || v.new.contains_key(p));
        assert!(leftover_temps(&root).is_empty(), "iteration {i} ({strategy}, {delay:?})");
        let outcome = if tree == v.new {
            "new"
        } else {
            assert_same_tree(
                &tree,
                &v.old,
                &format!("iteration {i} ({strategy}, {delay:?}): neither old nor new"),
            );
            "old"
        };
        *outcomes.entry((before, outcome)).or_insert(0) += 1;
    }
    println!("{outcomes:?}");
    assert!(outcomes.keys().any(|(b, _)| *b == "killed"), "no kill landed: {outcomes:?}");
}

/// A fresh install killed in the write phase rolls back completely: no file, no directory.
#[test]
fn an_interrupted_fresh_install_rolls_back_to_nothing() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    let r = run(Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "inject=write:signal=KILL:when=20"])
        .arg(unpack_bin())
        .args(["-q", "-s", "fsync"])
        .arg(fixture("many_1.0_all.deb"))
        .arg(&root));
    assert_ne!(r.code, 0);
    assert!(!snapshot(&root).is_empty(), "the kill came after some directories were made");
    let rec = recover(&root);
    assert!(rec.stdout.contains("write phase"), "{}", rec.stdout);
    assert_eq!(
        paths_of(&snapshot(&root)),
        Vec::<PathBuf>::new(),
        "everything the transaction made is gone"
    );
}

/// What a rename cannot replace is cleared just before it: an empty directory where the package
/// has a file, a symlink that leads nowhere where it has a directory. kill -9 at every rename:
/// once the journal is on disk (a kill between the clearing and the rename included) recovery
/// finishes the transaction, entirely new; before it, entirely old.
#[test]
fn a_kill_between_clearing_a_name_and_its_rename_is_rolled_forward() {
    let fs = scratch("ext4", "defaults");
    let debs = fs.subdir("debs");
    let mut tar = tar::Builder::new(Vec::new());
    for (path, kind, body) in [
        ("./lock/", tar::EntryType::Directory, &b""[..]),
        ("./lock/note", tar::EntryType::Regular, b"note\n"),
        ("./empty", tar::EntryType::Regular, b"file\n"),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(body.len() as u64);
        header.set_mode(if kind == tar::EntryType::Directory { 0o755 } else { 0o644 });
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        tar.append_data(&mut header, path, body).unwrap();
    }
    let deb = write_deb(&debs, "clears_1.0_all.deb", "data.tar", &tar.into_inner().unwrap());
    let old = |root: &Path| {
        std::os::unix::fs::symlink("nowhere", root.join("lock")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
    };
    // The journal's rename, then the two tops: lock/ and empty.
    for when in 1..=3 {
        let root = fs.subdir(&format!("rename-{when}"));
        old(&root);
        killed_at_rename(&deb, &root, "fsync", when);
        let rec = recover(&root);
        assert!(leftover_temps(&root).is_empty(), "{when}: {:?}", leftover_temps(&root));
        let lock = std::fs::symlink_metadata(root.join("lock")).unwrap();
        if when == 1 {
            assert!(lock.file_type().is_symlink(), "killed before the journal: old");
            assert!(root.join("empty").is_dir());
        } else {
            assert!(rec.stdout.contains("rename phase"), "{when}: {}", rec.stdout);
            assert!(lock.is_dir(), "killed at rename {when}, after the journal: new");
            assert_eq!(std::fs::read(root.join("lock/note")).unwrap(), b"note\n");
            assert_eq!(std::fs::read(root.join("empty")).unwrap(), b"file\n");
        }
    }
}

/// A rename refused after the journal is on disk (here an immutable file, `chattr +i`) cannot
/// be rolled back: the unpack exits with its cause's code and says how the transaction will be
/// finished; once the cause is gone, `unpack --recover` finishes it: entirely new.
#[test]
fn a_refused_rename_leaves_a_committed_transaction_that_recover_finishes() {
    let fs = scratch("ext4", "defaults");
    let v = versions(&fs);
    let root = fs.subdir("root");
    install_old(&root);
    let stuck = root.join("etc/pkg/pkg.conf");
    let chattr = |flag: &str| assert_eq!(run(Command::new("chattr").arg(flag).arg(&stuck)).code, 0);
    chattr("+i");
    let r = unpack([
        "-q",
        "-s",
        "syncfs",
        fixture("pkg-v2_2.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("pkg.conf: rename into place: Operation not permitted"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("committed but not finished")
            && r.stderr.contains(&format!("unpack --recover {}", root.display())),
        "{}",
        r.stderr
    );
    assert!(root.join("var/lib/unpack/txn").exists(), "the journal stays for recovery");
    let again = unpack(["--recover", root.to_str().unwrap()]);
    assert_eq!(again.code, 4, "still immutable: {}", again.stderr);
    chattr("-i");
    let rec = recover(&root);
    assert!(rec.stdout.contains("rename phase"), "{}", rec.stdout);
    assert!(assert_old_or_new(&root, &v, "after chattr -i and recovery"), "finished: entirely new");
}

/// A damaged journal (a crash under `none`, whose journal need not reach the disk, or a
/// corrupted disk) is never replayed, and recovery says so rather than "nothing to recover" or
/// "entirely old": the renames it listed may have been done in part.
#[test]
fn a_damaged_journal_is_discarded_and_the_recovery_says_so() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    install_old(&root);
    // Killed at the 3rd rename: the journal's own, then one of the package's.
    let r = upgrade_with_injected_signal(&root, "fsync", "rename,renameat,renameat2", "KILL", 3);
    assert_ne!(r.code, 0);
    let journal = root.join("var/lib/unpack/txn");
    let bytes = std::fs::read(&journal).unwrap();
    std::fs::write(&journal, &bytes[..bytes.len() / 2]).unwrap();
    let rec = recover(&root);
    assert!(rec.stdout.contains("damaged (") && rec.stdout.contains("discarded"), "{}", rec.stdout);
    assert!(
        rec.stdout.contains("then: an interrupted transaction was in its write phase"),
        "{}",
        rec.stdout
    );
    assert!(!journal.exists(), "the damaged journal is gone");
    assert!(leftover_temps(&root).is_empty(), "{:?}", leftover_temps(&root));
    // Nothing left to recover, and the next unpack says nothing about it.
    assert!(recover(&root).stdout.contains("nothing to recover"));
}

/// A new tree left under its temporary name by a crash that nothing recorded (`none` promises
/// nothing, its intent file need not reach the disk) is the engine's own: the next unpack that
/// starts the same tree removes it, and its files never reach the final tree.
#[test]
fn a_leftover_new_tree_without_an_intent_is_replaced() {
    let fs = scratch("ext4", "defaults");
    let deb = fixture("many_1.0_all.deb");
    let expected = reference_tree(&deb, &fs.path().join("reference"));
    let root = fs.subdir("root");
    let tops: Vec<&PathBuf> = expected.keys().filter(|p| p.components().count() == 1).collect();
    assert!(!tops.is_empty());
    for top in &tops {
        let stale = root.join(format!("{}.unpack-new", top.display())).join("stale");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("file"), b"from a crash").unwrap();
    }
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_same_tree(&snapshot(&root), &expected, "after a leftover new tree");
    assert!(leftover_temps(&root).is_empty());
}

/// SIGINT and SIGTERM in the write phase: temporary files removed, exit 130 / 143, root as it
/// was. In the rename phase: the renames are finished and the message says so.
#[test]
fn sigint_and_sigterm_roll_back_the_write_phase_and_let_the_renames_finish() {
    let fs = scratch("ext4", "defaults");
    let v = versions(&fs);
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let root = fs.subdir(&format!("write-{signal}"));
        install_old(&root);
        let before = snapshot(&root);
        let r = upgrade_with_injected_signal(&root, "writeback", "write", signal, 4);
        assert_eq!(r.code, code, "SIG{signal}: {}", r.stderr);
        assert!(
            r.stderr.contains("stopped by signal") && r.stderr.contains("the root is as it was"),
            "{}",
            r.stderr
        );
        assert_same_tree(&snapshot(&root), &before, &format!("SIG{signal} in the write phase"));

        let root = fs.subdir(&format!("rename-{signal}"));
        install_old(&root);
        let r = upgrade_with_injected_signal(
            &root,
            "writeback",
            "rename,renameat,renameat2",
            signal,
            4,
        );
        assert_eq!(r.code, 0, "SIG{signal} in the rename phase: {}", r.stderr);
        assert!(
            r.stderr.contains("during the rename phase; finished the transaction first"),
            "{}",
            r.stderr
        );
        assert_eq!(files_of(&snapshot(&root)), v.new);
    }
}

/// A package that does not fit: exit 4 naming the root, the file and "no space left"; the old
/// files byte for byte as they were; no temporary file left.
#[test]
fn a_full_disk_exits_4_and_keeps_the_old_files() {
    let fs = scratch_sized("ext4", "defaults", 16 << 20);
    let root = fs.subdir("root");
    install_old(&root);
    // Leave about 600 KiB free: less than the one file of about 1 MiB of `big`.
    let st = rustix::fs::statvfs(fs.path()).unwrap();
    let free = st.f_bfree * st.f_frsize; // root may use the reserved blocks too
    let filler = fs.path().join("filler");
    let r =
        run(Command::new("fallocate").arg("-l").arg((free - (600 << 10)).to_string()).arg(&filler));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let before = snapshot(&root);
    let data = common::deb_builder::text_tree_in("big", 1, 1 << 20);
    let big = common::deb_builder::write_deb(fs.dir.path(), "big.deb", "data.tar", &data);
    let r = unpack([
        "-s",
        "fsync",
        fixture("pkg-v2_2.0_all.deb").to_str().unwrap(),
        big.to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(root.to_str().unwrap()) && r.stderr.contains("No space left on device"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("file0000.txt"), "names the file: {}", r.stderr);
    assert_same_tree(&snapshot(&root), &before, "full disk");
    assert!(leftover_temps(&root).is_empty());
}

/// A root the user cannot write: exit 4 before anything is written.
#[test]
fn an_unwritable_root_exits_4_before_writing_anything() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    let nobody = ForNobody::new(&["many_1.0_all.deb"]);
    let r = run(nobody.command("unpack").arg(nobody.path("many_1.0_all.deb")).arg(&root));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("Permission denied") && r.stderr.contains(root.to_str().unwrap()),
        "{}",
        r.stderr
    );
    assert!(snapshot(&root).is_empty());
}

/// Two unpacks into different roots run side by side and both succeed.
#[test]
fn two_unpacks_into_different_roots_run_side_by_side() {
    let fs = scratch("ext4", "defaults");
    let (a, b) = (fs.subdir("a"), fs.subdir("b"));
    let spawn = |root: &Path| {
        Command::new(unpack_bin())
            .args(["-q", "-s", "fsync"])
            .arg(fixture("many_1.0_all.deb"))
            .arg(root)
            .spawn()
            .unwrap()
    };
    let (pa, pb) = (spawn(&a), spawn(&b));
    assert!(pa.wait_with_output().unwrap().status.success());
    assert!(pb.wait_with_output().unwrap().status.success());
    assert_eq!(snapshot(&a), snapshot(&b));
}
