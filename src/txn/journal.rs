//! The transaction journal: the renames still to do, on disk before the first of them.
//!
//! A crash in the rename phase would otherwise leave a package half old and half new. So once
//! the barrier has made every temporary file durable, the commit puts `var/lib/unpack/txn`
//! in place (written as `txn.new` before the barrier; for the durable strategies flushed by
//! the barrier or an fsync, renamed, and the rename flushed by a directory fsync), and
//! removes it when the renames are durable. Recovery that finds it finishes the renames: the
//! temporary files it names are already durable, so rolling forward is safe.
//!
//! While a transaction writes, `var/lib/unpack/intent` (empty) marks it in progress. Recovery
//! that finds an intent without a journal rolls back: it removes the engine's temporary names,
//! the new directory trees among them.
//!
//! The format is text, one record a line, with every byte outside printable ASCII (and space
//! and `%`) written as `%XX`, since package names may hold any byte but `/` and NUL. The last
//! line carries the record count and an FNV-1a checksum, so a torn journal is recognised and
//! never half-replayed. This module only encodes and decodes; it never touches the root.
//!
//! A journal is untrusted input, like a package: a hostile root, or anyone who could write the
//! state directory, can plant one, and no token in the root could tell it from the engine's.
//! So decoding accepts only what the engine writes: every name and temporary name is one path
//! component, every temporary name carries the engine's suffix, every directory is a relative
//! path of plain components no deeper than an entry may be, outside the state directory; and
//! no more than [`MAX_BYTES`]. What passes is still resolved by recovery without following
//! anything ([`crate::txn::recover`]): these checks keep each name to one directory, the resolution
//! keeps the directory inside the root.

use crate::fs::names::{NAME_MAX, STATE_DIR, TEMP_SUFFIX};
use crate::read::entry::MAX_DEPTH;
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Version 4 adds what the journal saw at each name (recovery never renames over what changed
/// since). Version 3 (removal records: database mode's files an upgrade drops) and version 2
/// (without them) are still read, and rolled forward unchecked as before; version 1
/// (directory-metadata records, gone since existing directories keep their own) is damaged.
const MAGIC: &str = "unpack-journal 4";
const MAGIC_3: &str = "unpack-journal 3";
const MAGIC_2: &str = "unpack-journal 2";

/// The largest journal the engine writes or reads: 256 MiB. A record is about 100 to 200 bytes
/// (a 100,000-file upgrade writes 15 to 20 MB; an install of new trees one record per tree), and
/// 256 MiB leaves room for long escaped paths; what recovery reads is held in memory, so a
/// planted journal of gigabytes must not be. The encoder refuses to write more, so the engine
/// never writes a journal its recovery would call damaged.
pub const MAX_BYTES: u64 = 256 << 20;

/// One rename to do: `dir/temp` over `dir/name`, `dir` canonical inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameRecord {
    pub dir: PathBuf,
    pub temp: OsString,
    pub name: OsString,
    /// An empty directory or a symlink at `name` is removed just before the rename.
    pub clears_name: bool,
    /// What was at `name` when the journal was written, and the temporary file's inode
    /// (`None`: a journal of before version 4, which did not say).
    pub seen: Option<(Seen, u64)>,
}

/// One removal to do after every rename: `dir/name`, `dir` canonical inside the root; a
/// `directory` only if empty by then (others still hold something in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovalRecord {
    pub dir: PathBuf,
    pub name: OsString,
    pub directory: bool,
    /// What was at `name` when the journal was written (`None`: a journal of before version 4).
    pub seen: Option<Seen>,
}

/// What the journal saw at a name: nothing, or a node whose inode, type and mode, owner, size
/// and mtime anyone who put something else there would have changed: dpkg writing a newer
/// version (a new inode through its rename), an edit (the mtime), a chmod or chown. Not the
/// ctime: an administrator who clears what refused a rename (`chattr -i`, an xattr) changes
/// only that, and recovery must then finish the renames, as the error told them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Nothing,
    Node { ino: u64, mode: u32, owner: (u32, u32), size: i64, mtime: (i64, u64) },
}

impl Seen {
    // The kernel's stat fields have other types on other architectures.
    #[allow(clippy::unnecessary_cast)]
    pub fn of(st: Option<&rustix::fs::Stat>) -> Seen {
        match st {
            None => Seen::Nothing,
            Some(st) => Seen::Node {
                ino: st.st_ino as u64,
                mode: st.st_mode as u32,
                owner: (st.st_uid as u32, st.st_gid as u32),
                size: st.st_size as i64,
                mtime: (st.st_mtime as i64, st.st_mtime_nsec as u64),
            },
        }
    }

