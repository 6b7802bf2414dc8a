//! The transaction journal: the renames still to do, on disk before the first of them.
//!
//! A crash in the rename phase would otherwise leave a package half old and half new. So once
//! the barrier has made every temporary file durable, the commit writes `var/lib/unpack/txn`
//! (through `txn.new`, fsync, rename and a directory fsync for the durable strategies), and
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

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// File names inside the state directory.
pub const JOURNAL: &str = "txn";
pub const JOURNAL_NEW: &str = "txn.new";
pub const INTENT: &str = "intent";

const MAGIC: &str = "unpack-journal 1";

/// One rename to do: `dir/temp` over `dir/name`, `dir` canonical inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameRecord {
    pub dir: PathBuf,
    pub temp: OsString,
    pub name: OsString,
    pub replaces_empty_dir: bool,
}

/// A package directory's metadata, applied after the renames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMetaRecord {
    pub dir: PathBuf,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, u32),
}

/// What a journal holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    /// `name version` of each package, for the recovery message.
    pub packages: Vec<String>,
    pub renames: Vec<RenameRecord>,
    pub dir_meta: Vec<DirMetaRecord>,
}

impl Journal {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new(Vec::new()).expect("writing to a Vec cannot fail");
        self.packages.iter().for_each(|p| e.package(p));
        self.renames.iter().for_each(|r| e.rename(&r.dir, &r.temp, &r.name, r.replaces_empty_dir));
        self.dir_meta.iter().for_each(|m| e.dir_meta(m));
        e.finish().expect("writing to a Vec cannot fail")
    }

    /// Decodes a journal; an error for anything torn, truncated or foreign.
    pub fn decode(bytes: &[u8]) -> Result<Journal, String> {
        let body_end = bytes.iter().rposition(|&b| b == b'E').filter(|&i| i == 0 || bytes[i - 1] == b'\n').ok_or("no trailer")?;
        let (body, trailer) = bytes.split_at(body_end);
        let trailer = std::str::from_utf8(trailer).map_err(|_| "bad trailer")?;
        let mut t = trailer.trim_end().split(' ');
        let (_, count, sum) = (t.next(), t.next().ok_or("bad trailer")?, t.next().ok_or("bad trailer")?);
        if u64::from_str_radix(sum, 16).ok() != Some(fnv1a(body)) {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        if lines.next() != Some(MAGIC.as_bytes()) {
            return Err("not an unpack journal".into());
        }
        let mut j = Journal::default();
        for l in lines {
            let f: Vec<Vec<u8>> = l.split(|&b| b == b' ').map(unescape).collect::<Result<_, _>>()?;
            let text = |i: usize| std::str::from_utf8(&f[i]).map_err(|_| "bad number".to_string());
            let num = |i: usize| text(i)?.parse::<i64>().map_err(|_| "bad number".to_string());
            match (f[0].as_slice(), f.len()) {
                (b"P", 2) => j.packages.push(String::from_utf8_lossy(&f[1]).into_owned()),
                (b"R", 5) => j.renames.push(RenameRecord {
                    dir: PathBuf::from(OsString::from_vec(f[1].clone())),
                    temp: OsString::from_vec(f[2].clone()),
                    name: OsString::from_vec(f[3].clone()),
                    replaces_empty_dir: f[4] == b"1",
                }),
                (b"M", 7) => j.dir_meta.push(DirMetaRecord {
                    dir: PathBuf::from(OsString::from_vec(f[1].clone())),
                    mode: u32::from_str_radix(text(2)?, 8).map_err(|_| "bad mode")?,
                    uid: u32::try_from(num(3)?).map_err(|_| "bad uid")?,
                    gid: u32::try_from(num(4)?).map_err(|_| "bad gid")?,
                    mtime: (num(5)?, u32::try_from(num(6)?).map_err(|_| "bad mtime")?),
                }),
                _ => return Err(format!("bad record '{}'", String::from_utf8_lossy(l))),
            }
        }
        if count.parse::<usize>().ok() != Some(j.packages.len() + j.renames.len() + j.dir_meta.len()) {
            return Err("record count mismatch".into());
        }
        Ok(j)
    }
}

/// Writes a journal record by record, so that a transaction of 100,000 files never holds its
/// encoded journal in memory. The first write error is kept and returned by `finish`.
pub struct Encoder<W: Write> {
    w: W,
    hash: u64,
    count: usize,
    error: Option<io::Error>,
}

impl<W: Write> Encoder<W> {
    pub fn new(w: W) -> io::Result<Encoder<W>> {
        let mut e = Encoder { w, hash: FNV_OFFSET, count: 0, error: None };
        e.put(format!("{MAGIC}\n").as_bytes());
        e.count = 0;
        e.error.take().map_or(Ok(e), Err)
    }

    pub fn package(&mut self, name_version: &str) {
        self.record(&[b"P", &escape(name_version.as_bytes())]);
    }

    pub fn rename(&mut self, dir: &Path, temp: &OsStr, name: &OsStr, replaces_empty_dir: bool) {
        let flag: &[u8] = if replaces_empty_dir { b"1" } else { b"0" };
        self.record(&[b"R", &escape_path(dir), &escape(temp.as_bytes()), &escape(name.as_bytes()), flag]);
    }

    pub fn dir_meta(&mut self, m: &DirMetaRecord) {
        let fields = format!("{:o} {} {} {} {}", m.mode, m.uid, m.gid, m.mtime.0, m.mtime.1);
        self.record(&[b"M", &escape_path(&m.dir), fields.as_bytes()]);
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
            let hex = field.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).ok_or("bad escape")?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| "bad escape")?);
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
                RenameRecord { dir: PathBuf::new(), temp: "a.unpack-new".into(), name: "a".into(), replaces_empty_dir: false },
                RenameRecord {
                    dir: PathBuf::from("usr/share/we ird%"),
                    temp: OsString::from_vec(b"new\nline\xff.unpack-new".to_vec()),
                    name: OsString::from_vec(b"new\nline\xff".to_vec()),
                    replaces_empty_dir: true,
                },
            ],
            dir_meta: vec![DirMetaRecord { dir: PathBuf::from("usr"), mode: 0o1755, uid: 0, gid: 5, mtime: (-2, 500) }],
        }
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
}
