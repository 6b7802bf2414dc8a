//! One call of the engine, from lock to report: [`unpack`] and [`recover_root`], and the
//! [`Call`] the bootstrap's stages share.
//!
//! A call opens and locks the root (and dpkg's database in database mode), finishes or rolls
//! back whatever transaction a crash left, runs its own transactions one after another, and
//! reports. This module sequences; it must never write a name itself: every change to the root
//! goes through a [`Transaction`] and its commit.

use crate::dpkg::configure_guard::{self, Finished};
use crate::dpkg::database::{Database, Locked};
use crate::dpkg_log::InRoot;
use crate::error::{Error, Result};
use crate::events::{Event, EventFn};
use crate::fs::mountinfo;
use crate::fs::root::{Lock, Root};
use crate::fs::syscalls::Syscalls;
use crate::options::Options;
use crate::report::{self, PackageReport, Phases, Report};
use crate::txn::commit::commit;
use crate::txn::recover::{discard, recover, Recovery};
use crate::txn::transaction::Transaction;
use crate::txn::write_phase::{write_phase, Plain, Stage};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What [`recover_root`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// To the engine's interrupted transaction.
    pub transaction: Recovery,
    /// To the conffiles a configure of the real dpkg had moved into place when a crash came
    /// (in database mode, run by `unpack-dpkg`: its configure guard).
    pub conffiles: Finished,
}

impl Recovered {
    /// One sentence for people.
    pub fn describe(&self, root: &Path) -> String {
        match self.conffiles.describe() {
            Some(conffiles) => format!("{}; {conffiles}", self.transaction.describe(root)),
            None => self.transaction.describe(root),
        }
    }
}

/// Finishes or rolls back a transaction that was interrupted in `root` (see [`Recovery`]), and
/// in database mode redoes the conffile moves a configure of the real dpkg recorded and a crash
/// lost (the configure guard's recovery), under the root's lock and dpkg's. [`unpack`] does
/// the same before its own work.
pub fn recover_root(root: &Path, options: &Options) -> Result<Recovered> {
    raise_fd_limit();
    let mut root_handle = Root::open(root)?;
    let _lock = root_handle.lock(options.wait)?;
    let dpkg = Locked::find(&mut root_handle, options.admindir.as_deref(), options.wait)?;
    recover_all(&mut root_handle, dpkg.as_ref(), options)
}

/// The engine's recovery, then (in database mode, `dpkg` locked) the configure guard's.
fn recover_all(root: &mut Root, dpkg: Option<&Locked>, options: &Options) -> Result<Recovered> {
    let transaction = recover(root, options.strategy.as_ref(), &Syscalls::default())?;
    let conffiles = match dpkg {
        Some(locked) => configure_guard::finish_lost(root, locked)?,
        None => Finished::default(),
    };
    Ok(Recovered { transaction, conffiles })
}

/// Drops a transaction that a crash interrupted in `root` and whose renames recovery refuses to
/// finish because the root changed since ([`Error::Changed`](crate::error::Error::Changed)):
/// its temporary files not renamed yet are removed, what it renamed stays, and in database mode
/// its packages are recorded `reinstreq half-installed` in dpkg's database, for dpkg --audit to
/// name and a reinstall to repair. Under the root's lock and dpkg's.
pub fn discard_root(root: &Path, options: &Options) -> Result<Recovery> {
    raise_fd_limit();
    let mut root_handle = Root::open(root)?;
    let _lock = root_handle.lock(options.wait)?;
    let dpkg = Locked::find(&mut root_handle, options.admindir.as_deref(), options.wait)?;
    let calls = Syscalls::default();
    let recovery = discard(&mut root_handle, options.strategy.as_ref(), &calls)?;
    if let (Recovery::Discarded { packages, .. }, Some(dpkg)) = (&recovery, dpkg) {
        let mut database = dpkg.read(&mut root_handle)?;
        database.note_interrupted(packages, options.strategy.is_durable(), &calls)?;
    }
    Ok(recovery)
}

