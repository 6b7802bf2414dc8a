//! What each path of a package must hold: its content as the package says, per path.
//!
//! Why: the invariants compare what a crash state holds with the old and the new version of
//! every path, so both are computed once from the packages themselves (the real one and the
//! older version made from it), read by the engine's own reader (`deb::Deb`, `entry::validate`),
//! never from a tree an unpacker wrote: the thing under test must not decide what is right.
//! Files are kept as a length and a content hash, not as bytes, so a big package costs no
//! memory. This module never touches a filesystem but to read packages.

use super::CrashError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::hash::{DefaultHasher, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use unpack::read::deb::Deb;
use unpack::read::entry::{self, Kind};

/// What a path holds, as far as the invariants care: the type, and a file's bytes, a symlink's
/// target or a device's number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Absent,
    File {
        len: u64,
        hash: u64,
    },
    Dir,
    Symlink(OsString),
    Fifo,
    CharDevice(u32, u32),
    BlockDevice(u32, u32),
    /// Something else on disk (a socket), or a path that could not be read.
    Other(String),
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Content::Absent => write!(f, "absent"),
            Content::File { len, hash } => write!(f, "file of {len} bytes (hash {hash:016x})"),
            Content::Dir => write!(f, "directory"),
            Content::Symlink(t) => write!(f, "symlink to {}", t.to_string_lossy()),
            Content::Fifo => write!(f, "fifo"),
            Content::CharDevice(a, b) => write!(f, "char device {a}:{b}"),
            Content::BlockDevice(a, b) => write!(f, "block device {a}:{b}"),
            Content::Other(what) => write!(f, "{what}"),
        }
    }
}

impl Serialize for Content {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Every path of a package (the root itself left out) and its content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<PathBuf, Content>);

impl Tree {
    /// Reads `package`'s data member. A hard link gets its target's content.
    pub fn of_deb(package: &Path) -> Result<Tree, CrashError> {
        let bad = |reason: String| CrashError::Package { path: package.to_path_buf(), reason };
        let mut deb = Deb::open(package).map_err(|e| engine_error(package, e))?;
        // The members come in order: control first, skipped unread.
        drop(deb.control().map_err(|e| engine_error(package, e))?);
        let (member, stream) = deb.data().map_err(|e| engine_error(package, e))?;
        let mut archive = tar::Archive::new(stream);
        let mut tree = BTreeMap::new();
        for item in archive.entries().map_err(|e| bad(format!("{member}: {e}")))? {
            let mut item = item.map_err(|e| bad(format!("{member}: {e}")))?;
            let entry = entry::validate(&mut item).map_err(|e| bad(format!("{member}: {e}")))?;
            if entry.path.as_os_str().is_empty() {
                continue;
            }
            let content = match entry.kind {
                Kind::File { size } => {
                    let (len, hash) =
                        content_hash(&mut item).map_err(|e| bad(format!("{member}: {e}")))?;
                    if len != size {
                        return Err(bad(format!(
                            "{}: {len} bytes where the header says {size}",
                            entry.path.display()
                        )));
                    }
                    Content::File { len, hash }
                }
                Kind::Dir => Content::Dir,
                Kind::Symlink { target } => Content::Symlink(target),
                Kind::Hardlink { target } => tree.get(&target).cloned().ok_or_else(|| {
                    bad(format!(
                        "{}: hard link to {}, not an earlier entry",
                        entry.path.display(),
                        target.display()
                    ))
                })?,
                Kind::Fifo => Content::Fifo,
                Kind::CharDevice { major, minor } => Content::CharDevice(major, minor),
                Kind::BlockDevice { major, minor } => Content::BlockDevice(major, minor),
            };
            tree.insert(entry.path, content);
        }
        Ok(Tree(tree))
    }

    /// What `path` holds in this tree: absent when the tree does not have it.
    pub fn get(&self, path: &Path) -> Content {
        self.0.get(path).cloned().unwrap_or(Content::Absent)
    }
}

/// An error of the engine's package reader, without naming the package twice.
pub(super) fn engine_error(package: &Path, e: unpack::Error) -> CrashError {
    let reason = match e {
        unpack::Error::BadPackage { reason, .. } => reason,
        other => other.to_string(),
    };
    CrashError::Package { path: package.to_path_buf(), reason }
}

/// The length and content hash of everything `r` yields. The same function hashes what the
/// package says and what a crash state holds, so the two always agree on equal bytes.
pub fn content_hash(r: &mut dyn Read) -> std::io::Result<(u64, u64)> {
    let mut hasher = DefaultHasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0u64;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.write(&buf[..n]);
                len += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((len, hasher.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name)
    }

    #[test]
    fn the_hash_does_not_depend_on_how_reads_are_cut() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let whole = content_hash(&mut &data[..]).unwrap();
        let mut chained = (&data[..70_001]).chain(&data[70_001..]);
        assert_eq!(content_hash(&mut chained).unwrap(), whole);
        assert_eq!(whole.0, 200_000);
    }

    #[test]
    fn every_entry_type_is_read_and_hard_links_share_their_target_content() {
        let tree = Tree::of_deb(&fixture("types_1.0_all.deb")).unwrap();
        let kinds = |f: fn(&Content) -> bool| tree.0.values().filter(|c| f(c)).count();
        assert!(kinds(|c| matches!(c, Content::Dir)) > 0);
        assert!(kinds(|c| matches!(c, Content::Symlink(_))) >= 3);
        assert_eq!(kinds(|c| matches!(c, Content::Fifo)), 1);
        assert_eq!(tree.get(Path::new("usr/share/types/dev/null")), Content::CharDevice(1, 3));
        let a = tree.0.iter().find(|(p, _)| p.ends_with("hard-a")).map(|(_, c)| c.clone());
        let b = tree.0.iter().find(|(p, _)| p.ends_with("hard-b")).map(|(_, c)| c.clone());
        assert!(matches!(a, Some(Content::File { .. })));
        assert_eq!(a, b);
        assert_eq!(tree.get(Path::new("no/such/path")), Content::Absent);
    }

    #[test]
    fn a_bad_package_is_an_error_naming_it() {
        let err = Tree::of_deb(&fixture("truncated.deb")).unwrap_err();
        assert!(err.to_string().contains("truncated.deb"), "{err}");
    }
}
