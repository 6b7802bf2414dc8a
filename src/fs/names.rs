//! The names the engine owns in a root: the temporary names it writes under (and their
//! suffix), and its state directory with the files in it. One home for them, at the bottom of
//! the engine's layers: the entry checks refuse them in packages, the resolver and the write
//! phase make them, the journal records them, recovery recognises them.
//!
//! This module only makes and names; it never touches the filesystem.

use std::ffi::{OsStr, OsString};
use std::hash::BuildHasher;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The longest name of one path component Linux accepts.
pub const NAME_MAX: usize = 255;

/// The longest path of a package and of dpkg's database, as dpkg lists it (`/usr/bin/x`: the
/// package's path with a leading `/`): PATH_MAX. One bound for the entry checks, which refuse a
/// longer path before anything is written, and for the readers of the database's lists, which
/// refuse a longer line: whatever the engine writes into a list it reads back.
pub const MAX_PATH: usize = 4096;

/// The suffix of temporary names, as dpkg's `.dpkg-new`.
pub const TEMP_SUFFIX: &str = ".unpack-new";

/// The engine's state directory inside the root. Public (with [`JOURNAL`] and [`INTENT`])
/// because it is part of the on-disk contract: a package may not ship files there, a backup or
/// a package manager's own database leaves it alone, and a checker of crash states (the lab's
/// unpack-crashtest) looks there for a transaction left pending.
pub const STATE_DIR: &str = "var/lib/unpack";

/// The root's lock, in the state directory.
pub(crate) const LOCK_FILE: &str = "lock";
/// A new lock file being put in place of one others could open, in the state directory.
pub(crate) const LOCK_NEW: &str = "lock.new";
/// The journal of a transaction in its rename phase, in [`STATE_DIR`]: while it exists,
/// [`recover_root`](crate::recover_root) has renames to finish.
pub const JOURNAL: &str = "txn";
/// The journal being written, in the state directory.
pub(crate) const JOURNAL_NEW: &str = "txn.new";
/// The mark of a transaction in its write phase, in [`STATE_DIR`]: while it exists,
/// [`recover_root`](crate::recover_root) has temporary files to remove.
pub const INTENT: &str = "intent";
/// The conffiles a configure of the real dpkg may move, recorded before it runs, in the state
/// directory: while it exists, a crash may have lost one of those moves
/// (`src/dpkg/configure_guard.rs`).
pub const CONFIGURE_RECORD: &str = "configure";

/// `NAME.unpack-new`. A name of up to 255 bytes is valid, but with the suffix it may not be:
/// then the temporary name keeps the name's first bytes and adds a hash of the whole name,
/// keyed per process (std's SipHash with a random key), so a package cannot pick two names
/// whose temporary names collide. Recovery needs only the suffix, and the journal records
/// temporary names as they are.
pub fn temp_name(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    let mut temp = if bytes.len() + TEMP_SUFFIX.len() <= NAME_MAX {
        name.to_os_string()
    } else {
        static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
            std::sync::OnceLock::new();
        let hash = KEY.get_or_init(Default::default).hash_one(bytes);
        let mut short = bytes[..NAME_MAX - TEMP_SUFFIX.len() - 17].to_vec();
        short.extend_from_slice(format!("~{hash:016x}").as_bytes());
        OsString::from_vec(short)
    };
    temp.push(TEMP_SUFFIX);
    temp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_fit_and_keep_long_names_apart() {
        assert_eq!(temp_name(OsStr::new("a")), "a.unpack-new");
        let fits = "f".repeat(NAME_MAX - TEMP_SUFFIX.len());
        assert_eq!(temp_name(OsStr::new(&fits)), format!("{fits}{TEMP_SUFFIX}").as_str());
        let (a, b) = ("f".repeat(NAME_MAX), "f".repeat(NAME_MAX - 1) + "g");
        let (ta, tb) = (temp_name(OsStr::new(&a)), temp_name(OsStr::new(&b)));
        for t in [&ta, &tb] {
            assert!(t.len() <= NAME_MAX && t.as_bytes().ends_with(TEMP_SUFFIX.as_bytes()), "{t:?}");
        }
        assert_ne!(ta, tb);
        assert_eq!(temp_name(OsStr::new(&a)), ta, "the same name, the same temporary name");
    }
}