/// Unpacks `packages` into `root` as one transaction: every file of every package is written
/// under a temporary name, then the strategy's barrier runs, then all are renamed into place.
/// On an error before the renames the root is left as it was (the engine's state directory
/// `var/lib/unpack/` aside).
pub fn unpack(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Report> {
    let mut call = Call::open(packages, root, options)?;
    let mut database = call.read_database()?;
    call.transact(packages, database.as_mut(), &mut Plain)
}

/// Unpacks `packages` into `root` one after another, each a transaction of its own, as dpkg
/// unpacks the archives of one call: each package sees the ones before it on disk and in the
/// database (its maintainer scripts, its Replaces), a failing package fails alone (its own
/// transaction rolled back, the packages before it staying unpacked), and `each` is told each
/// package's outcome in order, and may stop the call (dpkg's `--abort-after`). The root's
/// lock and dpkg's are held throughout. An error that leaves the root needing recovery (a
/// commit cut short) ends the call, as does one before the first package (the lock, the
/// root, the database).
pub fn unpack_each(
    packages: &[PathBuf],
    root: &Path,
    options: &Options,
    each: &mut dyn FnMut(&Path, Result<Report>) -> std::ops::ControlFlow<()>,
) -> Result<()> {
    let mut call = Call::open(packages, root, options)?;
    let mut database = call.read_database()?;
    for (i, package) in packages.iter().enumerate() {
        if i > 0 {
            if let Some(db) = database.as_mut() {
                db.refresh(&mut call.root)?;
            }
            call.started = Instant::now();
        }
        let result = call.transact(std::slice::from_ref(package), database.as_mut(), &mut Plain);
        if let Err(e @ Error::Unfinished { .. }) = result {
            return Err(e);
        }
        if each(package, result).is_break() {
            break;
        }
    }
    Ok(())
}

/// One call's hold on its root, from before recovery to the end: the root's lock and, in
/// database mode, dpkg's locks; and the flush calls counted across the call's transactions.
pub(crate) struct Call<'o> {
    options: &'o Options,
    started: Instant,
    /// The root as the caller named it.
    path: PathBuf,
    pub(crate) root: Root,
    _lock: Lock,
    /// dpkg's database, found and locked, until read.
    dpkg: Option<Locked>,
    /// What recovery of an earlier transaction did, for the report.
    recovered: Option<String>,
    calls: Syscalls,
    /// Where the events of database mode go: the caller's callback and the root's dpkg.log.
    events: Arc<EventFn>,
}

impl<'o> Call<'o> {
    /// Opens and locks the root (and dpkg's database, if it has one), and recovers an
    /// interrupted transaction.
    pub(crate) fn open(packages: &[PathBuf], root: &Path, options: &'o Options) -> Result<Self> {
        let started = Instant::now();
        if packages.is_empty() {
            return Err(Error::Usage("no package given".into()));
        }
        refuse_unsupported(options)?;
        raise_fd_limit();
        let mut root_handle = Root::open(root)?;
        let lock = root_handle.lock(options.wait)?;
        let dpkg = Locked::find(&mut root_handle, options.admindir.as_deref(), options.wait)?;
        let recovered = recover_all(&mut root_handle, dpkg.as_ref(), options)?;
        let recovered = match (&recovered.transaction, recovered.conffiles.describe()) {
            (Recovery::Clean, None) => None,
            _ => Some(recovered.describe(root)),
        };
        let log = match (&dpkg, &options.log) {
            (Some(_), Some(rel)) => InRoot::find(&mut root_handle, rel),
            _ => None,
        };
        Ok(Call {
            options,
            started,
            path: root.to_path_buf(),
            root: root_handle,
            _lock: lock,
            dpkg,
            recovered,
            calls: Syscalls::default(),
            events: route(options.events.clone(), log),
        })
    }

    /// dpkg's database of the root, read once (`None`: no database, an extraction).
    pub(crate) fn read_database(&mut self) -> Result<Option<Database>> {
        self.dpkg.take().map(|d| d.read(&mut self.root)).transpose()
    }

    /// dpkg's database, found, locked and read again: one that an earlier transaction of this
    /// call made.
    pub(crate) fn find_database(&mut self) -> Result<Option<Database>> {
        Locked::find(&mut self.root, None, self.options.wait)?
            .map(|locked| locked.read(&mut self.root))
            .transpose()
    }