    fn encode(&self) -> Vec<u8> {
        match self {
            Seen::Nothing => b"-".to_vec(),
            Seen::Node { ino, mode, owner, size, mtime } => {
                format!("{ino}.{mode}.{}.{}.{size}.{}.{}", owner.0, owner.1, mtime.0, mtime.1)
                    .into_bytes()
            }
        }
    }

    fn decode(field: &[u8]) -> Result<Seen, String> {
        if field == b"-" {
            return Ok(Seen::Nothing);
        }
        let text = std::str::from_utf8(field).map_err(|_| "a stamp that is not text")?;
        let n: Vec<&str> = text.split('.').collect();
        let bad = || format!("bad stamp '{}'", shown(field));
        let [ino, mode, uid, gid, size, ms, mn] = n.as_slice() else { return Err(bad()) };
        Ok(Seen::Node {
            ino: ino.parse().map_err(|_| bad())?,
            mode: mode.parse().map_err(|_| bad())?,
            owner: (uid.parse().map_err(|_| bad())?, gid.parse().map_err(|_| bad())?),
            size: size.parse().map_err(|_| bad())?,
            mtime: (ms.parse().map_err(|_| bad())?, mn.parse().map_err(|_| bad())?),
        })
    }
}

/// What a journal holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    /// `name version` of each package, for the recovery message.
    pub packages: Vec<String>,
    pub renames: Vec<RenameRecord>,
    /// In the order to do them, after the renames.
    pub removals: Vec<RemovalRecord>,
}

impl Journal {
    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new(Vec::new()).expect("writing to a Vec cannot fail");
        self.packages.iter().for_each(|p| e.package(p));
        for r in &self.renames {
            let (seen, ino) = r.seen.unwrap_or((Seen::Nothing, 0));
            e.rename(&r.dir, &r.temp, &r.name, r.clears_name, seen, ino);
        }
        for r in &self.removals {
            e.removal(&r.dir, &r.name, r.directory, r.seen.unwrap_or(Seen::Nothing));
        }
        e.finish().expect("writing to a Vec cannot fail")
    }

    /// Decodes a journal; an error for anything torn, truncated, foreign or not as the engine
    /// writes it (see the module doc).
    pub fn decode(bytes: &[u8]) -> Result<Journal, String> {
        if bytes.len() as u64 > MAX_BYTES {
            return Err(format!(
                "{} bytes, more than the {MAX_BYTES} the engine writes",
                bytes.len()
            ));
        }
        let body_end = bytes
            .iter()
            .rposition(|&b| b == b'E')
            .filter(|&i| i == 0 || bytes[i - 1] == b'\n')
            .ok_or("no trailer")?;
        let (body, trailer) = bytes.split_at(body_end);
        let trailer = std::str::from_utf8(trailer).map_err(|_| "bad trailer")?;
        let mut t = trailer.trim_end().split(' ');
        let (_, count, sum) =
            (t.next(), t.next().ok_or("bad trailer")?, t.next().ok_or("bad trailer")?);
        if u64::from_str_radix(sum, 16).ok() != Some(fnv1a(body)) {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        let magic = lines.next();
        let version = [(MAGIC, 4), (MAGIC_3, 3), (MAGIC_2, 2)]
            .into_iter()
            .find(|(m, _)| magic == Some(m.as_bytes()))
            .map(|(_, v)| v)
            .ok_or("not an unpack journal of this version")?;
        let (rename_fields, removal_fields) = if version == 4 { (7, 5) } else { (5, 4) };
        let mut j = Journal::default();
        for l in lines {
            let f: Vec<Vec<u8>> =
                l.split(|&b| b == b' ').map(unescape).collect::<Result<_, _>>()?;
            let bad = |why: &str| format!("record '{}': {why}", shown(l));
            match (f[0].as_slice(), f.len()) {
                (b"P", 2) => j.packages.push(String::from_utf8_lossy(&f[1]).into_owned()),
                (b"R", n) if n == rename_fields && j.removals.is_empty() => {
                    j.renames.push(rename_record(&f).map_err(|why| bad(&why))?)
                }
                (b"X", n) if n == removal_fields && version >= 3 => {
                    j.removals.push(removal_record(&f).map_err(|why| bad(&why))?)
                }
                _ => return Err(bad("unknown, or out of order")),
            }
        }
        if count.parse::<usize>().ok()
            != Some(j.packages.len() + j.renames.len() + j.removals.len())
        {
            return Err("record count mismatch".into());
        }
        Ok(j)
    }
}

