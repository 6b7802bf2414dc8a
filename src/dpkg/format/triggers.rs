//! Triggers, recorded at unpack where and as dpkg records them (dpkg's doc/spec/triggers.txt,
//! lib/dpkg/triglib.c), so that `dpkg --configure -a` runs them:
//! - a package's `triggers` control member declares interests (`interest[-await|-noawait]
//!   NAME`) and activations (`activate[-await|-noawait] NAME`); a NAME starting with `/` is a
//!   file trigger, any other an explicit one;
//! - file interests live in `ADMIN/triggers/File` (`PATH PACKAGE[/noawait]` a line), explicit
//!   ones in `ADMIN/triggers/NAME` (`PACKAGE[/noawait]` a line);
//! - a path a package of the call writes or removes at or below an interest's PATH, and a
//!   package's own `activate NAME`, make the trigger pending on each interested package that is
//!   installed (`Triggers-Pending`, status `triggers-pending`); a file trigger activated with
//!   await also leaves the activating package `Triggers-Awaited` on it. A package that is only
//!   unpacked runs its postinst configure anyway: nothing is pending on it.
//!
//! Pure, like the formats: the files' bytes in, their new bytes and the status changes out.

use super::ParseError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One directive of a `triggers` control member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub interest: bool,
    pub noawait: bool,
    pub name: String,
}

impl Directive {
    pub fn is_file(&self) -> bool {
        self.name.starts_with('/')
    }
}

/// The longest line of a `triggers` member dpkg reads, its newline not counted
/// (lib/dpkg/triglib.c: `MAXTRIGDIRECTIVE`, 256 bytes with the newline and the NUL).
pub const MAX_DIRECTIVE: usize = 254;

/// A `triggers` control member, as dpkg reads it (lib/dpkg/triglib.c trig_parse_ci): lines of
/// at most [`MAX_DIRECTIVE`] bytes, each with its newline; blanks (space, tab) trimmed, `#`
/// comments and blank lines skipped, an unknown directive refused; a name of printable ASCII
/// (trigname.c). A name is classified as dpkg classifies it (trig_classify_byname): a file
/// trigger starts with `/` and has no `//` and no trailing `/`; an explicit one is a package
/// name without `_`; any other name is refused in an interest, and an activation of it is
/// dropped, as dpkg ignores it. File triggers' paths are [`db_path`](super::db_path)s here: a
/// `.` or `..` component, which dpkg would keep, is refused.
pub fn parse_member(bytes: &[u8]) -> Result<Vec<Directive>, ParseError> {
    let mut out = Vec::new();
    for line in super::byte_lines(bytes) {
        let (n, line) =
            line.map_err(|e| ParseError::new(e.line, "too-long line or missing newline"))?;
        let bad = |why: String| ParseError::new(n, why);
        if line.len() > MAX_DIRECTIVE || line.contains(&0) {
            return Err(bad(format!(
                "too-long line or missing newline (dpkg reads at most {MAX_DIRECTIVE} bytes)"
            )));
        }
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
        let end = line.iter().rposition(|b| !blank(b)).map_or(start, |i| i + 1);
        let line = &line[start..end.max(start)];
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let Some(split) = line.iter().position(blank) else {
            return Err(bad("triggers ci file contains unknown directive syntax".into()));
        };
        let (cmd, rest) = line.split_at(split);
        let name = &rest[rest.iter().position(|b| !blank(b)).unwrap_or(rest.len())..];
        let (interest, noawait) = match cmd {
            b"interest" | b"interest-await" => (true, false),
            b"interest-noawait" => (true, true),
            b"activate" | b"activate-await" => (false, false),
            b"activate-noawait" => (false, true),
            _ => {
                return Err(bad(format!(
                    "triggers ci file contains unknown directive '{}'",
                    super::shown(cmd)
                )))
            }
        };
        if name.is_empty() || name.iter().any(|&b| b <= b' ' || b >= 0x7f) {
            return Err(bad(format!(
                "illegal trigger syntax in trigger name '{}': trigger name contains invalid character",
                super::shown(name)
            )));
        }
        // Printable ASCII: UTF-8.
        let name = String::from_utf8_lossy(name).into_owned();
        match classify(&name) {
            Class::Unknown if interest => {
                return Err(bad(format!(
                    "invalid or unknown syntax in trigger name '{name}' (in trigger interests)"
                )))
            }
            Class::Unknown => continue,
            Class::File => {
                super::db_path(name.as_bytes()).map_err(bad)?;
            }
            Class::Explicit => {}
        }
        out.push(Directive { interest, noawait, name });
    }
    Ok(out)
}