    /// A new transaction on the root with the call's strategy and counters; `stoppable`: it
    /// asks the caller's stop callback between entries.
    pub(crate) fn transaction(&mut self, stoppable: bool) -> Result<Transaction<'_>> {
        let state = self.root.state_dir()?;
        let stop = if stoppable { self.options.stop.as_deref() } else { None };
        let mut tx = Transaction::new(
            &mut self.root,
            state,
            self.options.strategy.as_ref(),
            &self.calls,
            stop,
        )?;
        tx.set_phase(self.options.phase.as_deref());
        Ok(tx)
    }

    /// The transaction over `packages`, in database mode with `database`, and its report.
    pub(crate) fn transact(
        &mut self,
        packages: &[PathBuf],
        mut database: Option<&mut Database>,
        stage: &mut dyn Stage,
    ) -> Result<Report> {
        let (options, started) = (self.options, self.started);
        if let Some(db) = database.as_mut() {
            db.set_events(Some(self.events.clone()));
            db.set_choices(&options.force, options.auto_deconfigure);
            db.set_filters(&options.path_filters);
            if options.scripts {
                db.run_scripts(&self.path, options.script_output);
            }
        }
        let mut reports = Vec::with_capacity(packages.len());
        let mut tx = self.transaction(true)?;
        if let Some(db) = &database {
            tx.set_admin(db.admin_rel());
        }
        // Until the journal is on disk a failure rolls the transaction back, and the maintainer
        // scripts that ran are unwound (database mode).
        let prepared =
            write_phase(&mut tx, packages, options, &mut reports, database.as_deref_mut(), stage);
        let names: Vec<String> =
            reports.iter().map(|r: &PackageReport| format!("{} {}", r.name, r.version)).collect();
        let extract_s = started.elapsed().as_secs_f64();
        let committed = prepared.and_then(|()| commit(&mut tx, &names));
        drop(tx);
        let times = match committed {
            Ok(times) => times,
            Err(e) => {
                let committed = matches!(e, Error::Unfinished { .. });
                if let (Some(db), false) = (database.as_mut(), committed) {
                    db.emit_failed(&e);
                    db.unwind_all();
                    self.record(db, |db, tx| db.failure_state(tx))?;
                    db.emit_unwound();
                }
                return Err(e);
            }
        };
        if let Some(db) = database.as_mut() {
            db.emit_committed();
            if let Some((failed, e)) = db.after_commit()? {
                self.record(db, |db, tx| db.postrm_failure_state(&failed, tx).map(|()| true))?;
                db.emit_postrm_failed(&failed, &e);
                return Err(e);
            }
        }
        let phases = Phases {
            extract_s,
            barrier_s: times.barrier_s,
            rename_s: times.rename_s,
            dirsync_s: times.dirsync_s,
            total_s: self.started.elapsed().as_secs_f64(),
        };
        let root = self.path.as_path();
        Ok(Report {
            packages: reports,
            strategy: options.strategy.name().to_string(),
            root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
            filesystem: mountinfo::for_path(root).ok(),
            phases,
            syscalls: self.calls.counts(),
            flush_latency: self.calls.latencies(),
            peak_rss_bytes: report::peak_rss_bytes(),
            recovered: self.recovered.take(),
            first_stage: None,
        })
    }

    /// After a maintainer script's failure: dpkg's database as `write` makes it (true:
    /// something to write), in a transaction of its own.
    fn record(
        &mut self,
        db: &Database,
        write: impl FnOnce(&Database, &mut Transaction<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut tx = self.transaction(false)?;
        tx.set_admin(db.admin_rel());
        if write(db, &mut tx)? {
            commit(&mut tx, &["dpkg's database after a maintainer script failed".to_string()])?;
        }
        Ok(())
    }
}

/// The `--force-*` options the engine cannot honour, refused before anything is done.
fn refuse_unsupported(options: &Options) -> Result<()> {
    if options.force.overwrite_dir {
        return Err(Error::Usage("dpkg's --force-overwrite-dir is not supported: the engine never replaces a directory another package owns with a file".into()));
    }
    if options.force.bad_version {
        return Err(Error::Usage("dpkg's --force-bad-version is not supported: the engine reads versions by dpkg's strict syntax only".into()));
    }
    Ok(())
}

/// The events of a call: to the root's dpkg.log (`log`), then to the caller's callback.
fn route(caller: Option<Arc<EventFn>>, log: Option<InRoot>) -> Arc<EventFn> {
    Arc::new(move |event: &Event| {
        if let Some(log) = &log {
            log.write(event);
        }
        if let Some(caller) = &caller {
            caller(event);
        }
    })
}

/// The directory cache holds a descriptor per directory of the package (linux-headers has
/// thousands), and so does recovery's (a journal names every directory a transaction renamed
/// into), so the soft limit on open files is raised to the hard one, as servers do.
fn raise_fd_limit() {
    if let (Some(_), Some(hard)) = {
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        (l.current, l.maximum)
    } {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit { current: Some(hard), maximum: Some(hard) },
        );
    }
}
