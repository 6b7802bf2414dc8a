//! dpkg's `path-exclude` and `path-include` filters (src/main/filters.c), which minimal images
//! ship in `/etc/dpkg/dpkg.cfg.d/` to leave documentation and translations out.
//!
//! The filters are taken in order and the last whose glob matches a package's path decides; the
//! glob is matched by the C library's `fnmatch` with no flags, as dpkg matches it, against the
//! path as dpkg lists it (`/usr/share/doc/x`): `*` and `?` match a `/` too, and a leading dot is
//! not special. An excluded directory or symlink is kept when its path starts with some
//! include's literal start (up to its first `*?[\`, without trailing slashes), for what the
//! include brings back to have a place. A filtered path is not written, but the package still lists it (as
//! dpkg lists it), its trigger interests are still activated, and on an upgrade it counts as
//! one the new version does not ship: what the old version installed there is removed, as dpkg
//! removes it. Only the decision lives here; the write phase asks it after dpkg's ownership
//! rules, as dpkg's tarobject does.

use super::database::Database;
use crate::options::PathFilter;
use crate::read::entry::Kind;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

impl Database {
    /// Whether the filters keep the entry `path` (as dpkg lists it) of kind `kind` of the
    /// package begun last from being written; such a path is recorded for the upgrade's
    /// removals.
    pub fn filtered(&mut self, path: &Path, kind: &Kind) -> bool {
        // The root itself (`/`) is never filtered: dpkg matches it as an empty name.
        if self.filters.is_empty() || path.parent().is_none() {
            return false;
        }
        let keeps_dir = matches!(kind, Kind::Dir | Kind::Symlink { .. });
        if !skips(&self.filters, path.as_os_str().as_bytes(), keeps_dir) {
            return false;
        }
        if let Some(inc) = self.incoming.last_mut() {
            inc.filtered.insert(path.to_path_buf());
        }
        true
    }
}

/// dpkg's `filter_should_skip` on `path`; `dir_or_symlink`: the entry is a directory or a
/// symlink, which an include may bring back.
fn skips(filters: &[PathFilter], path: &[u8], dir_or_symlink: bool) -> bool {
    let mut skip = false;
    for f in filters {
        if fnmatch(&f.glob, path) {
            skip = !f.include;
        }
    }
    if skip && dir_or_symlink {
        let reincluded = filters.iter().filter(|f| f.include).any(|f| {
            let glob = f.glob.as_bytes();
            let literal = glob.iter().position(|b| b"*?[\\".contains(b)).unwrap_or(glob.len());
            let mut prefix = &glob[..literal];
            while let [rest @ .., b'/'] = prefix {
                prefix = rest;
            }
            path.starts_with(prefix)
        });
        return !reincluded;
    }
    skip
}

/// The C library's `fnmatch(glob, name, 0) == 0`. A glob or name with a NUL byte (which
/// neither a configuration line nor a listed path can hold) matches nothing.
fn fnmatch(glob: &str, name: &[u8]) -> bool {
    let (Ok(glob), Ok(name)) = (CString::new(glob), CString::new(name)) else {
        return false;
    };
    // SAFETY: two NUL-terminated strings that live across the call; fnmatch only reads them.
    unsafe { libc::fnmatch(glob.as_ptr(), name.as_ptr(), 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(spec: &[(&str, bool)]) -> Vec<PathFilter> {
        spec.iter().map(|(g, include)| PathFilter::new(g, *include)).collect()
    }

    #[test]
    fn the_last_match_wins_and_a_star_crosses_slashes() {
        let f = filters(&[("/usr/share/doc/*", false), ("/usr/share/doc/*/copyright", true)]);
        assert!(skips(&f, b"/usr/share/doc/a/README", false));
        assert!(skips(&f, b"/usr/share/doc/a/sub/deep", false), "* matches a / too");
        assert!(!skips(&f, b"/usr/share/doc/a/copyright", false));
        assert!(!skips(&f, b"/usr/bin/a", false));
        let later_exclude =
            filters(&[("/usr/share/doc/*/copyright", true), ("/usr/share/doc/*", false)]);
        assert!(skips(&later_exclude, b"/usr/share/doc/a/copyright", false));
    }

    #[test]
    fn an_excluded_directory_stays_when_its_path_starts_with_an_includes_literal_start() {
        let f = filters(&[("/usr/share/doc/*", false), ("/usr/share/doc/*/copyright", true)]);
        assert!(!skips(&f, b"/usr/share/doc/a", true), "`/usr/share/doc` begins it");
        assert!(skips(&f, b"/usr/share/doc/a/README", false), "a file is not brought back");
        let exact = filters(&[("/usr/share/doc/*", false), ("/usr/share/doc/a/copyright", true)]);
        assert!(skips(&exact, b"/usr/share/doc/a", true), "the path must start with all of it");
        assert!(!skips(&exact, b"/usr/share/doc/a/copyright", false));
        let locale = filters(&[("/usr/share/locale/*", false), ("/usr/share/locale/en*/", true)]);
        assert!(!skips(&locale, b"/usr/share/locale/en_GB", true));
        assert!(skips(&locale, b"/usr/share/locale/de", true));
        let none = filters(&[("/usr/share/man/*", false)]);
        assert!(skips(&none, b"/usr/share/man/man1", true));
        assert!(skips(&none, b"/usr/share/man/man1/x.1.gz", false));
    }

    #[test]
    fn a_leading_dot_and_brackets_are_fnmatchs() {
        let f = filters(&[("/etc/*", false)]);
        assert!(skips(&f, b"/etc/.hidden", false), "no FNM_PERIOD");
        let classes = filters(&[("/usr/lib/[ab]*", false)]);
        assert!(skips(&classes, b"/usr/lib/a.so", false));
        assert!(!skips(&classes, b"/usr/lib/c.so", false));
    }
}