/// A rename record's fields (`R dir temp name flag [seen temp-inode]`), each checked as the
/// engine writes it.
fn rename_record(f: &[Vec<u8>]) -> Result<RenameRecord, String> {
    let (dir, temp, name) = (&f[1], &f[2], &f[3]);
    check_dir(dir)?;
    check_name(name).map_err(|why| format!("name {why}"))?;
    check_name(temp).map_err(|why| format!("temporary name {why}"))?;
    if !temp.ends_with(TEMP_SUFFIX.as_bytes()) || temp == name {
        return Err(format!(
            "a temporary name must end in '{TEMP_SUFFIX}' and differ from its name"
        ));
    }
    let clears_name = match f[4].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return Err("bad flag".into()),
    };
    let seen = match (f.get(5), f.get(6)) {
        (Some(seen), Some(ino)) => {
            let ino = std::str::from_utf8(ino).ok().and_then(|i| i.parse().ok());
            Some((Seen::decode(seen)?, ino.ok_or("bad inode")?))
        }
        _ => None,
    };
    Ok(RenameRecord {
        dir: PathBuf::from(OsString::from_vec(dir.clone())),
        temp: OsString::from_vec(temp.clone()),
        name: OsString::from_vec(name.clone()),
        clears_name,
        seen,
    })
}

/// A removal record's fields (`X dir name flag [seen]`).
fn removal_record(f: &[Vec<u8>]) -> Result<RemovalRecord, String> {
    let (dir, name) = (&f[1], &f[2]);
    check_dir(dir)?;
    check_name(name).map_err(|why| format!("name {why}"))?;
    let directory = match f[3].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return Err("bad flag".into()),
    };
    let seen = f.get(4).map(|s| Seen::decode(s)).transpose()?;
    Ok(RemovalRecord {
        dir: PathBuf::from(OsString::from_vec(dir.clone())),
        name: OsString::from_vec(name.clone()),
        directory,
        seen,
    })
}

/// One name in a directory: what renameat, unlinkat and statat may be given.
fn check_name(name: &[u8]) -> Result<(), String> {
    match name {
        b"" | b"." | b".." => Err(format!("'{}' is not a name", String::from_utf8_lossy(name))),
        _ if name.contains(&b'/') || name.contains(&0) => Err("holds '/' or NUL".into()),
        _ if name.len() > NAME_MAX => {
            Err(format!("of {} bytes is longer than {NAME_MAX}", name.len()))
        }
        _ => Ok(()),
    }
}

/// A directory relative to the root (empty for the root itself): plain names only, as deep as
/// a package's entries may be (`entry::MAX_DEPTH`), not the engine's state directory.
fn check_dir(dir: &[u8]) -> Result<(), String> {
    if dir.is_empty() {
        return Ok(());
    }
    let mut depth = 0;
    for part in dir.split(|&b| b == b'/') {
        check_name(part).map_err(|why| format!("directory '{}': a component {why}", shown(dir)))?;
        depth += 1;
    }
    if depth >= MAX_DEPTH {
        return Err(format!(
            "directory of {depth} components: entries are at most {MAX_DEPTH} deep"
        ));
    }
    if Path::new(OsStr::from_bytes(dir)).starts_with(STATE_DIR) {
        return Err(format!("directory in the engine's state directory {STATE_DIR}"));
    }
    Ok(())
}

/// `bytes` for a message: escaped (a journal may hold terminal escapes) and cut after 100
/// bytes (a line may be megabytes).
fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(100)];
    let more = if cut.len() < bytes.len() { "..." } else { "" };
    format!("{}{more}", crate::error::escape(std::ffi::OsStr::from_bytes(cut)))
}

/// A journal of `records` (lines as the encoder writes them, magic line and trailer left out)
/// with a valid magic line, count and checksum, whatever the lines hold: how tests and the
/// fuzzer reach recovery with records the encoder never writes. An error only past
/// [`MAX_BYTES`].
#[cfg(any(test, feature = "fuzzing"))]
pub fn seal(records: &[u8]) -> io::Result<Vec<u8>> {
    let mut e = Encoder::new(Vec::new())?;
    for line in records.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        e.put(&[line, b"\n"].concat());
    }
    e.finish()
}

