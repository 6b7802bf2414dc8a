//! Which filesystem a path lives on, and with which options, as the kernel reports them.
//!
//! A release team copies this into its matrix, so it must be what the kernel applied, not what
//! somebody asked for: an option that a filesystem silently ignored must not show up here. That
//! is why it reads `/proc/self/mountinfo` (per-mount options and the superblock's options) and
//! never the fstab or a mount command line.

use serde::Serialize;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo`, reduced to what a report needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountInfo {
    /// Filesystem type, e.g. `ext4`.
    #[serde(rename = "type")]
    pub fstype: String,
    /// The mounted device or source, e.g. `/dev/loop3`.
    pub source: String,
    /// Per-mount options followed by the superblock options the filesystem reports
    /// (`rw,relatime,nodelalloc`), duplicates removed, in the kernel's order.
    pub options: String,
    /// Where it is mounted.
    #[serde(skip)]
    pub mount_point: PathBuf,
    /// The device number (major, minor) of the mounted filesystem.
    #[serde(skip)]
    pub device: (u32, u32),
}

impl MountInfo {
    /// True when `option` (e.g. `nodelalloc` or `data=journal`) is among the applied options.
    pub fn has_option(&self, option: &str) -> bool {
        self.options.split(',').any(|o| o == option)
    }
}

/// The mount that holds `path`: the entry with the longest mount point that is a prefix of the
/// canonical path and whose device matches the path's (so a later over-mount wins, as in the
/// kernel's own lookup).
pub fn for_path(path: &Path) -> io::Result<MountInfo> {
    let canonical = path.canonicalize()?;
    let dev = std::fs::metadata(&canonical)?.dev();
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let mut best: Option<(usize, bool, MountInfo)> = None;
    for info in all()? {
        if !canonical.starts_with(&info.mount_point) {
            continue;
        }
        let depth = info.mount_point.components().count();
        let dev_matches = info.device == (major, minor);
        // Prefer the device match, then the deepest mount point, then the later line.
        let better = match &best {
            None => true,
            Some((d, m, _)) => (dev_matches, depth) >= (*m, *d),
        };
        if better {
            best = Some((depth, dev_matches, info));
        }
    }
    best.map(|(_, _, info)| info).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no mount in /proc/self/mountinfo holds {}", canonical.display()),
        )
    })
}

/// Every mount of this process's mount namespace, in the order they were made: for a program
/// that reports where it installed, or that must take its own mounts down before removing a
/// tree (the lab does both).
pub fn all() -> io::Result<Vec<MountInfo>> {
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(table.lines().filter_map(parse_line).collect())
}

fn libc_major(dev: u64) -> u32 {
    (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)) as u32
}

fn libc_minor(dev: u64) -> u32 {
    (((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)) as u32
}

/// Parses one mountinfo line:
/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`.
fn parse_line(line: &str) -> Option<MountInfo> {
    let (head, tail) = line.split_once(" - ")?;
    let head: Vec<&str> = head.split(' ').collect();
    let tail: Vec<&str> = tail.split(' ').collect();
    if head.len() < 6 || tail.len() < 3 {
        return None;
    }
    let (major, minor) = head[2].split_once(':')?;
    let devno = (major.parse().ok()?, minor.parse().ok()?);
    let mut options: Vec<&str> = Vec::new();
    for o in head[5].split(',').chain(tail[2].split(',')) {
        if !o.is_empty() && !options.contains(&o) {
            options.push(o);
        }
    }
    Some(MountInfo {
        fstype: tail[0].to_string(),
        source: unescape(tail[1]),
        options: options.join(","),
        mount_point: PathBuf::from(unescape(head[4])),
        device: devno,
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_options_from_both_halves_without_duplicates() {
        let line = "36 35 7:3 / /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/loop3 rw,nodelalloc";
        let info = parse_line(line).unwrap();
        assert_eq!(info.device, (7, 3));
        assert_eq!(info.fstype, "ext4");
        assert_eq!(info.source, "/dev/loop3");
        assert_eq!(info.options, "rw,relatime,nodelalloc");
        assert_eq!(info.mount_point, PathBuf::from("/mnt/a b"));
        assert!(info.has_option("nodelalloc"));
        assert!(!info.has_option("delalloc"));
    }

    #[test]
    fn finds_the_mount_of_the_root_directory() {
        let info = for_path(Path::new("/")).unwrap();
        assert_eq!(info.mount_point, PathBuf::from("/"));
        assert!(!info.fstype.is_empty());
    }
}
