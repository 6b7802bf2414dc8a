//! tar headers turned into validated entries: a clean relative path, a type, and metadata.
//!
//! Everything the archive says is checked here before the engine acts on it: paths are split
//! into plain components (no `..`, no empty or over-long names; a leading `/` means the root),
//! link targets likewise for hard links, ids and times are range-checked, mode bits beyond
//! 07777 are dropped, and the tar reader may read at most 1 MiB of headers to reach one entry
//! (`metered`). What leaves this module is safe to hand to `root.rs`, which still confines
//! every lookup by itself. This module never touches the filesystem.

use crate::error::escape;
use crate::fs::names::{MAX_PATH, NAME_MAX, TEMP_SUFFIX};
use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::rc::Rc;

/// The most components an entry's path may have. PATH_MAX (4096 bytes with its NUL) holds at
/// most 2048 names (`a/` each), so no tool that takes a path, dpkg included, can name anything
/// deeper, and no real package comes close (Debian's deepest paths are a few dozen names); a
/// 4,000-byte path of one-byte names (2,000 components) still unpacks. The bound is what lets
/// recovery stop looking: the engine never writes deeper, so its walk of the root
/// (`recover.rs`) holds at most this many directories open, whatever a hostile root holds.
pub const MAX_DEPTH: usize = 2048;

/// The longest symlink target symlink(2) accepts (PATH_MAX less its NUL).
const SYMLINK_MAX: usize = 4095;

/// The most bytes the tar reader may read to reach one entry: its headers, GNU long names,
/// PAX records, and the data of the entry before it that nobody read. Real ones are a few
/// hundred bytes.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// A tar stream whose reads are bounded while the tar reader looks for the next entry, and
/// unbounded while an entry is held ([`Meter::entry`]). The tar crate reads a GNU long name or
/// a PAX record into memory whole, whatever size its header claims: without this bound a
/// package of a few KiB of zstd could make it allocate gigabytes.
pub(crate) struct Metered<R> {
    inner: R,
    left: Rc<Cell<u64>>,
    /// Bytes read so far: the position [`Seek`] reports.
    position: u64,
    /// Where skipped bytes go, allocated once.
    scratch: Vec<u8>,
}

/// Switches the bound of a [`Metered`] stream off while an entry is held.
pub(crate) struct Meter(Rc<Cell<u64>>);

/// An entry is held: its data may be read without bound. Dropping it bounds the stream again.
pub(crate) struct Held(Rc<Cell<u64>>);

/// `inner`, bounded to 1 MiB of reads until the first entry is held.
pub(crate) fn metered<R: Read>(inner: R) -> (Metered<R>, Meter) {
    let left = Rc::new(Cell::new(MAX_HEADER_BYTES));
    (Metered { inner, left: left.clone(), position: 0, scratch: Vec::new() }, Meter(left))
}

impl Meter {
    /// Call on each entry the tar reader yields, and keep the result while reading its data.
    pub fn entry(&self) -> Held {
        self.0.set(u64::MAX);
        Held(self.0.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.set(MAX_HEADER_BYTES);
    }
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.left.get();
        if left == 0 {
            return Err(std::io::Error::other(format!(
                "more than {MAX_HEADER_BYTES} bytes of tar headers for one entry"
            )));
        }
        let room = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..room])?;
        if left != u64::MAX {
            self.left.set(left - n as u64);
        }
        self.position += n as u64;
        Ok(n)
    }
}

/// Forward seeks only, by reading (through the bound) and dropping the bytes. Why: the tar
/// crate skips each entry's padding through a 32 KiB buffer it zeroes on every call unless the
/// stream can seek, which was 11% of all instructions of an unpack of linux-headers (callgrind:
/// 327 million in memset for 9,970 entries) on the thread that decompresses.
impl<R: Read> Seek for Metered<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let SeekFrom::Current(mut skip) = pos else {
            return Err(std::io::Error::other("a tar stream seeks only forward"));
        };
        if skip < 0 {
            return Err(std::io::Error::other("a tar stream seeks only forward"));
        }
        if self.scratch.is_empty() {
            self.scratch = vec![0; 8 * 1024];
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        while skip > 0 {
            let want = scratch.len().min(usize::try_from(skip).unwrap_or(usize::MAX));
            match self.read(&mut scratch[..want]) {
                Ok(0) => break,
                Ok(n) => skip -= n as i64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.scratch = scratch;
                    return Err(e);
                }
            }
        }
        self.scratch = scratch;
        if skip > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "unexpected EOF during skip",
            ));
        }
        Ok(self.position)
    }
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File {
        size: u64,
    },
    Dir,
    /// The target is kept as the archive spells it: it is only a link's value.
    Symlink {
        target: OsString,
    },
    /// Another entry of the transaction, by its clean path.
    Hardlink {
        target: PathBuf,
    },
    Fifo,
    CharDevice {
        major: u32,
        minor: u32,
    },
    BlockDevice {
        major: u32,
        minor: u32,
    },
}

