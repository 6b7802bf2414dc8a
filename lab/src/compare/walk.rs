//! One root's tree, read without ever leaving it: every entry's type, mode, owner, size, link
//! count, mtime, device numbers, symlink target and the MD5 of every regular file.
//!
//! A root given to the comparison is untrusted (a chroot an installer just ran, whose packages
//! and scripts put anything anywhere). So every lookup goes through openat2 from the root's
//! descriptor with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
//! RESOLVE_NO_XDEV`: no symlink is followed (a symlink is an entry, its target a string), no
//! `..` climbs out, and no mount inside the root is entered (a directory another filesystem is
//! mounted on is an entry marked `mount`, its contents not walked: a `proc` left mounted would
//! otherwise be walked for ever). A regular file is opened `O_NONBLOCK` and checked to be the
//! inode just listed, so a FIFO swapped in cannot block the walk. Directories are walked from a
//! list of paths, not by recursion, with one directory open at a time: a tree of any depth
//! costs memory, never the stack or the descriptor table.
//!
//! This module only reads. It must never follow a symlink, open anything but a regular file or
//! a directory, or write to a root.

use super::error::Error;
use md5::{Digest, Md5};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The kinds of entry a root holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    Char,
    Block,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "directory",
            Kind::Symlink => "symlink",
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            Kind::Char => "character device",
            Kind::Block => "block device",
        }
    }

    fn of(file_type: FileType) -> Kind {
        match file_type {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            FileType::CharacterDevice => Kind::Char,
            // The kernel has no other type; an unknown one is compared as a block device would
            // be, by its type and numbers.
            _ => Kind::Block,
        }
    }
}

/// One entry of a root, as lstat(2) and a read of it show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// The permission bits with setuid, setgid and sticky (`st_mode & 07777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub nlink: u64,
    /// Seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// `(major, minor)` of a device node, `(0, 0)` otherwise.
    pub device: (u32, u32),
    /// The MD5 of a regular file's bytes.
    pub md5: Option<[u8; 16]>,
    /// A symlink's target, as bytes.
    pub target: Option<Vec<u8>>,
    /// A directory another filesystem is mounted on: its contents were not walked.
    pub mount: bool,
}

/// A root's entries by their path below it (bytes, no leading `/`; the root itself is the
/// empty path), and the root's descriptor, through which the database's files are read.
pub struct Tree {
    pub path: PathBuf,
    fd: OwnedFd,
    pub entries: BTreeMap<Vec<u8>, Entry>,
}

/// How every lookup below a root resolves (see the module's documentation).
const CONFINED: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_XDEV);

impl Tree {
    /// Walks the root at `root` (which may itself be reached through symlinks: it is the
    /// caller's choice, nothing below it is).
    pub fn walk(root: &Path) -> Result<Tree, Error> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(root, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(root, e))?;
        let mut tree = Tree { path: root.to_path_buf(), fd, entries: BTreeMap::new() };
        tree.entries.insert(Vec::new(), entry_of(&st, None, None));
        let mut todo: Vec<Vec<u8>> = vec![Vec::new()];
        while let Some(dir) = todo.pop() {
            todo.extend(tree.walk_dir(&dir)?);
        }
        Ok(tree)
    }

    /// The full path of `rel` below the root, for messages.
    pub fn full(&self, rel: &[u8]) -> PathBuf {
        self.path.join(std::ffi::OsStr::from_bytes(rel))
    }

    /// Lists the directory `rel` into the entries; returns its subdirectories.
    fn walk_dir(&mut self, rel: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match self.open(rel, flags) {
            Ok(fd) => fd,
            Err(Errno::XDEV) => {
                if let Some(entry) = self.entries.get_mut(rel) {
                    entry.mount = true;
                }
                return Ok(Vec::new());
            }
            Err(e) => return Err(Error::io(self.full(rel), e)),
        };
        let mut dir = Dir::new(fd).map_err(|e| Error::io(self.full(rel), e))?;
        let mut names = Vec::new();
        while let Some(next) = dir.read() {
            let name =
                next.map_err(|e| Error::io(self.full(rel), e))?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(name);
            }
        }
        let dir_fd = dir.fd().map_err(|e| Error::io(self.full(rel), e))?;
        let mut subdirs = Vec::new();
        for name in names {
            let path = join(rel, &name);
            let entry = self.read_entry(dir_fd, &name, &path)?;
            if entry.kind == Kind::Dir {
                subdirs.push(path.clone());
            }
            self.entries.insert(path, entry);
        }
        Ok(subdirs)
    }

    /// The entry `name` of the open directory `dir`, whose path is `path`.
    fn read_entry(&self, dir: BorrowedFd<'_>, name: &[u8], path: &[u8]) -> Result<Entry, Error> {
        let io = |e: Errno| Error::io(self.full(path), e);
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io)?;
        match Kind::of(FileType::from_raw_mode(st.st_mode)) {
            Kind::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(io)?;
                Ok(entry_of(&st, None, Some(target.into_bytes())))
            }
            Kind::File => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                let fd =
                    rustix::fs::openat2(dir, name, flags, Mode::empty(), CONFINED).map_err(io)?;
                let opened = rustix::fs::fstat(&fd).map_err(io)?;
                if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) {
                    return Err(Error::io(self.full(path), changed()));
                }
                let mut hasher = Md5::new();
                std::io::copy(&mut std::fs::File::from(fd), &mut hasher)
                    .map_err(|e| Error::io(self.full(path), e))?;
                Ok(entry_of(&opened, Some(hasher.finalize().into()), None))
            }
            _ => Ok(entry_of(&st, None, None)),
        }
    }

    /// The bytes of the regular file `rel` below the root; `None` when it is not one.
    pub fn read(&self, rel: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        if self.entries.get(rel).is_none_or(|e| e.kind != Kind::File) {
            return Ok(None);
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = self.open(rel, flags).map_err(|e| Error::io(self.full(rel), e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(self.full(rel), e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::io(self.full(rel), changed()));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes)
            .map_err(|e| Error::io(self.full(rel), e))?;
        Ok(Some(bytes))
    }

    fn open(&self, rel: &[u8], flags: OFlags) -> Result<OwnedFd, Errno> {
        let path: &[u8] = if rel.is_empty() { b"." } else { rel };
        rustix::fs::openat2(self.fd.as_fd(), path, flags, Mode::empty(), CONFINED)
    }
}

fn changed() -> std::io::Error {
    std::io::Error::other("changed while it was read (another process is writing the root)")
}

/// `rel/name`, or `name` at the top.
fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        [rel, b"/", name].concat()
    }
}

// The kernel's stat fields have other types on other architectures.
#[allow(clippy::unnecessary_cast)]
fn entry_of(st: &rustix::fs::Stat, md5: Option<[u8; 16]>, target: Option<Vec<u8>>) -> Entry {
    let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
    let device = if matches!(kind, Kind::Char | Kind::Block) {
        (rustix::fs::major(st.st_rdev as u64), rustix::fs::minor(st.st_rdev as u64))
    } else {
        (0, 0)
    };
    Entry {
        kind,
        mode: st.st_mode as u32 & 0o7777,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
        size: st.st_size as u64,
        nlink: st.st_nlink as u64,
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
        device,
        md5,
        target,
        mount: false,
    }
}