/// Writes a journal record by record, so that a transaction of 100,000 files never holds its
/// encoded journal in memory. The first write error is kept and returned by `finish`, and so
/// is a journal that would grow beyond [`MAX_BYTES`] (the trailer has room to spare).
pub struct Encoder<W: Write> {
    w: W,
    hash: u64,
    count: usize,
    bytes: u64,
    error: Option<io::Error>,
}

impl<W: Write> Encoder<W> {
    pub fn new(w: W) -> io::Result<Encoder<W>> {
        let mut e = Encoder { w, hash: FNV_OFFSET, count: 0, bytes: 0, error: None };
        e.put(format!("{MAGIC}\n").as_bytes());
        e.count = 0;
        e.error.take().map_or(Ok(e), Err)
    }

    pub fn package(&mut self, name_version: &str) {
        self.record(&[b"P", &escape(name_version.as_bytes())]);
    }

    /// `seen` is what is at `name` now, `temp_ino` the temporary file's inode.
    pub fn rename(
        &mut self,
        dir: &Path,
        temp: &OsStr,
        name: &OsStr,
        clears_name: bool,
        seen: Seen,
        temp_ino: u64,
    ) {
        let flag: &[u8] = if clears_name { b"1" } else { b"0" };
        self.record(&[
            b"R",
            &escape_path(dir),
            &escape(temp.as_bytes()),
            &escape(name.as_bytes()),
            flag,
            &seen.encode(),
            temp_ino.to_string().as_bytes(),
        ]);
    }

    /// After every rename; `seen` is what is at `name` now.
    pub fn removal(&mut self, dir: &Path, name: &OsStr, directory: bool, seen: Seen) {
        let flag: &[u8] = if directory { b"1" } else { b"0" };
        self.record(&[b"X", &escape_path(dir), &escape(name.as_bytes()), flag, &seen.encode()]);
    }

    /// Writes the trailer (count and checksum) and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        let trailer = format!("E {} {:016x}\n", self.count, self.hash);
        if self.error.is_none() {
            self.error = self.w.write_all(trailer.as_bytes()).err();
        }
        self.error.map_or(Ok(self.w), Err)
    }

    fn record(&mut self, fields: &[&[u8]]) {
        let mut l = fields.join(&b' ');
        l.push(b'\n');
        self.put(&l);
    }

    fn put(&mut self, bytes: &[u8]) {
        self.count += 1;
        self.hash = fnv1a_extend(self.hash, bytes);
        self.bytes += bytes.len() as u64;
        if self.bytes > MAX_BYTES - 64 && self.error.is_none() {
            let why = format!("the transaction's journal would exceed {MAX_BYTES} bytes: unpack fewer packages at once");
            self.error = Some(io::Error::new(io::ErrorKind::FileTooLarge, why));
        }
        if self.error.is_none() {
            self.error = self.w.write_all(bytes).err();
        }
    }
}

/// An empty path (the root) is written as `.`.
fn escape_path(p: &Path) -> Vec<u8> {
    if p.as_os_str().is_empty() {
        b".".to_vec()
    } else {
        escape(p.as_os_str().as_bytes())
    }
}

