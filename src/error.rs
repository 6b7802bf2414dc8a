//! What can go wrong, sorted by who has to act on it.
//!
//! Installer scripts branch on the exit code, so every error belongs to exactly one class with
//! a stable code ([`ExitCode`]), and every message names the file it is about: the package for a
//! bad package, the path under the root for an I/O error in the root.

use std::io;
use std::path::PathBuf;

/// The exit codes of `unpack`, a stable interface (documented in `--help`, the README and
/// unpack(1)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Everything was unpacked and, for durable strategies, is on stable storage.
    Ok = 0,
    /// Any other failure, including a package that conflicts with what the root holds.
    Failure = 1,
    /// Bad command line.
    Usage = 2,
    /// A bad, truncated or hostile package; the root is unchanged.
    BadPackage = 3,
    /// An I/O error in the root: no space, read-only, no permission.
    RootIo = 4,
    /// Another unpack holds the root's lock.
    Locked = 5,
    /// Stopped by SIGINT in the write phase; the root is left as it was.
    Interrupted = 130,
    /// Stopped by SIGTERM in the write phase; the root is left as it was.
    Terminated = 143,
}

/// An error and its causes on one line, each said once. Some of the project's errors put
/// their cause in their own message and also return it as their source, so a plain walk down
/// the chain (anyhow's `{:#}`) would print it twice: a cause the text already holds is skipped.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text += ": ";
            text += &said;
        }
        source = cause.source();
    }
    text
}

/// An engine error. Every variant carries the path it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The package is unreadable, malformed, or tries something the engine refuses
    /// (escaping the root, devices without privileges, ...).
    #[error("{package}: {reason}")]
    BadPackage { package: PathBuf, reason: String },

    /// A system call on the root failed.
    #[error("{path}: {action}: {source}")]
    Root { path: PathBuf, action: &'static str, source: io::Error },

    /// The package and the root disagree about what a path is.
    #[error("{path}: {reason}")]
    Conflict { path: PathBuf, reason: String },

    /// Another process holds the root's lock.
    #[error("{root}: locked by another unpack ({holder}); use --wait to wait for it")]
    Locked { root: PathBuf, holder: String },

    /// The caller asked for something that cannot be done (unknown strategy, no package).
    #[error("{0}")]
    Usage(String),

    /// A signal stopped the write phase; the transaction was rolled back.
    #[error("{root}: stopped by signal {signal} before any rename; removed the temporary files, the root is as it was")]
    Interrupted { signal: i32, root: PathBuf },

    /// Something failed once the journal was on disk (a rename refused, a directory's fsync):
    /// the transaction cannot be rolled back any more, only finished, and the person must be
    /// told how. Its exit code is its cause's.
    #[error("{cause}; the transaction is committed but not finished: once that is fixed, `unpack --recover {root}` (or any later unpack into it) finishes its renames")]
    Unfinished { root: PathBuf, cause: Box<Error> },
}

impl Error {
    /// The exit code a program should end with for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::BadPackage { .. } => ExitCode::BadPackage,
            Error::Root { .. } => ExitCode::RootIo,
            Error::Conflict { .. } => ExitCode::Failure,
            Error::Locked { .. } => ExitCode::Locked,
            Error::Usage(_) => ExitCode::Usage,
            Error::Interrupted { signal, .. } if *signal == libc::SIGINT => ExitCode::Interrupted,
            Error::Interrupted { signal, .. } if *signal == libc::SIGTERM => ExitCode::Terminated,
            Error::Interrupted { .. } => ExitCode::Failure,
            Error::Unfinished { cause, .. } => cause.exit_code(),
        }
    }

    pub(crate) fn root(path: impl Into<PathBuf>, action: &'static str, source: impl Into<io::Error>) -> Error {
        let source: io::Error = source.into();
        // The one limit a large transaction meets that says nothing of its cause: the
        // directory cache holds a descriptor for every directory written into, and the engine
        // can raise its soft limit only as far as the hard one.
        let source = match source.raw_os_error() {
            Some(libc::EMFILE) => io::Error::new(
                source.kind(),
                format!("{source}: the transaction holds a descriptor for each directory it writes into; raise the hard limit (ulimit -Hn) or unpack fewer packages at once"),
            ),
            _ => source,
        };
        Error::Root { path: path.into(), action, source }
    }

    pub(crate) fn bad(package: impl Into<PathBuf>, reason: impl Into<String>) -> Error {
        Error::BadPackage { package: package.into(), reason: reason.into() }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that leaves its cause to its source, as thiserror's convention has it.
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] io::Error);

    #[test]
    fn one_line_says_each_cause_once() {
        let engine = Error::root("/r/x", "writing", io::Error::from_raw_os_error(28));
        assert_eq!(one_line(&engine), "/r/x: writing: No space left on device (os error 28)");
        let outer = Outer(io::Error::from_raw_os_error(2));
        assert_eq!(one_line(&outer), "outer: No such file or directory (os error 2)");
    }
}
