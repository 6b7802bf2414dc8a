//! `ADMINDIR/diversions`: triplets of lines, the diverted path, where it goes instead, and the
//! package that diverts it (":" for a local diversion), as lib/dpkg/db-fsys-divert.c reads them.
//!
//! Both paths are [`db_path`]s, the package name is dpkg's, and no path takes part in two
//! diversions (dpkg refuses "conflicting diversions" too): so a diversion can never send a
//! file outside the root, nor chain one diversion into another.

use super::{db_path, lines, shown, valid_package_name, ParseError};
use std::collections::HashSet;
use std::path::PathBuf;

/// One diversion: `from` is written to `to` instead, unless the package is `by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diversion {
    pub from: PathBuf,
    pub to: PathBuf,
    /// None: ":" (a local diversion, by the administrator).
    pub by: Option<String>,
}

/// The diversions of the file, in file order.
pub fn parse(bytes: &[u8]) -> Result<Vec<Diversion>, ParseError> {
    let mut lines = lines(bytes);
    let mut diversions = Vec::new();
    let mut seen = HashSet::new();
    while let Some(from) = lines.next() {
        let (n, from) = from?;
        let mut next = || {
            lines
                .next()
                .unwrap_or(Err(ParseError::new(n, "a diversion cut short: three lines each")))
        };
        let (to_line, to) = next()?;
        let (by_line, by) = next()?;
        let from = db_path(from.as_bytes()).map_err(|e| ParseError::new(n, e))?;
        let to = db_path(to.as_bytes()).map_err(|e| ParseError::new(to_line, e))?;
        let by = match by {
            ":" => None,
            name if valid_package_name(name) => Some(name.to_ascii_lowercase()),
            name => {
                return Err(ParseError::new(by_line, format!("bad package name '{}'", shown(name))))
            }
        };
        for path in [&from, &to] {
            if path.as_os_str() == "/." || !seen.insert(path.clone()) {
                return Err(ParseError::new(
                    n,
                    format!("conflicting diversions involving {}", path.display()),
                ));
            }
        }
        diversions.push(Diversion { from, to, by });
    }
    Ok(diversions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpkg::format::oracle;

    #[test]
    fn reads_triplets() {
        let text = b"/usr/bin/a\n/usr/bin/a.distrib\nPkg\n/etc/b\n/etc/b.local\n:\n";
        assert_eq!(
            parse(text).unwrap(),
            vec![
                Diversion {
                    from: "/usr/bin/a".into(),
                    to: "/usr/bin/a.distrib".into(),
                    by: Some("pkg".into())
                },
                Diversion { from: "/etc/b".into(), to: "/etc/b.local".into(), by: None },
            ]
        );
        assert_eq!(parse(b"").unwrap(), vec![]);
    }

    #[test]
    fn refuses_hostile_or_broken_files_naming_the_line() {
        oracle::assert_refuses(
            parse,
            &[
                (&b"/a\n/b\n"[..], 1, "cut short"),
                (b"/a\n", 1, "cut short"),
                (b"/a\n/b\npkg", 3, "final newline"),
                (b"/a\n/../etc/shadow\npkg\n", 2, "component"),
                (b"/a\nb\npkg\n", 2, "absolute"),
                (b"/a\n/b\n../x\n", 3, "package name"),
                (b"/a\n/b\na/b\n", 3, "package name"),
                (b"/a\n/b\n\n", 3, "package name"),
                (b"/a\n/a\npkg\n", 1, "conflicting"),
                (b"/a\n/b\npkg\n/b\n/c\npkg\n", 4, "conflicting"),
                (b"/.\n/b\npkg\n", 1, "conflicting"),
                (b"/a\0\n/b\npkg\n", 1, "NUL"),
            ],
        );
    }

    /// The file dpkg-divert writes, read here as dpkg-divert --list reads it.
    #[test]
    fn reads_what_dpkg_divert_writes() {
        let root = oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        let divert = |args: &[&str]| {
            oracle::run(
                std::process::Command::new("dpkg-divert")
                    .arg(format!("--admindir={}", admin.display()))
                    .args(args),
            )
        };
        divert(&[
            "--no-rename",
            "--package",
            "foo",
            "--divert",
            "/usr/bin/a.real",
            "--add",
            "/usr/bin/a",
        ]);
        divert(&["--no-rename", "--local", "--divert", "/etc/b c.local", "--add", "/etc/b c"]);
        let ours = parse(&std::fs::read(admin.join("diversions")).unwrap()).unwrap();
        let mut ours: Vec<String> = ours
            .iter()
            .map(|d| match &d.by {
                Some(p) => {
                    format!("diversion of {} to {} by {p}", d.from.display(), d.to.display())
                }
                None => format!("local diversion of {} to {}", d.from.display(), d.to.display()),
            })
            .collect();
        ours.sort();
        let theirs = divert(&["--list"]);
        let mut theirs: Vec<&str> = theirs.lines().collect();
        theirs.sort();
        assert_eq!(ours, theirs);
    }
}
