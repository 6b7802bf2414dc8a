//! What can go wrong, sorted by who has to act on it.
//!
//! Installer scripts branch on the exit code, so every error belongs to exactly one class with
//! a stable code ([`Exit`]), and every message names the file it is about: the package for a
//! bad package, the path under the root for an I/O error in the root.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The exit codes of `unpack`, a stable interface (documented in `--help`, the README and
/// unpack(1)). Named `Exit`, not `ExitCode`, so that a program's `std::process::ExitCode` keeps
/// its name beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Everything was unpacked and, for durable strategies, is on stable storage.
    Ok = 0,
    /// Any other failure, including a package that conflicts with what the root holds, and an
    /// internal error (a bug of the engine's, never the caller's).
    Failure = 1,
    /// Bad command line.
    Usage = 2,
    /// A bad, truncated or hostile package; the root is unchanged.
    BadPackage = 3,
    /// An I/O error in the root: no space, read-only, no permission (a device node in a package
    /// unpacked by a user other than root included).
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
/// Public: it is how a program shows an [`Error`] to a person, the `unpack` program and the
/// lab's included.
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

/// Text from a package or a root (a name, a control field, a journal's package list) as a
/// person is shown it: printable characters as they are, a backslash doubled, and each byte of
/// a control character (C0, DEL, C1), of a bidirectional override or isolate, or of invalid
/// UTF-8 as a `\ooo` octal escape, as `ls -b` writes bytes it cannot show. So an escape
/// sequence in a file name cannot move the cursor, recolour or retitle the terminal or hide part
/// of a message, and a name that is not UTF-8 is shown byte for byte. Every message and report
/// line for people passes such text through here; the JSON report needs none of it (serde
/// escapes control characters, and its strings stay exact).
pub fn escape(text: &(impl AsRef<OsStr> + ?Sized)) -> Escaped<'_> {
    Escaped(text.as_ref().as_bytes())
}

/// What [`escape`] returns: formats as the escaped text.
pub struct Escaped<'a>(&'a [u8]);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let octal = |f: &mut fmt::Formatter<'_>, bytes: &[u8]| {
            bytes.iter().try_for_each(|b| write!(f, "\\{b:03o}"))
        };
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    c if c.is_control()
                        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
                    {
                        octal(f, c.encode_utf8(&mut [0; 4]).as_bytes())?
                    }
                    c => write!(f, "{c}")?,
                }
            }
            octal(f, chunk.invalid())?;
        }
        Ok(())
    }
}

/// An engine error. Every variant carries the path it is about, shown through [`escape`]: a
/// path may hold names from the package or the root. A reason holds such names escaped already.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The package is unreadable, malformed, or tries something the engine refuses
    /// (escaping the root, a hard link out of the transaction, ...).
    #[error("{}: {reason}", escape(.package))]
    BadPackage { package: PathBuf, reason: String },

    /// A system call on the root failed.
    #[error("{}: {action}: {source}", escape(.path))]
    Root { path: PathBuf, action: &'static str, source: io::Error },

    /// The package and the root disagree about what a path is.
    #[error("{}: {reason}", escape(.path))]
    Conflict { path: PathBuf, reason: String },

    /// Another process holds the root's lock, or dpkg's (database mode): `holder` says who.
    #[error("{}: locked by {holder}; use --wait to wait for it", escape(.root))]
    Locked { root: PathBuf, holder: String },

    /// The caller asked for something that cannot be done (unknown strategy, no package).
    #[error("{0}")]
    Usage(String),

    /// The engine broke a promise to itself (a reader's message out of order, a stage that
    /// left nothing for the next): a bug to report, never the caller's input. The root is
    /// handled as for any other failure before the renames: left as it was.
    #[error("internal error: {0}")]
    Internal(String),

    /// An interrupted transaction has renames left, but what they would rename over changed
    /// since its journal was written (someone, dpkg typically, worked on the root after the
    /// crash): nothing was renamed, since that would put an older version over a newer one.
    #[error("{}: an interrupted transaction ({}) has renames left, but {} changed since it was interrupted (someone worked on the root after the crash): nothing was renamed, for that would put its older version over the newer one. `unpack --recover --discard {0}` drops the transaction (removes its temporary files, leaves what it had renamed, and records its packages `reinstreq half-installed` in dpkg's database); then `dpkg --audit` names what to repair, and reinstalling those packages repairs it", escape(.root), if .packages.is_empty() { "unknown packages".to_string() } else { .packages.iter().map(|p| escape(p).to_string()).collect::<Vec<_>>().join(", ") }, changed_list(.changed))]
    Changed { root: PathBuf, packages: Vec<String>, changed: Vec<PathBuf> },

    /// A signal stopped the write phase; the transaction was rolled back.
    #[error("{}: stopped by signal {signal} before any rename; removed the temporary files, the root is as it was", escape(.root))]
    Interrupted { signal: i32, root: PathBuf },

    /// A maintainer script failed (database mode): `what` is the package, the script and its
    /// arguments, and what was done about it.
    #[error("maintainer script failed: {what}")]
    Script { what: String },

    /// Something failed once the journal was on disk (a rename refused, a directory's fsync):
    /// the transaction cannot be rolled back any more, only finished, and the person must be
    /// told how. Its exit code is its cause's.
    #[error("{cause}; the transaction is committed but not finished: once that is fixed, `unpack --recover {}` (or any later unpack into it) finishes its renames", escape(.root))]
    Unfinished { root: PathBuf, cause: Box<Error> },
}

