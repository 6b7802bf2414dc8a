//! Tree removal and the walks it shares with recovery: one home for removing what the engine
//! made, used by the write phase's rollback, by recovery, and by the resolver when it meets a
//! leftover temporary tree.
//!
//! Everything here works on descriptors and single names read from the directory itself: it
//! never follows a symlink, never goes through `..` (which a concurrent rename can redirect),
//! and never crosses into another mount, a bind mount of the same filesystem included (mount
//! ids). It must only ever be handed the engine's own temporary names: it removes whatever is
//! below them.

use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// How every directory is opened here and in recovery's walk: never through a symlink.
pub(crate) const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// A directory being removed by [`remove_tree`]: its descriptor, its name in its parent, the
/// subdirectories still to remove.
struct Frame {
    fd: OwnedFd,
    name: OsString,
    subdirs: Vec<OsString>,
}

/// The names in `dir` but `.` and `..`: (not directories, directories). Some filesystems do
/// not fill in the type (DT_UNKNOWN): those are asked.
pub(crate) fn entries(dir: BorrowedFd<'_>) -> rustix::io::Result<(Vec<OsString>, Vec<OsString>)> {
    let (mut others, mut dirs) = (Vec::new(), Vec::new());
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            t => t == FileType::Directory,
        };
        if is_dir { &mut dirs } else { &mut others }.push(name.to_os_string());
    }
    Ok((others, dirs))
}

/// The mount a descriptor is on: its device and, where the kernel says (statx STATX_MNT_ID,
/// Linux 5.8), its mount id, which tells a bind mount of the same filesystem apart.
pub(crate) fn mount_of(fd: BorrowedFd<'_>) -> rustix::io::Result<(u64, u64)> {
    let st = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)?;
    let id = if StatxFlags::from_bits_retain(st.stx_mask).contains(StatxFlags::MNT_ID) {
        st.stx_mnt_id
    } else {
        0
    };
    Ok((rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor), id))
}

/// How many directories a walk holds open at most, here and in recovery's: a tree deeper than
/// this is made shallower as it goes ([`remove_tree`]) or reopened by name on the way back.
pub(crate) const MAX_OPEN: usize = 64;

/// Removes `name` from `dir`: a file, or a directory with everything in it, and returns it when
/// gone. The engine calls it only for its own temporary names, so it may make its directories
/// writable first (a package's 0500 directory in a new tree, set before the barrier, would
/// otherwise keep its files; a user who is not root needs that). It never follows a symlink,
/// never goes through `..`, and never crosses into another mount: a mount point inside fails
/// it (EBUSY), with what the mount holds untouched. Depth first with an explicit stack; below
/// [`MAX_OPEN`] levels a directory is renamed up to the top of the tree being removed, so that
/// any depth costs a bounded number of descriptors. `counts` gain the (files, directories)
/// removed.
pub(crate) fn remove_tree(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    counts: &mut (usize, usize),
) -> rustix::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => return Ok(()),
        other => other?,
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
        counts.0 += 1;
        return Ok(());
    }
    let mount = mount_of(dir)?;
    let fd = open_for_removal(dir, name, mount)?;
    let subdirs = remove_files(fd.as_fd(), counts)?;
    let mut stack = vec![Frame { fd, name: name.to_os_string(), subdirs }];
    let mut flattened = 0u64;
    while let Some(frame) = stack.last_mut() {
        let Some(child) = frame.subdirs.pop() else {
            let name = std::mem::take(&mut frame.name);
            stack.pop();
            let parent = stack.last().map_or(dir, |f| f.fd.as_fd());
            rustix::fs::unlinkat(parent, &name, AtFlags::REMOVEDIR)?;
            counts.1 += 1;
            continue;
        };
        let here = stack.len() - 1;
        if here + 1 < MAX_OPEN {
            let fd = open_for_removal(stack[here].fd.as_fd(), &child, mount)?;
            let subdirs = remove_files(fd.as_fd(), counts)?;
            stack.push(Frame { fd, name: child, subdirs });
        } else {
            let moved =
                move_up(stack[here].fd.as_fd(), &child, stack[0].fd.as_fd(), &mut flattened)?;
            stack[0].subdirs.push(moved);
        }
    }
    Ok(())
}

