//! dpkg's file formats, in dpkg's own spelling: the status file and control files ([`deb822`],
//! [`status`]), a binary package's control file field by field ([`control`]), the `info/PKG.list` files and the `conffiles` and `md5sums` control members
//! ([`list`]), versions and relations ([`version`]), [`diversions`], [`statoverride`] and the
//! trigger files ([`triggers`]).
//!
//! These are pure: bytes in, values out. They must never touch the filesystem, and every input
//! is an attacker's (a hostile root's database, a hostile package's control member): no panic,
//! no recursion, no work worse than linear in the input's size, and every path and name
//! validated before it leaves them. The real dpkg (1.21) is the oracle for each format; the
//! tests ask it.

pub mod arch;
pub mod control;
pub mod deb822;
pub mod diversions;
pub mod list;
pub mod statoverride;
pub mod status;
pub mod triggers;
pub mod version;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The longest path the database may hold, as the entry checks bound a package's paths.
pub use crate::fs::names::MAX_PATH;

/// An md5sum as dpkg writes it: 32 lowercase hex digits (the `md5sums` member, `Conffiles:`).
pub(crate) fn is_md5(hash: &str) -> bool {
    hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A parse error: 1-based line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

impl ParseError {
    pub(crate) fn new(line: usize, reason: impl Into<String>) -> ParseError {
        ParseError { line, reason: reason.into() }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// A path as dpkg's database holds it: absolute, no empty/"."/".." component, no trailing '/',
/// no NUL or newline, at most 4096 bytes. "/." is the root (dpkg lists it). Returns it as is.
///
/// Stricter than dpkg, which would fold `//` and `/./`: a database that holds them was not
/// written by dpkg, and a name that needs folding is one an attacker chose.
pub fn db_path(bytes: &[u8]) -> Result<PathBuf, String> {
    let show = || shown(bytes);
    if bytes.len() > MAX_PATH {
        return Err(format!("path of {} bytes is longer than {MAX_PATH}", bytes.len()));
    }
    if bytes.contains(&0) || bytes.contains(&b'\n') {
        return Err(format!("path '{}' holds a NUL or a newline", show()));
    }
    if bytes == b"/." {
        return Ok(PathBuf::from("/."));
    }
    let Some(rest) = bytes.strip_prefix(b"/") else {
        return Err(format!("path '{}' is not absolute", show()));
    };
    if rest.split(|&b| b == b'/').any(|c| c.is_empty() || c == b"." || c == b"..") {
        return Err(format!("path '{}' has an empty, '.' or '..' component", show()));
    }
    Ok(PathBuf::from(OsStr::from_bytes(bytes)))
}

/// dpkg's package-name rule (lib/dpkg/parsehelp.c pkg_name_is_illegal): an alphanumeric first,
/// then alphanumerics and `-+._`. ASCII only, so never a '/' or a ':'.
pub fn valid_package_name(name: &str) -> bool {
    valid_name(name, b"-+._")
}

/// dpkg's architecture-name rule (lib/dpkg/arch.c dpkg_arch_name_is_illegal): an alphanumeric
/// first, then alphanumerics and '-'.
pub fn valid_arch(arch: &str) -> bool {
    valid_name(arch, b"-")
}

fn valid_name(name: &str, also: &[u8]) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || also.contains(b))
}

/// How an error shows text from the input: escaped, and cut to its first 200 bytes, so that a
/// hostile file's megabyte line never becomes a megabyte message.
pub(crate) fn shown(text: impl AsRef<[u8]>) -> String {
    const MAX: usize = 200;
    let text = text.as_ref();
    let cut = crate::error::escape(OsStr::from_bytes(&text[..text.len().min(MAX)])).to_string();
    if text.len() > MAX {
        cut + "..."
    } else {
        cut
    }
}

/// dpkg's c_isspace: what its parsers skip and trim.
pub(crate) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// The lines of `bytes` with their 1-based numbers, each without its '\n'; the last is an error
/// if it lacks its newline (dpkg refuses those too). Bytes: dpkg's paths need not be UTF-8.
pub(crate) fn byte_lines(bytes: &[u8]) -> impl Iterator<Item = Result<(usize, &[u8]), ParseError>> {
    let mut rest = bytes;
    let mut n = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        n += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            rest = &[];
            return Some(Err(ParseError::new(n, "missing final newline")));
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        Some(Ok((n, line)))
    })
}