/// What a trigger name is.
#[derive(Debug, PartialEq, Eq)]
enum Class {
    File,
    Explicit,
    Unknown,
}

/// lib/dpkg/triglib.c trig_classify_byname.
fn classify(name: &str) -> Class {
    if name.starts_with('/') {
        if name.ends_with('/') || name.contains("//") {
            Class::Unknown
        } else {
            Class::File
        }
    } else if super::valid_package_name(name) && !name.contains('_') {
        Class::Explicit
    } else {
        Class::Unknown
    }
}

/// One line of `triggers/File` or of an explicit trigger's file: who is interested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// The path, for a file trigger (empty in an explicit trigger's file).
    pub path: PathBuf,
    /// The package as dpkg names it there (`pkg`, or `pkg:arch` for Multi-Arch: same).
    pub package: String,
    pub noawait: bool,
}

/// `triggers/File`: `PATH PACKAGE[/noawait]` a line.
pub fn parse_file_interests(bytes: &[u8]) -> Result<Vec<Interest>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::new(0, "not UTF-8"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let (path, who) =
                line.rsplit_once(' ').ok_or_else(|| ParseError::new(i + 1, "no package"))?;
            let path = super::db_path(path.as_bytes()).map_err(|e| ParseError::new(i + 1, e))?;
            let (package, noawait) = package_spec(who).map_err(|e| ParseError::new(i + 1, e))?;
            Ok(Interest { path, package, noawait })
        })
        .collect()
}

/// An explicit trigger's file: `PACKAGE[/noawait]` a line.
pub fn parse_explicit(bytes: &[u8]) -> Result<Vec<Interest>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::new(0, "not UTF-8"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let (package, noawait) =
                package_spec(line.trim()).map_err(|e| ParseError::new(i + 1, e))?;
            Ok(Interest { path: PathBuf::new(), package, noawait })
        })
        .collect()
}

fn package_spec(who: &str) -> Result<(String, bool), String> {
    let (package, noawait) = match who.strip_suffix("/noawait") {
        Some(p) => (p, true),
        None => (who, false),
    };
    let name = package.split_once(':').map_or(package, |(n, _)| n);
    if !super::valid_package_name(name) {
        return Err(format!("bad package '{}'", crate::error::escape(package)));
    }
    Ok((package.to_string(), noawait))
}

/// The lines of `triggers/File` or an explicit trigger's file, as dpkg writes them.
pub fn write_interests(interests: &[Interest], file: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for i in interests {
        if file {
            out.extend_from_slice(i.path.as_os_str().as_encoded_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(i.package.as_bytes());
        if i.noawait {
            out.extend_from_slice(b"/noawait");
        }
        out.push(b'\n');
    }
    out
}

/// The file interests by path, so that activating costs a lookup per path (and per parent of a
/// removed one), whatever the number of interests: a package of N interests and N paths matched
/// one by one was N squared (16,000 of each: 11.6 s of CPU under dpkg's lock). As dpkg keeps
/// them on its file nodes (lib/dpkg/triglib.c).
pub struct FileTable<'a> {
    by_path: HashMap<&'a Path, Vec<&'a Interest>>,
}

/// Every lookup of every [`FileTable`] of the process, for the tests that hold the work of
/// matching linear (the `fuzzing` feature: this package's tests and fuzz/).
#[cfg(feature = "fuzzing")]
pub static LOOKUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<'a> FileTable<'a> {
    pub fn new(interests: &'a [Interest]) -> FileTable<'a> {
        let mut by_path: HashMap<&Path, Vec<&Interest>> = HashMap::new();
        for i in interests {
            by_path.entry(i.path.as_path()).or_default().push(i);
        }
        FileTable { by_path }
    }

    /// The interests a package's entry at `path` activates: those in exactly that path, as
    /// dpkg's tarobject activates them (a file below an interest activates it through its
    /// package's directory entries, which every package has).
    pub fn at(&self, path: &Path) -> &[&'a Interest] {
        #[cfg(feature = "fuzzing")]
        LOOKUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.by_path.get(path).map_or(&[], Vec::as_slice)
    }

    /// The interests a removed path, or an `activate /PATH` directive, activates: those in the
    /// path and in each of its parents (dpkg's trig_path_activate).
    pub fn at_or_above<'p>(&'p self, path: &'p Path) -> impl Iterator<Item = &'a Interest> + 'p {
        path.ancestors().flat_map(move |p| self.at(p).iter().copied())
    }
}

/// One line of `triggers/Unincorp`: the activations a `dpkg-trigger` in a maintainer script
/// queued, `TRIGGER AWAITER...` (`-` for none), as lib/dpkg/trigdeferred.c reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    pub trigger: String,
    /// The packages that await it (`NAME` or `NAME:ARCH`).
    pub awaiters: Vec<String>,
}

