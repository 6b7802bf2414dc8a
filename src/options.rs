//! How to unpack: the [`Options`] of a call and the callbacks an embedder hands it.
//!
//! A leaf: every layer of the engine reads these, so this module imports nothing of the engine
//! but the [`Strategy`] trait. It must never hold behaviour, only the caller's choices.

use crate::durability::Strategy;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Called now and then with (bytes of package files read, total bytes of package files), from
/// the threads that read the packages.
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

/// Where a call is, told to [`Options::phase`] as it moves on: the bytes alone cannot say what
/// a long call is doing once every package is read (a barrier can take seconds on a slow disk).
/// More phases may come, so it is `#[non_exhaustive]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase<'a> {
    /// The write phase reached this package: its files are written under temporary names next
    /// (in database mode, after its prerm and preinst).
    Package(&'a Path),
    /// Every package is written: the strategy's barrier runs, the flushes before the first
    /// rename.
    Barrier,
    /// The journal is on disk: the renames (and the removals of what new versions dropped) run.
    Renames,
}

/// Called on the thread that writes, each time the call enters a [`Phase`]. A `--bootstrap`
/// call goes through the phases once per transaction (the layout, the first stage, the second).
pub type PhaseFn = dyn Fn(Phase<'_>) + Send + Sync;

/// Asked between entries: `Some(signal)` stops the write phase and rolls the transaction back.
/// Once the renames have started it is no longer asked: they are finished first.
pub type StopFn = dyn Fn() -> Option<i32> + Send + Sync;

/// Where maintainer scripts' standard output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ScriptOutput {
    /// The caller's standard output, as dpkg gives it.
    #[default]
    Inherit,
    /// The caller's standard error: for a caller that prints its own results (JSON) on
    /// standard output.
    Stderr,
}

/// How to unpack. Made by [`Options::new`] and changed field by field: new fields come with
/// defaults, so it is `#[non_exhaustive]`.
#[derive(Clone)]
#[non_exhaustive]
pub struct Options {
    pub strategy: Arc<dyn Strategy>,
    /// Wait for another unpack's lock on the root instead of failing with
    /// [`Error::Locked`](crate::error::Error::Locked).
    pub wait: bool,
    pub progress: Option<Arc<ProgressFn>>,
    /// Told each [`Phase`] the call enters, for a progress display that names the package and
    /// the phase.
    pub phase: Option<Arc<PhaseFn>>,
    pub stop: Option<Arc<StopFn>>,
    /// dpkg's admin directory, inside the root; `None`: `ROOT/var/lib/dpkg` if it has a
    /// `status` file (database mode), else no database (an extraction).
    pub admindir: Option<PathBuf>,
    /// Database mode: run the unpack phase's maintainer scripts (`--no-scripts` turns it off).
    pub scripts: bool,
    /// Where the maintainer scripts' standard output goes.
    pub script_output: ScriptOutput,
}

impl Options {
    pub fn new(strategy: Arc<dyn Strategy>) -> Options {
        Options {
            strategy,
            wait: false,
            progress: None,
            phase: None,
            stop: None,
            admindir: None,
            scripts: true,
            script_output: ScriptOutput::Inherit,
        }
    }
}
