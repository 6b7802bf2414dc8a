//! The background syncs of `syncfs` (src/durability/early_writeback.rs) run from the first
//! file's data to the end of the write phase, whether the transaction commits or rolls back; no other strategy starts them. The
//! engine asks its stop callback between entries, which is where the test looks.

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The tests count this process's threads: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Unpacks `packages` with `strategy` in the test's own process; returns the result and the
/// most syncer threads seen while entries were written.
fn unpack_watching(
    strategy: &str,
    packages: &[&str],
    root: &std::path::Path,
) -> (unpack::Result<unpack::Report>, usize) {
    let seen = Arc::new(AtomicUsize::new(0));
    let mut options = unpack::Options::new(unpack::durability::by_name(strategy, 1).unwrap());
    let watch = seen.clone();
    options.stop = Some(Arc::new(move || {
        watch.fetch_max(threads_named("early-writeback"), Relaxed);
        None
    }));
    let packages: Vec<_> = packages.iter().map(|p| fixture(p)).collect();
    let result = unpack::unpack(&packages, root, &options);
    (result, seen.load(Relaxed))
}

#[test]
fn syncfs_syncs_in_the_background_until_the_barrier_and_no_longer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fs = scratch("ext4", "defaults");
    let (result, during) = unpack_watching("syncfs", &["many_1.0_all.deb"], &fs.subdir("ok"));
    let report = result.unwrap();
    assert_eq!(during, 1, "one syncer while the files were written");
    assert_eq!(threads_left("early-writeback"), 0, "the syncer outlived the transaction");
    assert_eq!(report.syscalls.syncfs, 2, "the barrier's and the commit's syncfs, counted apart");
}

#[test]
fn a_rolled_back_transaction_stops_its_syncer_too() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("failed");
    // The first package is written, the second breaks off in the middle of its data.
    let (result, during) =
        unpack_watching("syncfs", &["many_1.0_all.deb", "truncated-tar.deb"], &root);
    assert!(matches!(result, Err(unpack::Error::BadPackage { .. })), "{result:?}");
    assert_eq!(during, 1, "the transaction had started");
    assert_eq!(
        threads_left("early-writeback"),
        0,
        "the syncer outlived the rolled-back transaction"
    );
    assert!(snapshot(&root).is_empty(), "the root is as it was");
}

#[test]
fn a_transaction_without_file_data_starts_no_syncer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fs = scratch("ext4", "defaults");
    // Directories and a device node: nothing for the kernel to write back but what the
    // barrier's own syncfs writes.
    let (result, during) = unpack_watching("syncfs", &["devices-only.deb"], &fs.subdir("nodes"));
    let report = result.unwrap();
    assert_eq!(during, 0, "a syncer ran without a file's data to write back");
    assert_eq!(report.syscalls.syncfs_early, 0);
    assert_eq!(report.syscalls.syncfs, 2, "the barrier's and the commit's syncfs");
}

#[test]
fn the_other_strategies_write_back_only_at_their_flushes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fs = scratch("ext4", "defaults");
    for strategy in ["none", "fsync", "batch", "writeback", "parallel"] {
        let (result, during) =
            unpack_watching(strategy, &["many_1.0_all.deb"], &fs.subdir(strategy));
        assert_eq!(result.unwrap().syscalls.syncfs_early, 0, "{strategy}");
        assert_eq!(during, 0, "{strategy} started a syncer");
    }
}