/// A validated entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the root, only plain components; empty for the root itself.
    pub path: PathBuf,
    pub kind: Kind,
    /// Permission bits including setuid, setgid and sticky (`& 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Seconds since the epoch (may be negative) and nanoseconds.
    pub mtime: (i64, u32),
}

/// Validates one tar entry. The types dpkg's own tar reader refuses (lib/dpkg/tarfn.c) are
/// refused, whatever else could read them: PAX headers (`x`, `g`), the contiguous file `7`,
/// GNU's `V`, `M`, `S`, `D`, Solaris' `A`, `X`, any other; so is a name with a newline
/// (src/main/archives.c: it would be two lines of `info/PKG.list`).
pub fn validate<R: Read>(entry: &mut tar::Entry<'_, R>) -> Result<Entry, String> {
    let etype = entry.header().entry_type();
    let raw_path = entry.path_bytes().into_owned();
    let err = |what: String| format!("entry '{}': {what}", escape(OsStr::from_bytes(&raw_path)));
    if etype.is_pax_global_extensions() || etype.is_pax_local_extensions() {
        return Err(err(format!("unsupported PAX tar header type '{}'", type_char(etype))));
    }
    // The tar crate applies a PAX `x` header to the entry after it: seen there.
    if entry.pax_extensions().map_err(|e| err(format!("bad PAX header: {e}")))?.is_some() {
        return Err(err("unsupported PAX tar header type 'x'".into()));
    }
    if raw_path.contains(&b'\n') {
        return Err(err("newline not allowed in archive object name".into()));
    }
    let header = entry.header();
    let path = clean_path(&raw_path).map_err(err)?;
    let mode = header.mode().map_err(|e| err(format!("bad mode: {e}")))? & 0o7777;
    let uid = id(header.uid(), "uid").map_err(err)?;
    let gid = id(header.gid(), "gid").map_err(err)?;
    let mtime = (header.mtime().map_err(|e| err(format!("bad mtime: {e}")))? as i64, 0u32);
    if mtime.0 < 0 {
        return Err(err("mtime out of range".into()));
    }
    let device = |h: &tar::Header| -> Result<(u32, u32), String> {
        let major =
            h.device_major().map_err(|e| err(format!("bad device major: {e}")))?.unwrap_or(0);
        let minor =
            h.device_minor().map_err(|e| err(format!("bad device minor: {e}")))?.unwrap_or(0);
        Ok((major, minor))
    };
    let link = || {
        entry
            .link_name_bytes()
            .map(|l| l.into_owned())
            .ok_or_else(|| err("link without a target".into()))
    };
    // A regular file's type (`0`, the old `\0`) with a trailing `/` in its name is a directory
    // written by an old or BSD tar: GNU tar and dpkg make a directory of it.
    let kind = if etype.is_file() && !raw_path.ends_with(b"/") {
        Kind::File { size: entry.size() }
    } else if etype.is_dir() || etype.is_file() {
        Kind::Dir
    } else if etype.is_symlink() {
        let target = link()?;
        if target.is_empty() {
            return Err(err("symlink with an empty target".into()));
        }
        // The kernel cannot make these (EINVAL, ENAMETOOLONG): refused here, so that the
        // package is blamed (exit 3) and not the root (exit 4). Found by fuzzing.
        if target.contains(&0) {
            return Err(err("symlink target contains a NUL byte".into()));
        }
        if target.len() > SYMLINK_MAX {
            return Err(err(format!(
                "symlink target of {} bytes is longer than {SYMLINK_MAX}",
                target.len()
            )));
        }
        Kind::Symlink { target: OsStr::from_bytes(&target).to_os_string() }
    } else if etype.is_hard_link() {
        let target = clean_path(&link()?).map_err(|e| err(format!("hard link target: {e}")))?;
        Kind::Hardlink { target }
    } else if etype.is_fifo() {
        Kind::Fifo
    } else if etype.is_character_special() {
        let (major, minor) = device(header)?;
        Kind::CharDevice { major, minor }
    } else if etype.is_block_special() {
        let (major, minor) = device(header)?;
        Kind::BlockDevice { major, minor }
    } else {
        let what = match etype.as_byte() {
            b'V' | b'M' | b'S' | b'D' => "unsupported GNU",
            b'A' | b'X' => "unsupported Solaris",
            _ => "unknown",
        };
        return Err(err(format!("{what} tar header type '{}'", type_char(etype))));
    };
    if path.as_os_str().is_empty() && kind != Kind::Dir {
        return Err(err("the root itself must be a directory".into()));
    }
    Ok(Entry { path, kind, mode, uid, gid, mtime })
}