/// Renames the directory `name` in `from` to a new name in `top` (a tree being removed), and
/// returns that name.
fn move_up(
    from: BorrowedFd<'_>,
    name: &OsStr,
    top: BorrowedFd<'_>,
    n: &mut u64,
) -> rustix::io::Result<OsString> {
    loop {
        *n += 1;
        let fresh = OsString::from(format!("flattened-{n}"));
        match rustix::fs::renameat_with(from, name, top, &fresh, rustix::fs::RenameFlags::NOREPLACE)
        {
            Err(Errno::EXIST) => continue,
            other => return other.map(|()| fresh),
        }
    }
}

/// Removes what is not a directory in `dir` and returns its subdirectories.
fn remove_files(
    dir: BorrowedFd<'_>,
    counts: &mut (usize, usize),
) -> rustix::io::Result<Vec<OsString>> {
    let (others, subdirs) = entries(dir)?;
    for name in others {
        rustix::fs::unlinkat(dir, &name, AtFlags::empty())?;
        counts.0 += 1;
    }
    Ok(subdirs)
}

/// Opens the directory `name` in `parent` to empty it: not through a symlink, not on another
/// mount than `mount` (EBUSY), and, for a process that is not root, with read, write and search
/// permission for its owner added if it is the owner.
fn open_for_removal(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    mount: (u64, u64),
) -> rustix::io::Result<OwnedFd> {
    let fd = match rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()) {
        // No read permission: only the owner can give it back, through a descriptor that
        // needs none (O_PATH), by the /proc link that names exactly that inode.
        Err(Errno::ACCESS) => {
            let path_fd = rustix::fs::openat(
                parent,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let proc = format!("/proc/self/fd/{}", path_fd.as_raw_fd());
            let st = rustix::fs::fstat(&path_fd)?;
            if st.st_uid != rustix::process::geteuid().as_raw() {
                return Err(Errno::ACCESS);
            }
            rustix::fs::chmod(&proc, Mode::from_raw_mode(st.st_mode & 0o7777 | 0o700))?;
            rustix::fs::open(
                &proc,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        }
        other => other?,
    };
    if mount_of(fd.as_fd())? != mount {
        return Err(Errno::BUSY);
    }
    let st = rustix::fs::fstat(&fd)?;
    let euid = rustix::process::geteuid();
    if !euid.is_root() && st.st_uid == euid.as_raw() && st.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(st.st_mode & 0o7777 | 0o700))?;
    }
    Ok(fd)
}

/// One removal of an upgrade (a file the new version dropped, or a directory only it held):
/// `name` in `dir`, a directory only if empty. Idempotent, for recovery to replay: a name gone
/// already, a directory something else still holds files in, or a name whose type changed
/// since the plan (a file where a directory was planned, or the reverse) is left as it is.
pub(crate) fn remove_dropped(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    directory: bool,
) -> rustix::io::Result<bool> {
    let flags = if directory { AtFlags::REMOVEDIR } else { AtFlags::empty() };
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) => Ok(true),
        Err(
            Errno::NOENT
            | Errno::NOTEMPTY
            | Errno::EXIST
            | Errno::NOTDIR
            | Errno::ISDIR
            | Errno::BUSY,
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Clears the final name of a rename that could not replace what is there: an empty directory
/// where a file comes, or a symlink where a directory comes (rename(2) moves a directory only
/// over nothing or an empty directory). Anything else is left for the rename to replace or
/// refuse: a non-empty directory is never removed, a file never unlinked. Idempotent, for
/// recovery to replay: a name already gone is cleared.
pub(crate) fn clear_for_rename(dir: BorrowedFd<'_>, name: &OsStr) -> rustix::io::Result<()> {
    let removed = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(e) => Err(e),
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR),
            FileType::Symlink => rustix::fs::unlinkat(dir, name, AtFlags::empty()),
            _ => Ok(()),
        },
    };
    match removed {
        Err(Errno::NOENT) => Ok(()),
        other => other,
    }
}
