//! `batch` (alias `sync`): write everything, one sync(2), rename everything, one more sync(2).
//!
//! Guarantees: old or new at any crash, durable at exit 0. It pays one flush per package instead
//! of one per file, but sync(2) flushes every filesystem of the machine, so it stalls behind
//! unrelated I/O (dpkg 1.15.7.2-1.15.8.5 shipped it and users with busy USB disks saw it).

use super::strategy::{Info, Strategy};
use crate::error::Result;
use crate::fs::file::{Directory, TempFile};
use crate::fs::syscalls::Syscalls;

pub const INFO: Info = Info {
    name: "batch",
    aliases: &["sync"],
    idea: "write all, one sync(2), rename all, one sync(2)",
    guarantee: "old or new at any crash; durable at exit 0; flushes every filesystem",
    anchor: "dpkg 1.15.7.2-1.15.8.5, apk-tools 3",
    build: |_| Ok(std::sync::Arc::new(Batch)),
};

/// One global sync(2) as the barrier and one to make the renames durable.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batch;

impl Strategy for Batch {
    fn name(&self) -> &str {
        INFO.name
    }

    fn barrier_syncs_filesystems(&self) -> bool {
        true
    }

    fn barrier(&self, _files: &[TempFile], _root: &Directory, calls: &Syscalls) -> Result<()> {
        calls.sync();
        Ok(())
    }

    fn after_commit(&self, _dirs: &[Directory], _root: &Directory, calls: &Syscalls) -> Result<()> {
        calls.sync();
        Ok(())
    }
}