/// [`byte_lines`], each UTF-8 (the error names the line).
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = Result<(usize, &str), ParseError>> {
    byte_lines(bytes).map(|line| {
        let (n, line) = line?;
        std::str::from_utf8(line).map(|l| (n, l)).map_err(|_| ParseError::new(n, "not UTF-8"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_paths_are_absolute_and_plain() {
        for good in ["/.", "/usr", "/usr/bin/a b", "/etc/x.dpkg-new", "/a..b", "/.hidden"] {
            assert_eq!(db_path(good.as_bytes()).unwrap(), PathBuf::from(good), "{good}");
        }
        let long = format!("/{}", "a".repeat(MAX_PATH));
        for bad in [
            "",
            "/",
            "usr",
            "./usr",
            "//usr",
            "/usr/",
            "/usr//bin",
            "/./usr",
            "/usr/.",
            "/..",
            "/a/../b",
            "/a\nb",
            "/a\0b",
            "/..",
        ] {
            assert!(db_path(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(db_path(long.as_bytes()).unwrap_err().contains("longer"));
        assert!(db_path(&long.as_bytes()[..MAX_PATH]).is_ok());
        assert!(db_path(b"/\xff").is_ok(), "dpkg's paths are bytes");
        assert_eq!(
            db_path(format!("a{}", "b".repeat(4000)).as_bytes()).unwrap_err().len(),
            "path '' is not absolute".len() + 203
        );
    }

    #[test]
    fn names_follow_dpkgs_rules() {
        for good in ["a", "libc6", "g++", "foo.bar_baz-1", "0ad", "Foo"] {
            assert!(valid_package_name(good), "{good}");
        }
        for bad in ["", "-a", ".a", "a/b", "a:b", "a b", "é", "a\n", "../x"] {
            assert!(!valid_package_name(bad), "{bad:?}");
        }
        for good in ["amd64", "all", "any", "kfreebsd-i386"] {
            assert!(valid_arch(good), "{good}");
        }
        for bad in ["", "-x", "a_b", "a.b", "a/b", "a:b"] {
            assert!(!valid_arch(bad), "{bad:?}");
        }
    }

    #[test]
    fn lines_need_their_newline_and_utf8() {
        let all: Vec<_> = lines(b"a\n\nb\n").collect();
        assert_eq!(all, vec![Ok((1, "a")), Ok((2, "")), Ok((3, "b"))]);
        assert_eq!(
            lines(b"a\nb").nth(1).unwrap().unwrap_err(),
            ParseError::new(2, "missing final newline")
        );
        assert_eq!(lines(b"a\n\xff\n").nth(1).unwrap().unwrap_err().line, 2);
        assert_eq!(ParseError::new(3, "bad").to_string(), "line 3: bad");
    }
}

/// The real dpkg, the oracle of every format here: admin directories, packages built by
/// dpkg-deb and unpacked by dpkg, what dpkg-query reads back.
#[cfg(test)]
pub(crate) mod oracle {
    use std::path::Path;
    use std::process::Command;

    /// Each input refused by `parse` with an error at its line whose reason says its word.
    pub fn assert_refuses<T: std::fmt::Debug>(
        parse: impl Fn(&[u8]) -> Result<T, super::ParseError>,
        cases: &[(&[u8], usize, &str)],
    ) {
        for (input, line, why) in cases {
            let e = parse(input).unwrap_err();
            assert_eq!(e.line, *line, "{input:?}: {e}");
            assert!(e.reason.contains(why), "{input:?}: {e}");
        }
    }

    /// Runs a command, panicking with its stderr if it fails; its stdout.
    pub fn run(cmd: &mut Command) -> String {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// A root with an empty dpkg admin directory at var/lib/dpkg.
    pub fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let admin = root.path().join("var/lib/dpkg");
        for dir in ["info", "updates"] {
            std::fs::create_dir_all(admin.join(dir)).unwrap();
        }
        std::fs::write(admin.join("status"), "").unwrap();
        root
    }

    /// `dpkg-query --admindir=ADMIN ARGS...`'s output.
    pub fn query(admin: &Path, args: &[&str]) -> String {
        run(Command::new("dpkg-query").arg(format!("--admindir={}", admin.display())).args(args))
    }

    /// Builds a package of `control`, its `conffiles` member and its files (path relative to
    /// the root, content) with dpkg-deb, in `dir`; its path.
    pub fn build(
        dir: &Path,
        control: &str,
        conffiles: Option<&str>,
        files: &[(&str, &str)],
    ) -> std::path::PathBuf {
        let tree = dir.join("tree");
        let _ = std::fs::remove_dir_all(&tree);
        std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
        std::fs::write(tree.join("DEBIAN/control"), control).unwrap();
        if let Some(conffiles) = conffiles {
            std::fs::write(tree.join("DEBIAN/conffiles"), conffiles).unwrap();
        }
        for (path, content) in files {
            let path = tree.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let deb = dir.join("package.deb");
        run(Command::new("dpkg-deb").args(["--build", "--root-owner-group"]).arg(&tree).arg(&deb));
        deb
    }

    /// `dpkg --root=ROOT --force-depends --unpack DEB`.
    pub fn unpack(root: &Path, deb: &Path) {
        run(Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["--force-depends", "--unpack"])
            .arg(deb));
    }
}
