//! unpack: a package-unpack durability engine, the core of a dpkg-style installer.
//!
//! [`unpack()`] reads Debian packages and writes their files into a root directory through
//! temporary names and renames, so that at any instant of a power cut each path holds its old
//! or its new content, and so that when it returns `Ok` (for every strategy but `none`)
//! everything is on stable storage. How the safety is paid for is a [`Strategy`]: one of
//! [`durability::ALL`], chosen by name, or one of your own (see [`durability`]).
//!
//! Unpacking a package into a root with the `syncfs` strategy, as `unpack -s syncfs PKG ROOT`
//! does:
//!
//! ```
//! # use std::path::Path;
//! # let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
//! let packages = [fixtures.join("comp-gz_1.0_all.deb")];
//! let root = tempfile::tempdir()?; // any existing directory
//!
//! let strategy = unpack::durability::by_name("syncfs", 1)?;
//! let report = unpack::unpack(&packages, root.path(), &unpack::Options::new(strategy))?;
//!
//! assert!(root.path().join("usr/bin/comp-tool").is_file());
//! assert_eq!(report.syscalls.syncfs, 2); // one before the renames, one after
//! print!("{}", report.human());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The API: what an embedder calls and what it gets back.
pub mod control;
pub mod deb;
pub mod durability;
pub mod entry;
pub mod error;
pub mod interrupt;
pub mod mountinfo;
pub mod report;
pub mod syscalls;

// The `unpack` program's command line, shared with the lab's three programs so that the four
// behave alike (`--completions`, writes to a closed pipe). Public only because a binary target
// reaches nothing else of its library; it is not API and hidden from the documentation.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

// The transaction and what only it uses. The journal's format, the resolver and the xz block
// decoder are reached by fuzz/ and this package's tests through the `fuzzing` feature, hidden
// from the documentation: internals, not API.
mod bootstrap;
mod commit;
mod early_writeback;
mod extract;
mod names;
mod pipeline;
mod recover;
mod tree;
mod write_phase;
// dpkg's database: its formats (fuzzed, through the `fuzzing` feature) and database mode.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod dpkg;
#[cfg(not(feature = "fuzzing"))]
mod dpkg;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod journal;
#[cfg(not(feature = "fuzzing"))]
mod journal;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod root;
#[cfg(not(feature = "fuzzing"))]
mod root;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod xz_blocks;
#[cfg(not(feature = "fuzzing"))]
mod xz_blocks;

pub use durability::Strategy;
pub use error::{Error, ExitCode, Result};
pub use names::{INTENT, JOURNAL, STATE_DIR};
pub use recover::Recovery;
pub use report::Report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use write_phase::{write_phase, Stage};

/// Called now and then with (bytes of package files read, total bytes of package files).
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

/// Asked between entries: `Some(signal)` stops the write phase and rolls the transaction back.
/// Once the renames have started it is no longer asked: they are finished first.
pub type StopFn = dyn Fn() -> Option<i32> + Send + Sync;

/// How to unpack.
#[derive(Clone)]
pub struct Options {
    pub strategy: Arc<dyn Strategy>,
    /// Wait for another unpack's lock on the root instead of failing with [`Error::Locked`].
    pub wait: bool,
    pub progress: Option<Arc<ProgressFn>>,
    pub stop: Option<Arc<StopFn>>,
    /// dpkg's admin directory, inside the root; `None`: `ROOT/var/lib/dpkg` if it has a
    /// `status` file (database mode), else no database (an extraction).
    pub admindir: Option<PathBuf>,
    /// Database mode: run the unpack phase's maintainer scripts (`--no-scripts` turns it off).
    pub scripts: bool,
    /// Maintainer scripts write their standard output to standard error (the caller prints
    /// JSON on standard output).
    pub scripts_stdout_to_stderr: bool,
}

impl Options {
    pub fn new(strategy: Arc<dyn Strategy>) -> Options {
        Options {
            strategy,
            wait: false,
            progress: None,
            stop: None,
            admindir: None,
            scripts: true,
            scripts_stdout_to_stderr: false,
        }
    }
}

/// Finishes or rolls back a transaction that was interrupted in `root` (see [`Recovery`]), under
/// the root's lock. [`unpack`] does the same before its own work.
pub fn recover_root(root: &Path, options: &Options) -> Result<Recovery> {
    raise_fd_limit();
    let mut root_handle = root::Root::open(root)?;
    let _lock = root_handle.lock(options.wait)?;
    let _dpkg =
        dpkg::install::Locked::find(&mut root_handle, options.admindir.as_deref(), options.wait)?;
    recover::recover(&mut root_handle, options.strategy.as_ref(), &syscalls::Syscalls::default())
}

