//! `writeback`: today's dpkg (>= 1.15.8.7).
//!
//! After each file, sync_file_range(SYNC_FILE_RANGE_WRITE) starts its writeback without
//! waiting, so the device works while the next files are written. Before the renames, a pass of
//! sync_file_range(SYNC_FILE_RANGE_WAIT_BEFORE) waits for that writeback, then each file is
//! fsync'ed (now cheap: its data is already on the device, the fsync mostly flushes the cache
//! and the metadata), then everything is renamed and each touched directory fsync'ed.
//!
//! Unlike dpkg, which opens every file by name once for the wait and again for the fsync, the
//! barrier opens each file once and keeps both passes: files go in chunks of [`HELD`]
//! descriptors (open the chunk, wait on each, fsync each, close). An open by name is not free:
//! it is a path lookup, and on NFS an ACCESS and a GETATTR round trip to the server, and the
//! second open bought nothing (`unpack-bench --counts` on linux-headers, per entry: openat 2.90
//! -> 1.95, fstat 1.95 -> 1.00, close 2.90 -> 1.95, all system calls 12.9 -> 10.0;
//! docs/performance.md, "Instructions and system calls per entry"). The barrier must never hold
//! a descriptor per file of the package: the engine already holds one per directory, and
//! packages have tens of thousands of files.
//!
//! Guarantees: old or new at any crash, durable at exit 0 (the same as `fsync`), at a fraction
//! of its cost on filesystems that honour the early writeback.

use super::flush::{dirs_to_flush, fsync_dirs};
use super::strategy::{Info, Strategy};
use crate::error::{Error, Result};
use crate::fs::file::{Directory, TempFile};
use crate::fs::syscalls::{RangeSync, Syscalls};
use std::fs::File;
use std::path::Path;

pub const INFO: Info = Info {
    name: "writeback",
    aliases: &[],
    idea: "sync_file_range(WRITE) per file; WAIT_BEFORE pass; fsync each; rename",
    guarantee: "old or new at any crash; durable at exit 0; writeback overlaps the writing",
    anchor: "dpkg >= 1.15.8.7 (today's dpkg)",
    build: |_| Ok(std::sync::Arc::new(Writeback)),
};

/// How many written files the barrier holds open at once: enough that the wait pass of a chunk
/// still covers many files' writeback before its first fsync, few enough to stay far below the
/// smallest usual limit on open files (1,024) beside the directories the engine holds.
pub const HELD: usize = 256;

/// dpkg's sync_file_range writeback followed by per-file fsync.
#[derive(Debug, Clone, Copy, Default)]
pub struct Writeback;

impl Strategy for Writeback {
    fn name(&self) -> &str {
        INFO.name
    }

    fn after_file(&self, file: &File, path: &Path, calls: &Syscalls) -> Result<()> {
        calls
            .sync_file_range(file, RangeSync::StartWrite)
            .map_err(|e| Error::root(path, "sync_file_range", e))
    }

    fn barrier(&self, files: &[TempFile], _root: &Directory, calls: &Syscalls) -> Result<()> {
        let regular: Vec<&TempFile> = files.iter().filter(|f| f.is_regular()).collect();
        for chunk in regular.chunks(HELD) {
            let opened = chunk
                .iter()
                .map(|f| Ok((*f, f.open()?)))
                .collect::<Result<Vec<(&TempFile, File)>>>()?;
            for (f, file) in &opened {
                calls
                    .sync_file_range(file, RangeSync::WaitBefore)
                    .map_err(|e| Error::root(f.path(), "sync_file_range", e))?;
            }
            for (f, file) in &opened {
                calls.fsync(file).map_err(|e| Error::root(f.path(), "fsync", e))?;
            }
        }
        fsync_dirs(&dirs_to_flush(files), calls)
    }

    fn after_commit(&self, dirs: &[Directory], _root: &Directory, calls: &Syscalls) -> Result<()> {
        fsync_dirs(dirs, calls)
    }
}