/// A header's type byte as a message shows it.
fn type_char(etype: tar::EntryType) -> String {
    escape(OsStr::from_bytes(&[etype.as_byte()])).to_string()
}

/// Splits an archive path into plain components: `./usr//bin/` is `usr/bin`, `/etc/x` is
/// `etc/x` (the root is `/`), and `..` anywhere is refused: no real package needs it and it is
/// how archives escape. More than [`MAX_DEPTH`] components are refused too, and a path longer
/// than dpkg's database holds ([`MAX_PATH`] as listed, `/` and the path: 4,095 bytes of path).
pub fn clean_path(raw: &[u8]) -> Result<PathBuf, String> {
    let mut path = PathBuf::new();
    let mut depth = 0;
    for part in raw.split(|&b| b == b'/') {
        match part {
            b"" | b"." => continue,
            _ if depth == MAX_DEPTH => {
                return Err(format!("a path of more than {MAX_DEPTH} components"))
            }
            b".." => return Err("path contains '..'".into()),
            _ if part.len() > NAME_MAX => {
                return Err(format!("a name of {} bytes is longer than {NAME_MAX}", part.len()))
            }
            _ if part.contains(&0) => return Err("path contains a NUL byte".into()),
            // The engine's own temporary names: such an entry would be mistaken for one (its
            // temporary file overwritten by another's rename, an installed one removed as stale).
            _ if part.ends_with(TEMP_SUFFIX.as_bytes()) => {
                return Err(format!(
                    "a name ending in '{TEMP_SUFFIX}' (the engine's temporary names)"
                ))
            }
            _ => path.push(OsStr::from_bytes(part)),
        }
        depth += 1;
    }
    if path.as_os_str().len() + 1 > MAX_PATH {
        return Err(format!(
            "a path of {} bytes is longer than the {} dpkg's database holds",
            path.as_os_str().len(),
            MAX_PATH - 1
        ));
    }
    Ok(path)
}

fn id(value: std::io::Result<u64>, what: &str) -> Result<u32, String> {
    let v = value.map_err(|e| format!("bad {what}: {e}"))?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v != u32::MAX)
        .ok_or_else(|| format!("{what} {v} out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_and_dotdot_refused() {
        assert_eq!(clean_path(b"./usr//bin/").unwrap(), PathBuf::from("usr/bin"));
        assert_eq!(clean_path(b"/etc/passwd").unwrap(), PathBuf::from("etc/passwd"));
        assert_eq!(clean_path(b"./").unwrap(), PathBuf::new());
        assert!(clean_path(b"./usr/../../etc").is_err());
        assert!(clean_path(b"..").is_err());
        assert!(clean_path(&[b'a'; 256]).is_err());
        assert!(clean_path(&[b'a'; 255]).is_ok());
        assert!(clean_path(b"usr/bin/tool.unpack-new").is_err());
        assert!(clean_path(b"usr/x.unpack-new/tool").is_err());
        assert!(clean_path(b"usr/x.unpack-newer").is_ok());
        let deepest = "d/".repeat(MAX_DEPTH);
        assert_eq!(clean_path(deepest.as_bytes()).unwrap().components().count(), MAX_DEPTH);
        assert!(
            clean_path(format!("./{deepest}/.//").as_bytes()).is_ok(),
            "'.' and empty names are not components"
        );
        let e = clean_path(format!("{deepest}f").as_bytes()).unwrap_err();
        assert!(e.contains("more than 2048 components"), "{e}");
    }

    #[test]
    fn ids_beyond_32_bits_are_refused() {
        assert_eq!(id(Ok(1234), "uid"), Ok(1234));
        assert!(id(Ok(1 << 40), "uid").is_err());
    }
}