fn escape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if b <= b' ' || b == b'%' || b >= 0x7f {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

fn unescape(field: &[u8]) -> Result<Vec<u8>, String> {
    if field == b"." {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'%' {
            let hex = field
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .ok_or("bad escape")?;
            // Two hex digits: ASCII, and at most 0xff.
            out.push(
                u8::from_str_radix(std::str::from_utf8(hex).map_err(|_| "bad escape")?, 16)
                    .map_err(|_| "bad escape")?,
            );
            i += 3;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// FNV-1a, 64 bit: detects a torn or truncated journal; it is not a defence against an
/// attacker, who could write the root anyway.
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a_extend(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Journal {
        Journal {
            packages: vec!["pkg 2.0".into()],
            renames: vec![
                RenameRecord {
                    dir: PathBuf::new(),
                    temp: "a.unpack-new".into(),
                    name: "a".into(),
                    clears_name: false,
                    seen: Some((Seen::Nothing, 12)),
                },
                RenameRecord {
                    dir: PathBuf::from("usr/share/we ird%"),
                    temp: OsString::from_vec(b"new\nline\xff.unpack-new".to_vec()),
                    name: OsString::from_vec(b"new\nline\xff".to_vec()),
                    clears_name: true,
                    seen: Some((
                        Seen::Node {
                            ino: 7,
                            mode: 0o40755,
                            owner: (3, 4),
                            size: 4096,
                            mtime: (-1, 2),
                        },
                        8,
                    )),
                },
            ],
            removals: vec![
                RemovalRecord {
                    dir: PathBuf::from("usr/share/doc"),
                    name: "dropped".into(),
                    directory: false,
                    seen: Some(Seen::Node {
                        ino: 9,
                        mode: 0o100644,
                        owner: (7, 8),
                        size: 1,
                        mtime: (5, 6),
                    }),
                },
                RemovalRecord {
                    dir: PathBuf::from("usr/share"),
                    name: OsString::from_vec(b"old\ndir".to_vec()),
                    directory: true,
                    seen: Some(Seen::Nothing),
                },
            ],
        }
    }

    /// A journal as the engine would write it, holding one rename record of these raw fields.
    fn with_record(dir: &[u8], temp: &[u8], name: &[u8]) -> Vec<u8> {
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.rename(
            Path::new(OsStr::from_bytes(dir)),
            OsStr::from_bytes(temp),
            OsStr::from_bytes(name),
            false,
            Seen::Nothing,
            1,
        );
        e.finish().unwrap()
    }

    /// A journal whose body is `lines` as they are, with a valid trailer.
    fn with_lines(lines: &[&[u8]]) -> Vec<u8> {
        seal(&lines.join(&b'\n')).unwrap()
    }

    #[test]
    fn round_trips_any_bytes() {
        let j = sample();
        assert_eq!(Journal::decode(&j.encode()).unwrap(), j);
    }

    #[test]
    fn a_torn_or_altered_journal_is_refused() {
        let bytes = sample().encode();
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 2] {
            assert!(Journal::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        assert!(Journal::decode(&flipped).is_err());
    }

    #[test]
    fn names_that_leave_their_directory_are_damage() {
        assert!(Journal::decode(&with_record(b"usr/bin", b"tool.unpack-new", b"tool")).is_ok());
        let deep = b"d/".repeat(MAX_DEPTH - 2);
        assert!(
            Journal::decode(&with_record(&deep[..deep.len() - 1], b"f.unpack-new", b"f")).is_ok(),
            "as deep as an entry's directory"
        );
        // (directory, temporary name, name, why)
        type Case<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a str);
        let cases: &[Case] = &[
            (b"", b"/etc/shadow.unpack-new", b"a", "holds '/'"),
            (b"", b"/tmp/x", b"/etc/shadow", "holds '/'"),
            (b"", b"a.unpack-new", b"../a", "holds '/'"),
            (b"", b"..", b"a", "is not a name"),
            (b"", b"a.unpack-new", b"..", "is not a name"),
            (b"", b"a.unpack-new", b"x\0y", "holds '/' or NUL"),
            (b"", b"a", b"b", "must end in '.unpack-new'"),
            (b"", b"a.unpack-new", b"a.unpack-new", "differ from its name"),
            (b"/etc", b"a.unpack-new", b"a", "is not a name"),
            (b"usr/../..", b"a.unpack-new", b"a", "is not a name"),
            (b"usr//bin", b"a.unpack-new", b"a", "is not a name"),
            (b"usr/./bin", b"a.unpack-new", b"a", "is not a name"),
            (b"usr/", b"a.unpack-new", b"a", "is not a name"),
            (b"var/lib/unpack", b"txn.unpack-new", b"txn", "state directory"),
        ];
        for (dir, temp, name, why) in cases {
            let e = Journal::decode(&with_record(dir, temp, name)).unwrap_err();
            assert!(e.contains(why), "{dir:?} {temp:?} {name:?}: {e}");
        }
        let too_deep = b"d/".repeat(MAX_DEPTH);
        assert!(Journal::decode(&with_record(
            &too_deep[..too_deep.len() - 1],
            b"f.unpack-new",
            b"f"
        ))
        .unwrap_err()
        .contains("at most"));
        let long = vec![b'n'; NAME_MAX + 1];
        assert!(Journal::decode(&with_record(b"", b"a.unpack-new", &long))
            .unwrap_err()
            .contains("longer than 255"));
        let e =
            Journal::decode(&with_lines(&[&[b"R \x1b[2J ".as_slice(), &[b'x'; 1000]].concat()]))
                .unwrap_err();
        assert!(
            e.starts_with("record 'R \\033[2J xxx")
                && e.contains("xxx...': unknown")
                && e.len() < 200,
            "escaped and cut: {e}"
        );
    }

    #[test]
    fn unknown_records_old_versions_and_oversized_journals_are_damage() {
        // The directory-metadata record of version 1.
        let e = Journal::decode(&with_lines(&[b"M usr 755 0 0 0 0"])).unwrap_err();
        assert!(e.contains("unknown"), "{e}");
        assert!(Journal::decode(&with_lines(&[b"R . a.unpack-new a 2 - 1"]))
            .unwrap_err()
            .contains("bad flag"));
        assert!(Journal::decode(&with_lines(&[b"R . a%2Funpack-new a 0 - 1"]))
            .unwrap_err()
            .contains("'/'"));
        assert!(Journal::decode(&with_lines(&[b"R . a.unpack-new %+f 0 - 1"]))
            .unwrap_err()
            .contains("bad escape"));
        assert!(Journal::decode(&with_lines(&[b"R . a.unpack-new a 0 1.2.3 1"]))
            .unwrap_err()
            .contains("bad stamp"));
        assert!(Journal::decode(&with_lines(&[b"R . a.unpack-new a 0 - x"]))
            .unwrap_err()
            .contains("bad inode"));
        let v1 = String::from_utf8(sample().encode()).unwrap().replace(MAGIC, "unpack-journal 1");
        assert!(Journal::decode(v1.as_bytes()).is_err(), "an older version's journal");
        let huge = vec![b'E'; MAX_BYTES as usize + 1];
        assert!(Journal::decode(&huge).unwrap_err().contains("more than"));
    }

    /// A version 2 journal (renames only, no stamps) still recovers, its records unchecked;
    /// removal records exist only from version 3, and only after every rename.
    #[test]
    fn version_2_is_read_and_removals_come_last() {
        let mut j = sample();
        j.removals.clear();
        for r in &mut j.renames {
            r.seen = None;
        }
        // A journal under another magic line, sealed with its count and checksum.
        let sealed_as = |magic: &str, body: &str| {
            let text = format!("{magic}\n{body}");
            format!("{text}E {} {:016x}\n", body.lines().count(), fnv1a(text.as_bytes()))
                .into_bytes()
        };
        let encoded = String::from_utf8(j.encode()).unwrap();
        let body = &encoded[encoded.find('\n').unwrap() + 1..encoded.rfind("E ").unwrap()];
        // Version 2's rename records: the stamps (the last two fields) left out.
        let v2: String = body
            .lines()
            .map(|l| match l.starts_with("R ") {
                true => l.rsplitn(3, ' ').nth(2).unwrap().to_string() + "\n",
                false => format!("{l}\n"),
            })
            .collect();
        assert_eq!(Journal::decode(&sealed_as(MAGIC_2, &v2)).unwrap(), j);
        let mut stamped = j.clone();
        stamped.renames.iter_mut().for_each(|r| r.seen = Some((Seen::Nothing, 0)));
        assert_eq!(
            Journal::decode(&sealed_as(MAGIC, body)).unwrap(),
            stamped,
            "the sealing is the encoder's"
        );
        let with_x = sealed_as(MAGIC_2, "X usr a 0\n");
        assert!(
            Journal::decode(&with_x).unwrap_err().contains("unknown"),
            "a removal in a version 2 journal"
        );
        let e = Journal::decode(&with_lines(&[b"X usr a 0 -", b"R . a.unpack-new a 0 - 1"]))
            .unwrap_err();
        assert!(e.contains("out of order"), "{e}");
        assert!(Journal::decode(&with_lines(&[b"X ../usr a 0 -"]))
            .unwrap_err()
            .contains("is not a name"));
        assert!(Journal::decode(&with_lines(&[b"X usr a/b 0 -"])).unwrap_err().contains("'/'"));
        assert!(Journal::decode(&with_lines(&[b"X var/lib/unpack txn 0 -"]))
            .unwrap_err()
            .contains("state directory"));
    }

    #[test]
    fn the_encoder_refuses_to_write_more_than_recovery_reads() {
        let mut e = Encoder::new(std::io::sink()).unwrap();
        let name = OsString::from("n".repeat(200));
        let temp = crate::fs::names::temp_name(&name);
        for _ in 0..(MAX_BYTES / 400) {
            e.rename(Path::new("usr/share"), &temp, &name, false, Seen::Nothing, 1);
        }
        assert_eq!(e.finish().unwrap_err().kind(), io::ErrorKind::FileTooLarge);
    }
}