/// `triggers/Unincorp`: a trigger name of printable ASCII, then package names of
/// `[0-9a-z+.:-]` or `-`.
pub fn parse_unincorp(bytes: &[u8]) -> Result<Vec<Deferred>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::new(0, "not UTF-8"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_ascii_whitespace();
        let Some(trigger) = words.next() else { continue };
        let bad = |why: String| ParseError::new(i + 1, why);
        if !trigger.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(format!("bad trigger name '{}'", crate::error::escape(trigger))));
        }
        let mut awaiters = Vec::new();
        for who in words.filter(|w| *w != "-") {
            let ok = who
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'+' | b'.' | b':' | b'-'));
            let name = who.split_once(':').map_or(who, |(n, _)| n);
            if !ok || !super::valid_package_name(name) {
                return Err(bad(format!("bad package '{}'", crate::error::escape(who))));
            }
            awaiters.push(who.to_string());
        }
        out.push(Deferred { trigger: trigger.to_string(), awaiters });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_files_and_activation_read_as_dpkg_writes_them() {
        let d = parse_member(b"# a comment\n\ninterest /usr/share/man\ninterest-noawait ldconfig\nactivate-noawait x-y\n").unwrap();
        assert_eq!(d.len(), 3);
        assert!(d[0].interest && !d[0].noawait && d[0].is_file());
        assert!(d[1].interest && d[1].noawait && !d[1].is_file());
        assert!(!d[2].interest && d[2].noawait);
        assert!(parse_member(b"frobnicate x\n").unwrap_err().reason.contains("unknown"));
        assert!(parse_member(b"interest /usr/../etc\n").is_err());
        assert!(parse_member(b"interest a/b\n").is_err());
        let file = b"/usr/share/man man-db\n/usr/lib libc-bin/noawait\n";
        let parsed = parse_file_interests(file).unwrap();
        assert_eq!(
            parsed[1],
            Interest { path: "/usr/lib".into(), package: "libc-bin".into(), noawait: true }
        );
        assert_eq!(write_interests(&parsed, true), file);
        assert!(parse_file_interests(b"/x ../evil\n").is_err());
        assert_eq!(
            write_interests(&parse_explicit(b"a\nb:amd64/noawait\n").unwrap(), false),
            b"a\nb:amd64/noawait\n"
        );
        let table = FileTable::new(&parsed);
        assert_eq!(table.at(Path::new("/usr/share/man")).len(), 1);
        assert!(
            table.at(Path::new("/usr/share/man/man1")).is_empty(),
            "an entry activates its own path"
        );
        let removed = Path::new("/usr/share/man/man1/x.1.gz");
        assert_eq!(
            table.at_or_above(removed).map(|i| i.package.as_str()).collect::<Vec<_>>(),
            ["man-db"]
        );
        assert!(table.at_or_above(Path::new("/usr/share/manx")).next().is_none());
        let deferred = parse_unincorp(b"ldconfig - \n/usr/share/icons foo:amd64 bar\n").unwrap();
        assert_eq!(deferred[0], Deferred { trigger: "ldconfig".into(), awaiters: vec![] });
        assert_eq!(deferred[1].awaiters, ["foo:amd64", "bar"]);
        assert!(parse_unincorp(b"x Bad\n").is_err());
    }
}
