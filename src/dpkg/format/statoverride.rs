//! `ADMINDIR/statoverride`: lines of "user group mode path", as lib/dpkg/db-fsys-override.c
//! reads them; and the look-up of a user or group name in the root's own /etc/passwd or
//! /etc/group (never the host's: the names are the root's).

use super::{db_path, lines, shown, ParseError};
use std::collections::HashSet;
use std::path::PathBuf;

/// A user or group: "#0" (a number) or "root" (a name, looked up with [`lookup_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    Num(u32),
    Name(String),
}

/// One override: the owner, group and mode `path` gets, whatever the package says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub user: Id,
    pub group: Id,
    /// At most 0o7777, as dpkg allows.
    pub mode: u32,
    pub path: PathBuf,
}

/// The overrides of the file, in file order; a path overridden twice is an error, as in dpkg.
pub fn parse(bytes: &[u8]) -> Result<Vec<Override>, ParseError> {
    let mut overrides = Vec::new();
    let mut seen = HashSet::new();
    for line in lines(bytes) {
        let (n, line) = line?;
        let entry = parse_line(line).map_err(|e| ParseError::new(n, e))?;
        if !seen.insert(entry.path.clone()) {
            return Err(ParseError::new(
                n,
                format!("a second override for {}", entry.path.display()),
            ));
        }
        overrides.push(entry);
    }
    Ok(overrides)
}

fn parse_line(line: &str) -> Result<Override, String> {
    if line.is_empty() {
        return Err("an empty line".into());
    }
    let mut parts = line.splitn(4, ' ');
    let mut next =
        |what: &str| parts.next().ok_or_else(|| format!("no {what} in '{}'", shown(line)));
    let user = parse_id(next("user")?)?;
    let group = parse_id(next("group")?)?;
    let mode = next("mode")?;
    let path = next("path")?;
    let mode = Some(mode)
        .filter(|m| !m.is_empty() && m.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        .and_then(|m| u32::from_str_radix(m, 8).ok())
        .filter(|&m| m <= 0o7777)
        .ok_or_else(|| format!("bad mode '{}'", shown(mode)))?;
    Ok(Override { user, group, mode, path: db_path(path.as_bytes())? })
}

/// "#N" a number (not u32::MAX, which is (uid_t)-1), else a name as passwd and group hold them:
/// not empty, no ':' and no whitespace.
fn parse_id(text: &str) -> Result<Id, String> {
    let bad = || format!("bad user or group '{}'", shown(text));
    if let Some(number) = text.strip_prefix('#') {
        return Some(number)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&n| n != u32::MAX)
            .map(Id::Num)
            .ok_or_else(bad);
    }
    if text.is_empty() || text.contains(|c: char| c == ':' || c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    Ok(Id::Name(text.to_string()))
}

/// A name looked up in the text of an /etc/passwd (or /etc/group) file: its id, the third field
/// of the first line whose first field is `name` (both files keep the id there).
pub fn lookup_id(etc_file: &[u8], name: &str) -> Option<u32> {
    etc_file.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        (fields.next()? == name.as_bytes()).then_some(())?;
        let id = std::str::from_utf8(fields.nth(1)?).ok()?;
        id.bytes().all(|b| b.is_ascii_digit()).then(|| id.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpkg::format::oracle;

    #[test]
    fn reads_user_group_mode_path() {
        let text = b"root #0 4755 /usr/bin/a\n#1000 staff 0640 /etc/b c\n";
        assert_eq!(
            parse(text).unwrap(),
            vec![
                Override {
                    user: Id::Name("root".into()),
                    group: Id::Num(0),
                    mode: 0o4755,
                    path: "/usr/bin/a".into()
                },
                Override {
                    user: Id::Num(1000),
                    group: Id::Name("staff".into()),
                    mode: 0o640,
                    path: "/etc/b c".into()
                },
            ]
        );
    }

    #[test]
    fn refuses_hostile_or_broken_lines_naming_them() {
        oracle::assert_refuses(
            parse,
            &[
                (&b"root root 0644 /a\n\n"[..], 2, "empty line"),
                (b"root\n", 1, "no group"),
                (b"root root 0644\n", 1, "no path"),
                (b"root root 0644 a\n", 1, "absolute"),
                (b"root root 0644 /a/../../etc\n", 1, "component"),
                (b"root root 0644 /a\0\n", 1, "NUL"),
                (b"root root 10000 /a\n", 1, "mode"),
                (b"root root 0648 /a\n", 1, "mode"),
                (b"root root -1 /a\n", 1, "mode"),
                (b"root root  /a\n", 1, "mode"),
                (b"#x root 0644 /a\n", 1, "user"),
                (b"# root 0644 /a\n", 1, "user"),
                (b"#4294967295 root 0644 /a\n", 1, "user"),
                (b"#99999999999 root 0644 /a\n", 1, "user"),
                (b"root a:b 0644 /a\n", 1, "group"),
                (b"root root 0644 /a\nroot root 0600 /a\n", 2, "second override"),
                (b"root root 0644 /a", 1, "final newline"),
            ],
        );
    }

    #[test]
    fn looks_names_up_in_the_roots_files() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\nbad:x:12x:0::/:\nuser:x:1000:1000::/home/user:/bin/sh\nuser:x:1001:1001::/:\n";
        assert_eq!(lookup_id(passwd, "root"), Some(0));
        assert_eq!(lookup_id(passwd, "user"), Some(1000));
        assert_eq!(lookup_id(passwd, "bad"), None);
        assert_eq!(lookup_id(passwd, "nobody"), None);
        assert_eq!(lookup_id(passwd, "roo"), None);
        assert_eq!(lookup_id(b"staff:x:50:a,b\n", "staff"), Some(50));
        assert_eq!(lookup_id(b"", "root"), None);
    }

    /// The file dpkg-statoverride writes, read here as dpkg-statoverride --list reads it.
    #[test]
    fn reads_what_dpkg_statoverride_writes() {
        let root = oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        let so = |args: &[&str]| {
            oracle::run(
                std::process::Command::new("dpkg-statoverride")
                    .arg(format!("--admindir={}", admin.display()))
                    .args(args),
            )
        };
        so(&["--add", "root", "root", "4755", "/usr/bin/a"]);
        so(&["--add", "#1000", "#50", "640", "/etc/b c"]);
        let ours = parse(&std::fs::read(admin.join("statoverride")).unwrap()).unwrap();
        let show = |id: &Id| match id {
            Id::Num(n) => format!("#{n}"),
            Id::Name(name) => name.clone(),
        };
        let mut ours: Vec<String> = ours
            .iter()
            .map(|o| {
                format!("{} {} {:o} {}", show(&o.user), show(&o.group), o.mode, o.path.display())
            })
            .collect();
        ours.sort();
        let theirs = so(&["--list"]);
        let mut theirs: Vec<&str> = theirs.lines().collect();
        theirs.sort();
        assert_eq!(ours, theirs);
    }
}
