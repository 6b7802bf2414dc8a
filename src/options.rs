//! How to unpack: the [`Options`] of a call and the callbacks an embedder hands it.
//!
//! A leaf: every layer of the engine reads these, so this module imports nothing of the engine
//! but the [`Strategy`] trait. It must never hold behaviour, only the caller's choices.

use crate::durability::Strategy;
use std::path::PathBuf;
use std::sync::Arc;

/// Called now and then with (bytes of package files read, total bytes of package files).
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

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

/// dpkg's `--force-*` options that turn a refusal of database mode into a warning, as they do
/// in dpkg. All off by default, as in dpkg; `unpack` itself never turns one on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Force {
    /// `--force-architecture`: a package of an architecture the root has not enabled.
    pub architecture: bool,
    /// `--force-overwrite-diverted`: a package path that is a diversion's divert-to name.
    pub overwrite_diverted: bool,
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
    pub stop: Option<Arc<StopFn>>,
    /// dpkg's admin directory, inside the root; `None`: `ROOT/var/lib/dpkg` if it has a
    /// `status` file (database mode), else no database (an extraction).
    pub admindir: Option<PathBuf>,
    /// Database mode: run the unpack phase's maintainer scripts (`--no-scripts` turns it off).
    pub scripts: bool,
    /// Where the maintainer scripts' standard output goes.
    pub script_output: ScriptOutput,
    /// Database mode: the refusals dpkg lets a `--force-*` option through.
    pub force: Force,
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
            script_output: ScriptOutput::Inherit,
            force: Force::default(),
        }
    }
}
