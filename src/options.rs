//! How to unpack: the [`Options`] of a call and the callbacks an embedder hands it.
//!
//! A leaf: every layer of the engine reads these, so this module imports nothing of the engine
//! but the [`Strategy`] trait and the events' types. It must never hold behaviour, only the caller's choices.

use crate::durability::Strategy;
use crate::events::EventFn;
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
    /// Told each event of a call in database mode (a dpkg front end's status-fd and log).
    pub events: Option<Arc<EventFn>>,
    /// dpkg.log, as a path inside the root (`var/log/dpkg.log`), in database mode: each event's
    /// line is appended to it as dpkg writes them. Resolved inside the root as every name is
    /// (a symlink never leads out of it), and only when its directory exists; `None`: no log.
    pub log: Option<PathBuf>,
    /// dpkg's `--force-*` options, for what the engine checks (database mode).
    pub force: Force,
    /// dpkg's `--auto-deconfigure` (apt passes it): a package the unpack breaks, or one a
    /// conflicting package's removal leaves without a dependency, is deconfigured instead of the
    /// unpack being refused (database mode).
    pub auto_deconfigure: bool,
    /// dpkg's `path-exclude` and `path-include` filters, in the order given (database mode).
    pub path_filters: Vec<PathFilter>,
}

/// The `--force-*` options of dpkg that concern the unpack phase (`dpkg --force-help`), each
/// off unless set, as in dpkg: each turns one of database mode's refusals into dpkg's warning.
/// What each lets through is said where the engine checks it (dependencies and conflicts:
/// `crate::dpkg::depcon`; the root's architectures and divert-to names: `crate::dpkg::admission`;
/// files: `crate::dpkg::install`). `overwrite_dir` and `bad_version` are refused
/// ([`Error::Usage`](crate::error::Error::Usage)): the engine never replaces another package's
/// directory with a file, and reads versions by dpkg's strict syntax only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Force {
    /// An unsatisfied Pre-Depends, or a dependency a conflicting package's removal breaks, is
    /// a warning. The bootstrap sets it, as a first stage's `dpkg --force-depends` does.
    pub depends: bool,
    /// A conflict nothing resolves is a warning.
    pub conflicts: bool,
    /// Breaking an installed package is a warning.
    pub breaks: bool,
    /// A conflicting package that is Essential, Protected, on hold or needing reinstallation
    /// may still be removed.
    pub remove_essential: bool,
    pub remove_protected: bool,
    pub hold: bool,
    pub remove_reinstreq: bool,
    /// A package of an architecture the root has not enabled is unpacked.
    pub architecture: bool,
    /// A package path that is a diversion's divert-to name is written.
    pub overwrite_diverted: bool,
    /// A file another package owns (and the new one does not Replace) is a warning: the new
    /// package's file is written and the path leaves the owner's list, as dpkg does it.
    pub overwrite: bool,
    pub overwrite_dir: bool,
    pub bad_version: bool,
}

impl Force {
    /// The names of dpkg's options these are (`--force-NAME`), in the order of the fields.
    pub const NAMES: [&'static str; 12] = [
        "depends",
        "conflicts",
        "breaks",
        "remove-essential",
        "remove-protected",
        "hold",
        "remove-reinstreq",
        "architecture",
        "overwrite-diverted",
        "overwrite",
        "overwrite-dir",
        "bad-version",
    ];

    /// Turns on dpkg's `--force-NAME`; false when `name` is none of [`Force::NAMES`].
    pub fn set(&mut self, name: &str) -> bool {
        let flag = match name {
            "depends" => &mut self.depends,
            "conflicts" => &mut self.conflicts,
            "breaks" => &mut self.breaks,
            "remove-essential" => &mut self.remove_essential,
            "remove-protected" => &mut self.remove_protected,
            "hold" => &mut self.hold,
            "remove-reinstreq" => &mut self.remove_reinstreq,
            "architecture" => &mut self.architecture,
            "overwrite-diverted" => &mut self.overwrite_diverted,
            "overwrite" => &mut self.overwrite,
            "overwrite-dir" => &mut self.overwrite_dir,
            "bad-version" => &mut self.bad_version,
            _ => return false,
        };
        *flag = true;
        true
    }
}

/// One of dpkg's `path-exclude=GLOB` (`include: false`) or `path-include=GLOB` filters: the
/// last one whose glob matches a package's path decides whether it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathFilter {
    pub glob: String,
    pub include: bool,
}

impl PathFilter {
    pub fn new(glob: &str, include: bool) -> PathFilter {
        PathFilter { glob: glob.to_string(), include }
    }
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
            events: None,
            log: None,
            force: Force::default(),
            auto_deconfigure: false,
            path_filters: Vec::new(),
        }
    }
}
