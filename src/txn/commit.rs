//! The second half of a transaction: directory metadata, barrier, renames, removals, directory
//! durability.
//!
//! Order is the whole point: the metadata of the directories the transaction made (all inside
//! new trees) is set first, so that the strategy's barrier covers it; the barrier runs before
//! the first rename, so no final name can point at data that is not yet where the strategy
//! promised; the strategy's `after_commit` runs last, over every directory whose entries
//! changed since the barrier. Directories that were already there get no metadata at all, as
//! with dpkg: their owner and mode stay the root's, their mtime is what the renames leave.
//!
//! This module never writes file data and never creates anything: it only moves into place what
//! `extract.rs` wrote.

use crate::durability::{Directory, TempFile};
use crate::error::{Error, Result};
use crate::fs::names::{JOURNAL, JOURNAL_NEW};
use crate::fs::syscalls::Syscalls;
use crate::options::Phase;
use crate::txn::journal::{self, Seen};
use crate::txn::transaction::{timestamps, Transaction};
use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Seconds spent in each commit phase.
#[derive(Debug, Default, Clone, Copy)]
pub struct CommitTimes {
    pub barrier_s: f64,
    pub rename_s: f64,
    pub dirsync_s: f64,
}

/// Runs the commit phase of `tx`: the renames, then the removals (database mode: what the new
/// versions dropped), both in the journal. From its first rename on, a failure no longer rolls back: the
/// journal is on disk, and recovery finishes the renames. `packages` name the transaction's
/// packages in the journal.
pub fn commit(tx: &mut Transaction<'_>, packages: &[String]) -> Result<CommitTimes> {
    let mut times = CommitTimes::default();
    let root_dir = tx.root.dir().clone();

    let t = Instant::now();
    tx.enter(Phase::Barrier);
    // Nobody sees a new tree before its rename: its directories get their final metadata now.
    set_dir_meta(tx)?;
    if let Some(early) = tx.early.take() {
        tx.calls.add_syncfs_early(early.stop());
    }
    // Before the barrier, which flushes it too where it syncs the state directory's filesystem.
    let journal = write_journal(tx, packages)?;
    tx.strategy.barrier(&tx.renames, &root_dir, tx.calls)?;
    times.barrier_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    publish_journal(tx, journal)?;
    tx.committing = true;
    tx.enter(Phase::Renames);
    // Directories whose entries changed, by canonical path, to make durable at the end.
    let mut touched: BTreeMap<Arc<Path>, Directory> = BTreeMap::new();
    let mut by_dir: BTreeMap<&Path, Vec<&TempFile>> = BTreeMap::new();
    for r in tx.renames.iter().filter(|r| r.is_renamed()) {
        by_dir.entry(&r.dir.path).or_default().push(r);
        touched.entry(r.dir.path.clone()).or_insert_with(|| r.dir.clone());
    }
    let root_path = tx.root.path().to_path_buf();
    let unfinished = |cause| Error::Unfinished { root: root_path.clone(), cause: Box::new(cause) };
    rename_all(by_dir.into_values().collect(), tx.calls).map_err(unfinished)?;
    for r in &tx.removals {
        crate::fs::tree::remove_dropped(r.dir.fd(), &r.name, r.directory).map_err(|e| {
            unfinished(Error::root(
                r.dir.path().join(&r.name),
                "removing a file the new version dropped",
                e,
            ))
        })?;
        touched.entry(r.dir.path.clone()).or_insert_with(|| r.dir.clone());
    }
    times.rename_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let dirs: Vec<Directory> = touched.into_values().collect();
    tx.strategy.after_commit(&dirs, &root_dir, tx.calls).map_err(unfinished)?;
    remove_journal(tx).map_err(unfinished)?;
    times.dirsync_s = t.elapsed().as_secs_f64();
    Ok(times)
}

/// Sets the archive's owner, mode and mtime on the directories the transaction made, before
/// anyone can see them (they are inside new trees). Deepest first, so that setting a
/// directory's mtime is not undone by a change inside it.
fn set_dir_meta(tx: &Transaction<'_>) -> Result<()> {
    let mut metas: Vec<_> = tx.dir_meta.values().collect();
    metas.sort_by_key(|m| std::cmp::Reverse(m.canon.components().count()));
    for m in &metas {
        let path = m.dir.path();
        if tx.owner_differs(m.uid, m.gid) {
            rustix::fs::fchown(
                m.dir.fd(),
                Some(rustix::fs::Uid::from_raw(m.uid)),
                Some(rustix::fs::Gid::from_raw(m.gid)),
            )
            .map_err(|e| Error::root(path, "chown of directory", e))?;
        }
        let mode = tx.mode_for(m.mode, m.uid, m.gid);
        rustix::fs::fchmod(m.dir.fd(), Mode::from_raw_mode(mode))
            .map_err(|e| Error::root(path, "chmod of directory", e))?;
        rustix::fs::futimens(m.dir.fd(), &timestamps(m.mtime))
            .map_err(|e| Error::root(path, "setting directory mtime", e))?;
    }
    Ok(())
}

