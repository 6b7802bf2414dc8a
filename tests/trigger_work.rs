//! The work of recording triggers is linear in a call's paths and interests (issue 26): a
//! package of N file-trigger interests and N paths was matched one by one, N squared (16,000
//! of each: 11.6 s of CPU, holding dpkg's lock). The matcher's lookups are counted by the
//! engine itself (`unpack::dpkg::format::triggers::LOOKUPS`, the `fuzzing` feature) around an
//! unpack made in this process, at 4,000 and at 16,000: four times the input must cost about
//! four times the lookups, never sixteen. Counts, never times.

mod common;

use common::dpkg::Pkg;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use unpack::dpkg::format::triggers::LOOKUPS;

/// A package of `n` directories under /usr/share/tw, each with a file, and an interest in
/// each directory: its own interests, matched against its own paths.
fn package(dir: &Path, n: usize) -> std::path::PathBuf {
    let mut pkg = Pkg::new(&format!("trigger-work-{n}"), "1.0", "all");
    let mut triggers = String::new();
    for i in 0..n {
        pkg = pkg.file(&format!("/usr/share/tw/d{i}/f"), b"x", 0o644);
        triggers.push_str(&format!("interest /usr/share/tw/d{i}\n"));
    }
    pkg.member("triggers", triggers.as_bytes()).build(dir)
}

/// A scratch directory in memory: the test makes and unpacks tens of thousands of files,
/// whose disk writes would only slow it down.
fn in_memory() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("unpack-trigger-work").tempdir_in("/dev/shm").unwrap()
}

/// The matcher's lookups while `deb` is unpacked into a new root with an empty dpkg database.
fn lookups(deb: &Path) -> u64 {
    let root = in_memory();
    for dir in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    std::fs::write(root.path().join("var/lib/dpkg/status"), "").unwrap();
    let strategy = unpack::durability::by_name("none", 1).unwrap();
    let before = LOOKUPS.load(Relaxed);
    unpack::unpack(&[deb.to_path_buf()], root.path(), &unpack::Options::new(strategy)).unwrap();
    let file = std::fs::read_to_string(root.path().join("var/lib/dpkg/triggers/File")).unwrap();
    assert!(file.lines().count() >= 4000, "the interests were recorded");
    LOOKUPS.load(Relaxed) - before
}

#[test]
fn matching_trigger_interests_is_linear_in_paths_and_interests() {
    let debs = in_memory();
    let (small, large) = (package(debs.path(), 4000), package(debs.path(), 16000));
    let (work_small, work_large) = (lookups(&small), lookups(&large));
    assert!(work_small >= 4000, "every path is looked up: {work_small}");
    let growth = work_large as f64 / work_small as f64;
    assert!(
        (3.5..5.0).contains(&growth),
        "4x the paths and interests took {growth:.1}x the lookups ({work_small} -> {work_large}): not linear"
    );
}
