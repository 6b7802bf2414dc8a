//! A package's file list (`info/PKG.list`), and the control members `conffiles` and `md5sums`.
//!
//! Every path that leaves this module passed [`db_path`]: absolute, plain, bounded. Nothing here
//! resolves a path; the caller confines it to the root.

#[cfg(any(test, feature = "fuzzing"))]
use super::is_md5;
use super::{byte_lines, db_path, is_space, lines, shown, ParseError};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The paths of `info/PKG.list`: one per line, each a [`db_path`]; an empty line is an error, as
/// a missing final newline is (dpkg refuses both).
pub fn parse_list(bytes: &[u8]) -> Result<Vec<PathBuf>, ParseError> {
    byte_lines(bytes)
        .map(|line| {
            let (n, line) = line?;
            db_path(line).map_err(|e| ParseError::new(n, e))
        })
        .collect()
}

/// `info/PKG.list` as dpkg writes it: one path per line.
pub fn write_list(paths: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for path in paths {
        out.extend_from_slice(path.as_os_str().as_bytes());
        out.push(b'\n');
    }
    out
}

/// One line of the control member `conffiles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConffileEntry {
    pub path: PathBuf,
    pub remove_on_upgrade: bool,
}

/// The longest line of the `conffiles` member dpkg reads, its newline not counted
/// (src/main/unpack.c: `fgets` into `MAXCONFFILENAME - 2` bytes, the newline and the NUL
/// included).
pub const MAX_CONFFILE_LINE: usize = 996;

/// The control member `conffiles` as dpkg 1.21 reads it (src/main/unpack.c deb_parse_conffiles):
/// lines of at most [`MAX_CONFFILE_LINE`] bytes, each with its newline; whitespace-only lines
/// skipped, trailing whitespace trimmed, an absolute path optionally after the flag
/// `remove-on-upgrade` and one space; any other flag is an error. A path named twice is an
/// error too (dpkg would record it twice).
pub fn parse_conffiles_member(bytes: &[u8]) -> Result<Vec<ConffileEntry>, ParseError> {
    let mut entries: Vec<ConffileEntry> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in lines(bytes) {
        let (n, line) = line?;
        if line.len() > MAX_CONFFILE_LINE {
            return Err(ParseError::new(
                n,
                format!(
                    "conffile name of {} bytes is too long (dpkg reads at most {MAX_CONFFILE_LINE})",
                    line.len()
                ),
            ));
        }
        let line = line.trim_end_matches(is_space);
        if line.is_empty() {
            continue;
        }
        let (path, remove_on_upgrade) = match line.split_once(' ') {
            _ if line.starts_with('/') => (line, false),
            Some(("remove-on-upgrade", path)) => (path, true),
            Some((flag, _)) => {
                return Err(ParseError::new(n, format!("unknown conffile flag '{}'", shown(flag))))
            }
            None => {
                return Err(ParseError::new(
                    n,
                    format!("conffile '{}' is not absolute", shown(line)),
                ))
            }
        };
        let path = db_path(path.as_bytes()).map_err(|e| ParseError::new(n, e))?;
        if path.as_os_str() == "/." {
            return Err(ParseError::new(n, "the root listed as a conffile"));
        }
        if !seen.insert(path.clone()) {
            return Err(ParseError::new(n, format!("conffile {} listed twice", path.display())));
        }
        entries.push(ConffileEntry { path, remove_on_upgrade });
    }
    Ok(entries)
}

/// The control member `md5sums` as dpkg --verify reads it (lib/dpkg/db-fsys-digest.c): 32 hex
/// digits, two spaces, a path relative to the root (a leading "/" or "./" is tolerated, a
/// trailing '/' dropped). Returns the hashes in lowercase and the paths absolute. The engine
/// writes md5sums and never reads them: this is the reader the tests and the fuzzer check
/// [`write_md5sums`] against.
#[cfg(any(test, feature = "fuzzing"))]
pub fn parse_md5sums(bytes: &[u8]) -> Result<Vec<(String, PathBuf)>, ParseError> {
    byte_lines(bytes)
        .map(|line| {
            let (n, line) = line?;
            md5sums_line(line).map_err(|e| ParseError::new(n, e))
        })
        .collect()
}

#[cfg(any(test, feature = "fuzzing"))]
fn md5sums_line(line: &[u8]) -> Result<(String, PathBuf), String> {
    let (hash, name) = line.split_at_checked(32).ok_or("a line shorter than its hash")?;
    let hash = std::str::from_utf8(hash)
        .map(str::to_ascii_lowercase)
        .map_err(|_| "a hash that is not hex")?;
    if !is_md5(&hash) {
        return Err(format!("bad hash '{}'", shown(hash)));
    }
    let name = name.strip_prefix(b"  ").ok_or("no two spaces after the hash")?;
    let name = name.strip_suffix(b"/").unwrap_or(name);
    let name = name.strip_prefix(b"./").or_else(|| name.strip_prefix(b"/")).unwrap_or(name);
    if name.is_empty() {
        return Err("an empty file name".into());
    }
    let path = db_path(&[b"/", name].concat())?;
    Ok((hash, path))
}