/// Writes the journal as `var/lib/unpack/txn.new`, before the barrier; [`publish_journal`]
/// renames it into place after it. Recovery reads only `txn`, so the journal is only ever
/// complete, and once the strategy's barrier has made every file durable.
fn write_journal(tx: &Transaction<'_>, packages: &[String]) -> Result<std::fs::File> {
    let state = &tx.state;
    let path = state.path().join(JOURNAL);
    // Through the state directory's checks, like every state file: nothing is truncated that
    // is not the engine's own regular file with one name.
    let file = crate::fs::root::create_state_file(state, JOURNAL_NEW)?;
    file.set_len(0).map_err(|e| Error::root(&path, "creating the journal", e))?;
    let mut file = std::io::BufWriter::new(file);
    let written = (|| {
        let mut e = journal::Encoder::new(&mut file)?;
        packages.iter().for_each(|p| e.package(p));
        // What each name holds now, for recovery to rename over nothing that changed since.
        let look = |dir: &Directory, name: &OsStr| {
            rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW).ok()
        };
        for r in tx.renames.iter().filter(|r| r.is_renamed()) {
            let canon_dir = r.dir.path.strip_prefix(tx.root.path()).unwrap_or(Path::new(""));
            let temp = r.temp_name();
            let seen = Seen::of(look(&r.dir, &r.name).as_ref());
            let temp_ino = look(&r.dir, &temp).map_or(0, |st| st.st_ino);
            e.rename(canon_dir, &temp, &r.name, r.clears_name, seen, temp_ino);
        }
        for r in &tx.removals {
            let canon_dir = r.dir.path.strip_prefix(tx.root.path()).unwrap_or(Path::new(""));
            e.removal(canon_dir, &r.name, r.directory, Seen::of(look(&r.dir, &r.name).as_ref()));
        }
        e.finish()?;
        file.flush()
    })();
    written.map_err(|e| Error::root(&path, "writing the journal", e))?;
    file.into_inner().map_err(|e| Error::root(&path, "writing the journal", e.into_error()))
}

/// Renames the journal written by [`write_journal`] to `txn` after the barrier: for durable
/// strategies its content flushed first (by the barrier where that synced the state
/// directory's filesystem, else by an fsync here), and the rename flushed, so that the journal
/// is on disk before the first rename.
fn publish_journal(tx: &Transaction<'_>, journal: std::fs::File) -> Result<()> {
    let state = &tx.state;
    let path = state.path().join(JOURNAL);
    let durable = tx.strategy.is_durable();
    if durable && !barrier_flushed_state_dir(tx) {
        tx.calls.fsync(&journal).map_err(|e| Error::root(&path, "fsync of the journal", e))?;
    }
    tx.calls
        .rename(state.fd(), JOURNAL_NEW.as_ref(), JOURNAL.as_ref())
        .map_err(|e| Error::root(&path, "renaming the journal into place", e))?;
    if durable {
        state.fsync(tx.calls)?;
    }
    Ok(())
}

/// Whether the barrier synced the state directory's whole filesystem: the strategy syncs
/// filesystems, and one of the transaction's files (or, with none, the root) is on it.
fn barrier_flushed_state_dir(tx: &Transaction<'_>) -> bool {
    let dev = tx.state.dev();
    tx.strategy.barrier_syncs_filesystems()
        && if tx.renames.is_empty() {
            tx.root.dir().dev() == dev
        } else {
            tx.renames.iter().any(|r| r.dir.dev() == dev)
        }
}

/// Removes the journal and the intent once the renames are durable: the transaction is over.
/// For durable strategies the removal is made durable too (one fsync of the state directory
/// for both names), so that a power cut after exit 0 finds nothing to replay: what it would
/// find otherwise is a journal whose renames are done, harmless only as long as nothing has
/// changed those names since.
fn remove_journal(tx: &mut Transaction<'_>) -> Result<()> {
    match rustix::fs::unlinkat(tx.state.fd(), JOURNAL, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => {
            return Err(Error::root(tx.state.path().join(JOURNAL), "removing the journal", e))
        }
    }
    tx.finish();
    if tx.strategy.is_durable() {
        tx.state.fsync(tx.calls)?;
    }
    Ok(())
}

/// Renames below this count stay on the committing thread: an install renames a handful of new
/// trees, and a thread pool would cost more than it saves.
const PARALLEL_RENAMES: usize = 256;

/// Renames the names of each directory of `by_dir` into place. Once the journal is durable
/// the renames are independent (recovery finishes whichever did not happen, in any subset), so
/// directories are served in parallel, each directory's names by one thread: two renames into
/// one directory would only wait for its lock. On ext4 a rename over an old file also
/// allocates the new file's delayed blocks (auto_da_alloc): an upgrade's renames are half of it.
fn rename_all(by_dir: Vec<Vec<&TempFile>>, calls: &Syscalls) -> Result<()> {
    let rename_dir = |names: &Vec<&TempFile>| names.iter().try_for_each(|r| rename_one(r, calls));
    if by_dir.iter().map(Vec::len).sum::<usize>() < PARALLEL_RENAMES {
        by_dir.iter().try_for_each(rename_dir)
    } else {
        by_dir.par_iter().try_for_each(rename_dir)
    }
}

fn rename_one(r: &TempFile, calls: &Syscalls) -> Result<()> {
    if r.clears_name {
        crate::fs::tree::clear_for_rename(r.dir.fd(), &r.name).map_err(|e| {
            Error::root(r.path(), "removing the empty directory or symlink the package replaces", e)
        })?;
    }
    calls
        .rename(r.dir.fd(), &r.temp_name(), &r.name)
        .map_err(|e| Error::root(r.path(), "rename into place", e))
}
