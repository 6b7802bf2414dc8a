//! What can stop a comparison: a file of either root or an ignore file that cannot be read.
//! A difference is never an error; an error always names the file it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory of a root (or a root itself) that could not be opened, listed or read.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A line of an ignore file that is not a pattern.
    #[error("{}:{line}: {message}", path.display())]
    Ignore { path: PathBuf, line: usize, message: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: impl Into<std::io::Error>) -> Error {
        Error::Io { path: path.into(), source: source.into() }
    }
}
