//! `unpack-crashtest`: the data-safety matrix.
//!
//! A strategy's promise ("old or new at any crash; durable at exit 0") is only worth what a
//! power cut does to it, so this module cuts the power: it records every block write and flush
//! of a real unpack on a real filesystem (a virtual disk with a write log, `crate::vdisk`),
//! builds the disk states a power cut could leave, mounts each one (which replays the journal)
//! and checks every path of the package. One cell = filesystem x mount option set x scenario x
//! strategy:
//!
//! ```text
//!  record (a real unpack, marks start / returned / settled)  ──▶  write log
//!  states (epochs between flushes, prefixes and subsets, dedup by content)  ──▶  chosen states
//!  image (base carried through the log, a sparse copy per state)  ──▶  one image at a time
//!  check (mount, old-or-new per path, new after exit 0, unmount, fsck)  ──▶  report
//! ```
//!
//! What the old and new contents are comes from the packages ([`expect`]), the older version
//! from [`older`]; for `upgrade-db`, from the package pair and what dpkg makes of it
//! ([`database`], which also checks the database); for `bootstrap`, from the call's two
//! packages and the trees its three transactions leave ([`bootstrap`], which also checks the
//! database and runs the bootstrap again); for `apt`, from the apt-local packages at both
//! versions, per package, where dpkg's status places each ([`apt`], which also repairs the
//! root as an administrator would and checks the result). This module must never trust a tree the unpacker wrote to say what is
//! right, never build a state on an image that was mounted since mkfs, and never leave a
//! mount, loop device or FUSE mount behind.

pub mod apt;
pub mod bootstrap;
pub mod chart;
pub mod check;
pub mod database;
pub mod expect;
pub mod image;
pub mod matrix;
pub mod older;
pub mod record;
pub mod replay;
pub mod report;
pub mod states;

use crate::vdisk::log::LogError;
use crate::vdisk::VdiskError;
use crate::workdir::Workdir;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What can go wrong in the crash test. Every variant but `Usage` names the path it is about.
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// A file or directory operation failed.
    #[error("{path}: {what}: {source}")]
    Io { path: PathBuf, what: &'static str, source: io::Error },
    /// A package could not be read or rewritten.
    #[error("{path}: {reason}")]
    Package { path: PathBuf, reason: String },
    /// A write log that does not hold what a recording leaves.
    #[error("write log {path}: {reason}")]
    BadLog { path: PathBuf, reason: String },
    /// A program the test runs failed (the unpacker, fsck).
    #[error("{path}: {reason}")]
    Tool { path: PathBuf, reason: String },
    /// A `--replay` that names nothing the earlier run left.
    #[error("{path}: {reason}")]
    Replay { path: PathBuf, reason: String },
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// SIGINT, SIGTERM or SIGHUP arrived; everything mounted or attached was taken down.
    #[error(
        "stopped by signal {signal}; every filesystem, loop device and virtual disk was taken down"
    )]
    Interrupted { signal: i32 },
    #[error(transparent)]
    Disk(#[from] VdiskError),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl CrashError {
    /// The exit status for this error: 2 for usage, 128 + signal for a signal, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            CrashError::Usage(_) => 2,
            CrashError::Interrupted { signal } => unpack::interrupt::exit_status(*signal),
            _ => 1,
        }
    }
}

/// Fails with [`CrashError::Interrupted`] once a signal the binary listens for
/// (`unpack::interrupt`) has arrived, so the guards take everything down on the way out.
pub(crate) fn check_interrupt() -> Result<(), CrashError> {
    unpack::interrupt::pending().map_or(Ok(()), |signal| Err(CrashError::Interrupted { signal }))
}

/// The run's scratch directory under `$TMPDIR`.
pub(crate) fn new_workdir() -> Result<Workdir, CrashError> {
    let temp = std::env::temp_dir();
    Workdir::new(&temp, "unpack-crashtest").map_err(|source| CrashError::Io {
        path: temp,
        what: "creating the work directory",
        source,
    })
}

/// `unpack -q -s STRATEGY FLAGS... PACKAGE... ROOT`, which must exit 0: the engine under test
/// ([`record`]), or what prepares a cell ([`apt`], [`bootstrap`]).
pub(crate) fn unpack(
    bin: &Path,
    strategy: &str,
    flags: &[&str],
    packages: &[impl AsRef<Path>],
    root: &Path,
) -> Result<(), CrashError> {
    let packages: Vec<&Path> = packages.iter().map(AsRef::as_ref).collect();
    let out = Command::new(bin)
        .args(["-q", "-s", strategy])
        .args(flags)
        .args(&packages)
        .arg(root)
        .output()
        .map_err(|e| CrashError::Tool {
            path: bin.to_path_buf(),
            reason: format!("cannot run it: {e}"),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let args: Vec<String> = flags
        .iter()
        .map(|f| f.to_string())
        .chain(packages.iter().map(|p| p.display().to_string()))
        .collect();
    Err(CrashError::Tool {
        path: bin.to_path_buf(),
        reason: format!(
            "-s {strategy} {} exited {}: {}",
            args.join(" "),
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}
