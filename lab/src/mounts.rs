//! The mount-table questions the lab's clean-up asks, answered from the engine's reading of
//! `/proc/self/mountinfo` ([`unpack::fs::mountinfo::all`]).

use std::io;
use std::path::{Path, PathBuf};
use unpack::fs::mountinfo::{self, MountInfo};

/// Every mount of the block device `major:minor`, in the order they were made.
pub fn of_device(major: u32, minor: u32) -> io::Result<Vec<MountInfo>> {
    Ok(mountinfo::all()?.into_iter().filter(|m| m.device == (major, minor)).collect())
}

/// True when `path` (as the kernel spells it: absolute, canonical) is a mount point.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    Ok(mountinfo::all()?.iter().any(|m| m.mount_point == path))
}

/// Every mount point at or below `dir` (as the kernel spells it: absolute, canonical), so that a
/// caller about to remove a directory tree can make sure it never reaches into a mount.
pub fn under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(mountinfo::all()?
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|m| m.starts_with(dir))
        .collect())
}
