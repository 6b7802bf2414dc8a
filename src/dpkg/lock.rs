//! dpkg's and apt's locks on the admin directory: `lock-frontend`, then `lock`, as dpkg takes
//! them (fcntl record locks on the whole file, lib/dpkg/lock.c), held for the whole call, so
//! that no dpkg or apt runs on the root while `unpack` changes its database, and none sees the
//! database half written.
//!
//! `DPKG_FRONTEND_LOCKED` set in the environment means a frontend (apt) holds `lock-frontend`
//! already and runs us: only `lock` is taken then, as dpkg does.
//!
//! The lock files are in the root's admin directory, which the root's owner may have shaped:
//! they are opened without following a symlink, without blocking (a FIFO planted there must not
//! hang us), never truncated (a hard link to another file of the root must not empty it), and
//! only a regular file is locked.

use crate::durability::Directory;
use crate::error::{Error, Result};
use rustix::fs::{FileType, Mode, OFlags};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The two files, in the order dpkg takes them.
const FRONTEND: &str = "lock-frontend";
const LOCK: &str = "lock";

/// Held until dropped (closing a descriptor releases its record locks).
pub struct DpkgLocks {
    _files: Vec<File>,
}

/// Takes dpkg's locks in `admin` (ROOT's admin directory, shown as `root` in messages), waiting
/// for them with `wait`, else failing with [`Error::Locked`] naming the holder.
pub fn lock(admin: &Directory, root: &Path, wait: bool) -> Result<DpkgLocks> {
    let frontend_held = std::env::var_os("DPKG_FRONTEND_LOCKED").is_some();
    let mut files = Vec::new();
    for name in [FRONTEND, LOCK] {
        if name == FRONTEND && frontend_held {
            continue;
        }
        let path = admin.path().join(name);
        let flags =
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        // 0640 as dpkg makes them.
        let fd = rustix::fs::openat(admin.fd(), name, flags, Mode::from_raw_mode(0o640))
            .map_err(|e| Error::root(&path, "opening dpkg's lock", e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::root(&path, "stat", e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::root(
                &path,
                "opening dpkg's lock",
                std::io::Error::other("not a regular file"),
            ));
        }
        let file = File::from(fd);
        match set_lock(&file, wait) {
            Ok(()) => files.push(file),
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => {
                return Err(Error::Locked {
                    root: root.to_path_buf(),
                    holder: format!("{} holds {}", holder(&file), path.display()),
                });
            }
            Err(e) => return Err(Error::root(&path, "locking", e)),
        }
    }
    Ok(DpkgLocks { _files: files })
}

/// A write lock on the whole file (F_SETLK, or F_SETLKW with `wait`): rustix has no fcntl
/// record locks, only flock, which does not exclude dpkg's.
fn set_lock(file: &File, wait: bool) -> std::result::Result<(), rustix::io::Errno> {
    let mut fl = whole_file(libc::F_WRLCK);
    let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
    loop {
        // SAFETY: fcntl on an open descriptor with a valid flock struct.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) };
        if rc == 0 {
            return Ok(());
        }
        let errno = rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        );
        if errno != rustix::io::Errno::INTR {
            return Err(errno);
        }
    }
}

fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: flock is plain data; all-zero is a valid value, the fields set below matter.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl
}

/// Who holds the lock on `file`: "dpkg (pid 123)", from F_GETLK and /proc; "another process"
/// when the kernel cannot say (a holder in another pid namespace shows pid 0).
fn holder(file: &File) -> String {
    let mut fl = whole_file(libc::F_WRLCK);
    // SAFETY: as in set_lock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    if rc != 0 || fl.l_type == libc::F_UNLCK as libc::c_short || fl.l_pid <= 0 {
        return "another process".into();
    }
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", fl.l_pid)).unwrap_or_default();
    let comm = comm.trim();
    format!("{} (pid {})", if comm.is_empty() { "a process" } else { comm }, fl.l_pid)
}
