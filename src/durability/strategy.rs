//! The [`Strategy`] trait and the [`Info`] each built-in strategy states about itself: the leaf
//! every strategy file and the engine build on. It must never name a strategy.

use crate::error::Result;
use crate::fs::file::{Directory, TempFile};
use crate::fs::syscalls::Syscalls;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// A durability strategy. Implement it to try an idea of your own; the engine calls the hooks
/// in order, from one thread, and reports how long each phase took.
pub trait Strategy: Send + Sync {
    /// The name shown in reports.
    fn name(&self) -> &str;

    /// Whether exit 0 promises durability. The engine's own bookkeeping (the transaction
    /// journal) is flushed only for durable strategies.
    fn is_durable(&self) -> bool {
        true
    }

    /// Whether the engine should sync the root's filesystem in the background while it writes
    /// (`early_writeback.rs`), so that the barrier finds most data already written. For
    /// strategies that flush everything at the barrier; it never replaces that flush.
    fn writes_back_early(&self) -> bool {
        false
    }

    /// Called after each regular file's data and metadata are written, before it is closed.
    fn after_file(&self, _file: &File, _path: &Path, _calls: &Syscalls) -> Result<()> {
        Ok(())
    }

    /// Called once, when every file of the transaction is written and before any rename.
    /// `files` are all the names the transaction wrote, in the order it wrote them; only the
    /// regular ones ([`TempFile::is_regular`]) hold data to flush. A strategy that flushes
    /// file by file also fsyncs [`dirs_to_flush`](super::dirs_to_flush): a journal on disk promises recovery that
    /// everything a rename will reveal is there.
    fn barrier(&self, _files: &[TempFile], _root: &Directory, _calls: &Syscalls) -> Result<()> {
        Ok(())
    }

    /// Whether [`barrier`](Strategy::barrier) makes durable everything written before it on
    /// each filesystem that holds one of its `files` (the root's when there are none), as
    /// syncfs(2) and sync(2) do. The engine writes its journal before the barrier, so such a
    /// barrier flushes the journal too, where the state directory shares one of those
    /// filesystems: one fsync less per transaction. A strategy that says so wrongly loses the
    /// journal at a crash, so the default is no.
    fn barrier_syncs_filesystems(&self) -> bool {
        false
    }

    /// Called once after every rename, with each directory that gained, lost or changed an
    /// entry (or its own metadata): making these durable makes the renames durable.
    fn after_commit(
        &self,
        _dirs: &[Directory],
        _root: &Directory,
        _calls: &Syscalls,
    ) -> Result<()> {
        Ok(())
    }
}

/// What `unpack --list-strategies` prints for each built-in strategy.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// What it does, in one line.
    pub idea: &'static str,
    /// What it guarantees at a crash and at exit 0.
    pub guarantee: &'static str,
    /// Who does this in the field.
    pub anchor: &'static str,
    /// Makes the strategy: each strategy's file carries its own, so no name can fall through
    /// to another's. The argument sizes a pool (`parallel`'s jobs); the others ignore it.
    pub build: fn(usize) -> Result<Arc<dyn Strategy>>,
}