impl Error {
    /// The exit code a program should end with for this error.
    pub fn exit_code(&self) -> Exit {
        match self {
            Error::BadPackage { .. } => Exit::BadPackage,
            Error::Root { .. } | Error::Changed { .. } => Exit::RootIo,
            Error::Conflict { .. } | Error::Script { .. } | Error::Internal(_) => Exit::Failure,
            Error::Locked { .. } => Exit::Locked,
            Error::Usage(_) => Exit::Usage,
            Error::Interrupted { signal, .. } if *signal == libc::SIGINT => Exit::Interrupted,
            Error::Interrupted { signal, .. } if *signal == libc::SIGTERM => Exit::Terminated,
            Error::Interrupted { .. } => Exit::Failure,
            Error::Unfinished { cause, .. } => cause.exit_code(),
        }
    }

    pub(crate) fn root(
        path: impl Into<PathBuf>,
        action: &'static str,
        source: impl Into<io::Error>,
    ) -> Error {
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

/// Up to five paths, and how many more: for [`Error::Changed`].
fn changed_list(changed: &[PathBuf]) -> String {
    let mut shown: Vec<String> = changed.iter().take(5).map(|p| escape(p).to_string()).collect();
    if changed.len() > 5 {
        shown.push(format!("{} more", changed.len() - 5));
    }
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that leaves its cause to its source, as thiserror's convention has it.
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] io::Error);

    #[test]
    fn escape_shows_controls_invalid_utf8_and_backslashes_as_octal_and_the_rest_as_is() {
        let shown = |b: &[u8]| escape(OsStr::from_bytes(b)).to_string();
        assert_eq!(shown(b"usr/bin/caf\xc3\xa9 ok"), "usr/bin/caf\u{e9} ok");
        assert_eq!(shown(b"a\x1b]0;title\x07b"), "a\\033]0;title\\007b");
        assert_eq!(shown(b"two\nlines\ttab\x7f"), "two\\012lines\\011tab\\177");
        assert_eq!(shown(b"not utf-8 \xff\xfe"), "not utf-8 \\377\\376");
        assert_eq!(
            shown("C1 \u{9b}31m, bidi \u{202e}x".as_bytes()),
            "C1 \\302\\23331m, bidi \\342\\200\\256x"
        );
        assert_eq!(
            shown(b"back\\slash \\033"),
            "back\\\\slash \\\\033",
            "an escape cannot be forged"
        );
    }

    #[test]
    fn one_line_says_each_cause_once() {
        let engine = Error::root("/r/x", "writing", io::Error::from_raw_os_error(28));
        assert_eq!(one_line(&engine), "/r/x: writing: No space left on device (os error 28)");
        let outer = Outer(io::Error::from_raw_os_error(2));
        assert_eq!(one_line(&outer), "outer: No such file or directory (os error 2)");
    }
}