/// `md5sums` as dpkg writes the ones it computes: "HASH  path" with the path's leading '/' dropped.
pub fn write_md5sums(entries: &[(String, PathBuf)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (hash, path) in entries {
        let path = path.as_os_str().as_bytes();
        out.extend_from_slice(hash.as_bytes());
        out.extend_from_slice(b"  ");
        out.extend_from_slice(path.strip_prefix(b"/").unwrap_or(path));
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_list_is_one_plain_absolute_path_per_line() {
        let text = b"/.\n/usr\n/usr/bin\n/usr/bin/a b\n";
        let list = parse_list(text).unwrap();
        assert_eq!(list, paths(&["/.", "/usr", "/usr/bin", "/usr/bin/a b"]));
        assert_eq!(write_list(&list), text);
        assert_eq!(
            parse_list(b"/a\xff\n").unwrap(),
            vec![PathBuf::from(OsStr::from_bytes(b"/a\xff"))]
        );
        for (bad, line) in [
            (&b"/a\n\n"[..], 2),
            (b"/a\n/b/../../etc\n", 2),
            (b"usr\n", 1),
            (b"/a//b\n", 1),
            (b"/a/\n", 1),
            (b"/a\0\n", 1),
            (b"/a", 1),
        ] {
            assert_eq!(parse_list(bad).unwrap_err().line, line, "{bad:?}");
        }
        let huge = [b"/".as_slice(), &[b'a'; 5000], b"\n"].concat();
        assert!(parse_list(&huge).unwrap_err().reason.contains("longer"));
    }

    #[test]
    fn conffiles_member_as_dpkg_reads_it() {
        let text = b"/etc/a\n\n   \nremove-on-upgrade /etc/b  \n/etc/c d\n";
        assert_eq!(
            parse_conffiles_member(text).unwrap(),
            vec![
                ConffileEntry { path: "/etc/a".into(), remove_on_upgrade: false },
                ConffileEntry { path: "/etc/b".into(), remove_on_upgrade: true },
                ConffileEntry { path: "/etc/c d".into(), remove_on_upgrade: false },
            ]
        );
        for (bad, why) in [
            (&b"etc/a\n"[..], "not absolute"),
            (b"frob /etc/a\n", "unknown conffile flag"),
            (b"remove-on-upgrade etc/a\n", "not absolute"),
            (b"/etc/../shadow\n", "component"),
            (b"/.\n", "root"),
            (b"/etc/a\n/etc/a\n", "twice"),
            (b"/etc/a", "final newline"),
        ] {
            let e = parse_conffiles_member(bad).unwrap_err();
            assert!(e.reason.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn md5sums_as_dpkg_verify_reads_them() {
        let h = "0123456789abcdef0123456789abcdef";
        let text = format!("{h}  usr/bin/a\n{}  ./usr/b/\n{h}  /usr/c d\n", h.to_uppercase());
        let sums = parse_md5sums(text.as_bytes()).unwrap();
        let want: Vec<(String, PathBuf)> = ["/usr/bin/a", "/usr/b", "/usr/c d"]
            .iter()
            .map(|p| (h.to_string(), PathBuf::from(p)))
            .collect();
        assert_eq!(sums, want);
        assert_eq!(
            write_md5sums(&sums),
            format!("{h}  usr/bin/a\n{h}  usr/b\n{h}  usr/c d\n").into_bytes()
        );
        for bad in [
            format!("{h} usr/a\n"),
            format!("{h}  \n"),
            format!("{h}  /\n"),
            format!("{}  usr/a\n", &h[1..]),
            format!("{}g  usr/a\n", &h[1..]),
            format!("{h}  usr/../../etc/shadow\n"),
            format!("{h}  usr//a\n"),
            format!("{h}  usr/a"),
        ] {
            assert!(parse_md5sums(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    /// The info files dpkg --unpack writes read back as dpkg-query reads them, and written again
    /// byte for byte (the md5sums are the ones dpkg computed, the package having none).
    #[test]
    fn info_files_dpkg_writes_read_and_write_back() {
        use crate::dpkg::format::oracle;
        let dir = tempfile::tempdir().unwrap();
        let control = "Package: p\nVersion: 1\nArchitecture: all\nMaintainer: m\nDescription: d\n";
        let files = [("etc/p.conf", "c\n"), ("usr/share/p/a b", "x\n"), ("usr/bin/p", "y\n")];
        let deb = oracle::build(
            dir.path(),
            control,
            Some("/etc/p.conf\nremove-on-upgrade /etc/gone.conf\n"),
            &files,
        );
        let root = oracle::root();
        oracle::unpack(root.path(), &deb);
        let admin = root.path().join("var/lib/dpkg");
        let list_file = std::fs::read(admin.join("info/p.list")).unwrap();
        let list = parse_list(&list_file).unwrap();
        assert_eq!(write_list(&list), list_file);
        let listed = oracle::query(&admin, &["-L", "p"]);
        assert_eq!(list, listed.lines().map(PathBuf::from).collect::<Vec<_>>());
        let sums_file = std::fs::read(admin.join("info/p.md5sums")).unwrap();
        let sums = parse_md5sums(&sums_file).unwrap();
        assert_eq!(write_md5sums(&sums), sums_file);
        let mut summed: Vec<_> = sums.iter().map(|(_, p)| p.clone()).collect();
        summed.sort();
        assert_eq!(summed, paths(&["/etc/p.conf", "/usr/bin/p", "/usr/share/p/a b"]));
        let conffiles =
            parse_conffiles_member(&std::fs::read(admin.join("info/p.conffiles")).unwrap())
                .unwrap();
        assert_eq!(
            conffiles,
            vec![
                ConffileEntry { path: "/etc/p.conf".into(), remove_on_upgrade: false },
                ConffileEntry { path: "/etc/gone.conf".into(), remove_on_upgrade: true },
            ]
        );
    }
}
