//! The benchmark matrix behind `unpack-bench`: what durability costs, per strategy, filesystem,
//! mount option set, page-cache state and scenario, next to the tools people already use.
//!
//! Why it exists: the claim of this project is that safe unpacking can be cheap, and a claim
//! about speed is only worth the command that reproduces it. The matrix is that command.
//!
//! How a number is made (and what this module must never do):
//! - every run gets a fresh filesystem ([`device`]), so runs never see each other's files,
//!   journals or free-space layout;
//! - the unpacker is a child process (our `unpack` binary or a peer), so its time and peak RSS
//!   are its own and never include the bench;
//! - every run records two times: until the unpacker exited, and until the data was stable
//!   (that exit plus a `syncfs` of the filesystem), because an unpacker that does not flush is
//!   only fast until somebody counts the flush;
//! - tools alternate within a round of a cell row (A B C A B C …), never one block each, so the
//!   drift of a shared machine hits all of them alike ([`plan`]);
//! - a run that fails is counted as failed and never contributes a time ([`stats`]);
//! - the counting runs of `--counts` (instructions and system calls, [`counts`]) are runs of
//!   their own, after a row's timed runs: a traced run is never timed.
//!
//! It never touches a filesystem it did not make, except the directory given with `--dir`, and
//! there only a subdirectory of its own.

pub mod apt_local;
pub mod apt_scenario;
pub mod busy;
pub mod cache;
pub mod chart;
pub mod command;
pub mod counts;
pub mod device;
pub mod engine;
pub mod environment;
pub mod guest;
pub mod matrix;
pub mod minbase;
pub mod nfs;
pub mod output;
pub mod package;
pub mod peers;
pub mod plan;
pub mod run;
pub mod scenario;
pub mod stats;
pub mod synthetic;

use std::io;
use std::path::PathBuf;

/// The lab's exit status for a matrix that was made but is incomplete: runs of `unpack-bench`
/// that failed, cells of `unpack-crashtest` that could not be run. Distinct from 0 (every cell
/// ran), 1 (the tool itself failed) and 2 (usage), so that a script never reads a matrix with
/// holes as a result.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Everything that can stop the bench as a whole. A single run failing is not an error: it is a
/// failed run in the matrix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Making filesystems on loop devices and dropping caches needs root.
    #[error("{0}")]
    NeedsRoot(String),
    /// The arguments ask for something that cannot be benched.
    #[error("{0}")]
    Usage(String),
    /// An external tool the matrix needs is not installed.
    #[error("{tool} not found in PATH: install the Debian package {package}")]
    MissingTool { tool: String, package: &'static str },
    /// The `unpack` binary is not where the bench expects it.
    #[error("{path}: the unpack engine binary is missing (it is looked up next to this program, then on PATH)")]
    MissingEngine { path: PathBuf },
    /// The user-mode-linux guest of NFS rows cannot be used: no kit at the path given, a kernel
    /// that cannot run userspace on this host, modules of another release.
    #[error("{path}: {message}")]
    Guest { path: PathBuf, message: String },
    /// An I/O error on a file or directory of the bench's own.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// An external command the bench needs for itself (not a measured run) failed.
    #[error("{path}: {command} failed: {message}")]
    Command { path: PathBuf, command: String, message: String },
    /// A generated or rewritten package could not be written.
    #[error("{path}: cannot write package: {source}")]
    Package { path: PathBuf, source: io::Error },
    /// A filesystem of the bench could not be taken down; continuing would leak it.
    #[error("{path}: cannot take the scratch filesystem down: {source}")]
    Teardown { path: PathBuf, source: io::Error },
    /// SIGINT, SIGTERM or SIGHUP stopped the matrix between two runs (after taking the last
    /// run's filesystem down) or while it made its packages.
    #[error("stopped by signal {signal} before the next run; no filesystem of the bench is left mounted")]
    Interrupted { signal: i32 },
    /// Writing an output file failed.
    #[error("{path}: cannot write output: {message}")]
    Output { path: PathBuf, message: String },
}

impl Error {
    /// True for errors a user fixes by changing the command line (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::NeedsRoot(_) | Error::Usage(_))
    }

    /// The exit status for this error: 2 for usage, 128 + signal when a signal stopped the
    /// matrix (the shell's convention), 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::Interrupted { signal } => unpack::interrupt::exit_status(*signal),
            e if e.is_usage() => 2,
            _ => 1,
        }
    }

    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// The bench's result type.
pub type Result<T> = std::result::Result<T, Error>;
