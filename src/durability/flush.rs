//! What the per-file strategies share: the directories their barrier must fsync and the fsync
//! of a list of directories. Flushes only.

use crate::error::Result;
use crate::fs::file::{Directory, TempFile};
use crate::fs::syscalls::Syscalls;
use std::path::Path;
use std::sync::Arc;

/// The directories a strategy that flushes file by file fsyncs in its barrier, each once: those
/// holding names that cannot be flushed through a descriptor of their own (symlinks, hard
/// links, devices, FIFOs, directories), and those of a new tree, whose entries the tree's rename
/// reveals all at once. On btrfs an fsync makes only the inode it is given durable, so without
/// these a crash could keep the journal and lose a temporary symlink (the crash test found it).
///
/// Consecutive names mostly share their directory (one record of it, one `Arc`), and such a
/// name is skipped without comparing paths: looking every name of linux-headers up by path
/// took 130 million instructions, 4.5% of a whole `fsync` unpack (`unpack-bench --counts`, then
/// cachegrind by function: `std::path::compare_components`).
pub fn dirs_to_flush(files: &[TempFile]) -> Vec<Directory> {
    let mut seen: std::collections::BTreeMap<Arc<Path>, Directory> =
        std::collections::BTreeMap::new();
    let mut last: Option<&Arc<Path>> = None;
    for f in files.iter().filter(|f| !f.is_regular() || f.in_place) {
        if last.is_some_and(|l| Arc::ptr_eq(l, &f.dir.path)) {
            continue;
        }
        last = Some(&f.dir.path);
        seen.entry(f.dir.path.clone()).or_insert_with(|| f.dir.clone());
    }
    seen.into_values().collect()
}

/// `fsync` of each directory, one after another: how the per-file strategies make their renames
/// durable.
pub(crate) fn fsync_dirs(dirs: &[Directory], calls: &Syscalls) -> Result<()> {
    dirs.iter().try_for_each(|d| d.fsync(calls))
}