/// Unpacks `packages` into `root` as one transaction: every file of every package is written
/// under a temporary name, then the strategy's barrier runs, then all are renamed into place.
/// On an error before the renames the root is left as it was (the engine's state directory
/// `var/lib/unpack/` aside).
pub fn unpack(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Report> {
    let mut call = Call::open(packages, root, options)?;
    let database = call.dpkg.take().map(|d| d.read(&mut call.root)).transpose()?;
    call.transact(packages, options, database, Stage::Plain)
}

/// A base system in one call (`unpack --bootstrap`), into a root whose dpkg database is empty
/// or absent: a first transaction writes the merged-/usr layout, an empty database and the
/// files of the Essential packages and their closure, with no script; a second unpacks every
/// package in database mode, maintainer scripts included (see the `bootstrap` module). The
/// report is the second's, with the first stage's packages and time, and both stages' flushes.
pub fn bootstrap(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Report> {
    let mut call = Call::open(packages, root, options)?;
    let plan = bootstrap::plan(packages)?;
    let existing = call.dpkg.take().map(|d| d.read(&mut call.root)).transpose()?;
    if let Some(db) = existing.as_ref().filter(|db| db.package_count() > 0) {
        return Err(Error::Usage(format!(
            "--bootstrap: the database in {} lists {} installed packages: the bootstrap makes a new system; unpack into this one without --bootstrap",
            error::escape(&call.root.display(db.admin_rel())),
            db.package_count()
        )));
    }
    let admin = existing.as_ref().map_or_else(
        || PathBuf::from(dpkg::admin::DEFAULT_ADMINDIR),
        |db| db.admin_rel().to_path_buf(),
    );
    let first_started = Instant::now();
    // The layout is on disk before the first stage's packages meet it: their `./bin/` is then
    // a directory entry over a symlink to one, which keeps the symlink (as dpkg and tar's
    // --keep-directory-symlink do), where within one transaction it would be a second entry
    // for one path.
    let state = call.root.state_dir()?;
    let mut tx = extract::Transaction::new(
        &mut call.root,
        state,
        options.strategy.as_ref(),
        &call.calls,
        options.stop.as_deref(),
    )?;
    if bootstrap::add_layout(&mut tx, &plan, &admin, existing.is_some())? {
        commit::commit(&mut tx, &["the bootstrap's merged-/usr layout".to_string()])?;
    }
    drop(tx);
    let state = call.root.state_dir()?;
    let mut tx = extract::Transaction::new(
        &mut call.root,
        state,
        options.strategy.as_ref(),
        &call.calls,
        options.stop.as_deref(),
    )?;
    tx.set_admin(&admin);
    let mut first = bootstrap::FirstStage::new(&plan);
    write_phase(&mut tx, &plan.first, options, &mut Vec::new(), None, Stage::First(&mut first))?;
    commit::commit(&mut tx, &["the bootstrap's first stage".to_string()])?;
    drop(tx);
    first.stamp(&mut call.root);
    let seconds = first_started.elapsed().as_secs_f64();
    let database = match existing {
        Some(db) => db,
        None => match dpkg::install::Locked::find(&mut call.root, None, options.wait)? {
            Some(locked) => locked.read(&mut call.root)?,
            None => {
                return Err(Error::Usage(
                    "internal: the bootstrap's first stage made no database".into(),
                ))
            }
        },
    };
    let mut report = call.transact(packages, options, Some(database), Stage::Second(&mut first))?;
    report.first_stage =
        Some(report::FirstStage { packages: plan.first_names, seconds, adopted: first.adopted });
    Ok(report)
}

/// One call's hold on its root, from before recovery to the end: the root's lock and, in
/// database mode, dpkg's locks; and the flush calls counted across the call's transactions.
struct Call {
    started: Instant,
    /// The root as the caller named it.
    path: PathBuf,
    root: root::Root,
    _lock: root::Lock,
    /// dpkg's database, found and locked, until read.
    dpkg: Option<dpkg::install::Locked>,
    /// What recovery of an earlier transaction did, for the report.
    recovered: Option<String>,
    calls: syscalls::Syscalls,
}

impl Call {
    /// Opens and locks the root (and dpkg's database, if it has one), and recovers an
    /// interrupted transaction.
    fn open(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Call> {
        let started = Instant::now();
        if packages.is_empty() {
            return Err(Error::Usage("no package given".into()));
        }
        raise_fd_limit();
        let mut root_handle = root::Root::open(root)?;
        let lock = root_handle.lock(options.wait)?;
        let dpkg = dpkg::install::Locked::find(
            &mut root_handle,
            options.admindir.as_deref(),
            options.wait,
        )?;
        let recovered = match recover::recover(
            &mut root_handle,
            options.strategy.as_ref(),
            &syscalls::Syscalls::default(),
        )? {
            recover::Recovery::Clean => None,
            r => Some(r.describe(root)),
        };
        Ok(Call {
            started,
            path: root.to_path_buf(),
            root: root_handle,
            _lock: lock,
            dpkg,
            recovered,
            calls: syscalls::Syscalls::default(),
        })
    }

    /// The transaction over `packages`, in database mode with `database`, and its report.
    fn transact(
        mut self,
        packages: &[PathBuf],
        options: &Options,
        mut database: Option<dpkg::install::Database>,
        stage: Stage<'_>,
    ) -> Result<Report> {
        let (started, calls, root) = (self.started, &self.calls, self.path.as_path());
        if let Some(db) = database.as_mut().filter(|_| options.scripts) {
            db.run_scripts(root, options.scripts_stdout_to_stderr);
        }
        let mut reports = Vec::with_capacity(packages.len());
        let state = self.root.state_dir()?;
        let mut tx = extract::Transaction::new(
            &mut self.root,
            state,
            options.strategy.as_ref(),
            calls,
            options.stop.as_deref(),
        )?;
        if let Some(db) = &database {
            tx.set_admin(db.admin_rel());
        }
        // Until the journal is on disk a failure rolls the transaction back, and the maintainer
        // scripts that ran are unwound (database mode).
        let prepared =
            write_phase(&mut tx, packages, options, &mut reports, database.as_mut(), stage);
        let names: Vec<String> = reports
            .iter()
            .map(|r: &report::PackageReport| format!("{} {}", r.name, r.version))
            .collect();
        let extract_s = started.elapsed().as_secs_f64();
        let committed = prepared.and_then(|()| commit::commit(&mut tx, &names));
        let times = match committed {
            Ok(times) => times,
            Err(e) => {
                let committed = matches!(e, Error::Unfinished { .. });
                drop(tx);
                if let (Some(db), false) = (database.as_mut(), committed) {
                    db.unwind_all();
                    record(&mut self.root, db, options, calls, |db, tx| db.failure_state(tx))?;
                }
                return Err(e);
            }
        };
        drop(tx);
        if let Some(db) = database.as_mut() {
            if let Some((failed, e)) = db.after_commit()? {
                record(&mut self.root, db, options, calls, |db, tx| {
                    db.postrm_failure_state(&failed, tx).map(|()| true)
                })?;
                return Err(e);
            }
        }
        let phases = report::Phases {
            extract_s,
            barrier_s: times.barrier_s,
            rename_s: times.rename_s,
            dirsync_s: times.dirsync_s,
            total_s: started.elapsed().as_secs_f64(),
        };
        Ok(Report {
            packages: reports,
            strategy: options.strategy.name().to_string(),
            root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
            filesystem: mountinfo::for_path(root).ok(),
            phases,
            syscalls: calls.counts(),
            flush_latency: calls.latencies(),
            peak_rss_bytes: report::peak_rss_bytes(),
            recovered: self.recovered.take(),
            first_stage: None,
        })
    }
}

/// After a maintainer script's failure: dpkg's database as `write` makes it (true: something to
/// write), in a transaction of its own.
fn record(
    root: &mut root::Root,
    db: &dpkg::install::Database,
    options: &Options,
    calls: &syscalls::Syscalls,
    write: impl FnOnce(&dpkg::install::Database, &mut extract::Transaction<'_>) -> Result<bool>,
) -> Result<()> {
    let state = root.state_dir()?;
    let mut tx = extract::Transaction::new(root, state, options.strategy.as_ref(), calls, None)?;
    tx.set_admin(db.admin_rel());
    if write(db, &mut tx)? {
        commit::commit(&mut tx, &["dpkg's database after a maintainer script failed".to_string()])?;
    }
    Ok(())
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
