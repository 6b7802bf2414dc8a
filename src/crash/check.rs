//! Checking one crash state: mount it (which replays the journal), compare every path of the
//! package with its old and new content, unmount, fsck.
//!
//! The invariants, per path of the package:
//! 1. it holds its old complete content or its new complete content (old is "absent" for an
//!    install): otherwise it is `zero-length` (an empty file where neither version is empty),
//!    `lost-old` (gone, where the old version was), or `torn` (anything else: short, mixed,
//!    garbage, the wrong type, unreadable);
//! 2. in a state a crash after the unpacker's exit can leave, it holds its new content, or it
//!    is `not-durable` (exit 0 meant durable);
//!
//! and, apart from them, because it points at the filesystem rather than at the unpacker: the
//! state mounts, and fsck (`e2fsck -fn`, `xfs_repair -n`, `btrfs check --readonly`) finds
//! nothing. Paths are looked up through the engine's confined resolver (`root::Root`), so a
//! crash state holding a symlink that points outside cannot make the checker read the host.
//! This module only ever mounts an image it is given, read-write, and always unmounts and
//! detaches it, whatever happens in between.

use super::expect::{content_hash, Content, Tree};
use super::CrashError;
use crate::root::{Pending, ResolveError, Root};
use crate::scratchfs::{LoopDevice, Mounted};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::Serialize;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a path broke an invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    ZeroLength,
    Torn,
    LostOld,
    NotDurable,
}

impl Kind {
    /// Every kind, in the order the reports list them.
    pub const ALL: [Kind; 4] = [Kind::ZeroLength, Kind::Torn, Kind::LostOld, Kind::NotDurable];

    /// The name the reports use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ZeroLength => "zero-length",
            Kind::Torn => "torn",
            Kind::LostOld => "lost-old",
            Kind::NotDurable => "not-durable",
        }
    }
}

/// The old and the new tree of a cell, the directory the package goes to inside the
/// filesystem, and how to mount and fsck it.
#[derive(Debug)]
pub struct Expected<'a> {
    pub old: &'a Tree,
    pub new: &'a Tree,
    /// The unpack root, relative to the filesystem's top.
    pub root: &'a Path,
    pub fstype: &'a str,
}

/// One path of one state that broke an invariant.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub state: usize,
    pub path: PathBuf,
    pub kind: Kind,
    pub expected_old: Content,
    pub expected_new: Content,
    pub found: Content,
}

/// A state the filesystem itself failed on.
#[derive(Debug, Clone, Serialize)]
pub struct FsFailure {
    pub state: usize,
    /// `mount` or `fsck`.
    pub stage: &'static str,
    /// What the tool said.
    pub detail: String,
}

/// What checking one state found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub violations: Vec<Violation>,
    pub fs_failures: Vec<FsFailure>,
}

/// Mounts `image` on `mnt`, checks state `id`, unmounts, fscks. `after_returned`: a crash after
/// the unpacker's exit can leave this state. Errors are for the harness failing (no loop device,
/// a mount that will not come down); what the state holds is always an [`Outcome`].
pub fn check_state(
    image: &Path,
    mnt: &Path,
    expected: &Expected<'_>,
    id: usize,
    after_returned: bool,
) -> Result<Outcome, CrashError> {
    let io = |what: &'static str| move |source| CrashError::Io { path: image.to_path_buf(), what, source };
    let mut outcome = Outcome::default();
    {
        let device = LoopDevice::attach(image).map_err(io("attaching a loop device to"))?;
        match Mounted::mount(expected.fstype, device.path(), mnt, mount_options(expected.fstype)) {
            Ok(mounted) => {
                outcome.violations = compare(&mounted.path().join(expected.root), expected, id, after_returned);
                let at = mounted.path().to_path_buf();
                if let Err(e) = mounted.unmount() {
                    // Try again patiently (and lazily at last) before the loop device goes.
                    drop(Mounted::adopt(&at));
                    return Err(io("unmounting")(e));
                }
            }
            Err(e) => outcome.fs_failures.push(FsFailure { state: id, stage: "mount", detail: e.to_string() }),
        }
        drop(device);
    }
    if let Some(detail) = fsck(expected.fstype, image)? {
        outcome.fs_failures.push(FsFailure { state: id, stage: "fsck", detail });
    }
    Ok(outcome)
}

/// Copies of one filesystem share its UUID, which XFS refuses twice unless told.
fn mount_options(fstype: &str) -> &'static str {
    if fstype == "xfs" {
        "nouuid"
    } else {
        "defaults"
    }
}

/// Every path of the new tree, against the old and the new content.
fn compare(root: &Path, expected: &Expected<'_>, id: usize, after_returned: bool) -> Vec<Violation> {
    let mut root = Root::open(root).map_err(|e| e.to_string());
    let mut out = Vec::new();
    for (path, new) in &expected.new.0 {
        let found = match &mut root {
            Ok(root) => probe(root, path),
            Err(e) => Content::Other(format!("unreadable root: {e}")),
        };
        let old = expected.old.get(path);
        if let Some(kind) = classify(&old, new, &found, after_returned) {
            out.push(Violation {
                state: id,
                path: path.clone(),
                kind,
                expected_old: old,
                expected_new: new.clone(),
                found,
            });
        }
    }
    out
}

/// The invariants for one path; `None` when it holds.
pub fn classify(old: &Content, new: &Content, found: &Content, after_returned: bool) -> Option<Kind> {
    if found == new {
        None
    } else if found == old {
        after_returned.then_some(Kind::NotDurable)
    } else {
        match found {
            Content::Absent => Some(Kind::LostOld),
            Content::File { len: 0, .. } => Some(Kind::ZeroLength),
            _ => Some(Kind::Torn),
        }
    }
}

/// What `path` holds under `root`, looked up without ever leaving it.
fn probe(root: &mut Root, path: &Path) -> Content {
    let parent = path.parent().unwrap_or(Path::new(""));
    let Some(name) = path.file_name() else { return Content::Other("no file name".into()) };
    let dir = match root.resolve_dir(parent, None, &|_| Pending::Nothing) {
        Ok((_, dir)) => dir,
        Err(ResolveError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Content::Absent
        }
        Err(ResolveError::NotDir { path, .. }) => {
            return Content::Other(format!("{} is not a directory", path.display()))
        }
        Err(ResolveError::Loop(path)) => return Content::Other(format!("symlink loop at {}", path.display())),
        Err(ResolveError::Io { path, action, source }) => {
            return Content::Other(format!("unreadable: {action} {}: {source}", path.display()))
        }
    };
    let st = match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Content::Absent,
        Err(e) => return Content::Other(format!("unreadable: stat: {e}")),
    };
    let rdev = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let read = rustix::fs::openat(dir.fd(), name, flags, Mode::empty())
                .map_err(std::io::Error::from)
                .and_then(|fd| content_hash(&mut File::from(fd)));
            match read {
                Ok((len, hash)) => Content::File { len, hash },
                Err(e) => Content::Other(format!("unreadable file of {} bytes: {e}", st.st_size)),
            }
        }
        FileType::Directory => Content::Dir,
        FileType::Symlink => match rustix::fs::readlinkat(dir.fd(), name, Vec::new()) {
            Ok(target) => Content::Symlink(std::ffi::OsStr::from_bytes(target.as_bytes()).to_os_string()),
            Err(e) => Content::Other(format!("unreadable symlink: {e}")),
        },
        FileType::Fifo => Content::Fifo,
        FileType::CharacterDevice => Content::CharDevice(rdev.0, rdev.1),
        FileType::BlockDevice => Content::BlockDevice(rdev.0, rdev.1),
        other => Content::Other(format!("{other:?}")),
    }
}

/// Runs the filesystem's checker read-only on `image`; `Some(what it said)` when it found
/// something.
fn fsck(fstype: &str, image: &Path) -> Result<Option<String>, CrashError> {
    let mut cmd = match fstype {
        "xfs" => {
            let mut c = Command::new("xfs_repair");
            c.args(["-n", "-f"]);
            c
        }
        "btrfs" => {
            let mut c = Command::new("btrfs");
            c.args(["check", "--readonly"]);
            c
        }
        _ => {
            let mut c = Command::new("e2fsck");
            c.args(["-f", "-n"]);
            c
        }
    };
    let out = cmd.arg(image).output().map_err(|source| CrashError::Tool {
        path: PathBuf::from(cmd.get_program()),
        reason: format!("cannot run it on {}: {source}", image.display()),
    })?;
    if out.status.success() {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(8)..].join(" | ");
    Ok(Some(format!("{:?} exited {}: {tail}", cmd.get_program(), out.status.code().unwrap_or(-1))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(len: u64, hash: u64) -> Content {
        Content::File { len, hash }
    }

    #[test]
    fn old_or_new_holds_and_everything_else_is_named() {
        let (old, new) = (file(10, 1), file(20, 2));
        assert_eq!(classify(&old, &new, &new, false), None);
        assert_eq!(classify(&old, &new, &old, false), None);
        assert_eq!(classify(&old, &new, &old, true), Some(Kind::NotDurable));
        assert_eq!(classify(&old, &new, &new, true), None);
        assert_eq!(classify(&old, &new, &file(0, 9), false), Some(Kind::ZeroLength));
        assert_eq!(classify(&old, &new, &file(15, 3), false), Some(Kind::Torn));
        assert_eq!(classify(&old, &new, &file(20, 3), false), Some(Kind::Torn), "right length, wrong bytes");
        assert_eq!(classify(&old, &new, &Content::Absent, false), Some(Kind::LostOld));
        assert_eq!(classify(&old, &new, &Content::Dir, false), Some(Kind::Torn));
    }

    #[test]
    fn for_an_install_absent_is_the_old_version_and_an_empty_new_file_is_no_loss() {
        let new = file(5, 1);
        assert_eq!(classify(&Content::Absent, &new, &Content::Absent, false), None);
        assert_eq!(classify(&Content::Absent, &new, &Content::Absent, true), Some(Kind::NotDurable));
        assert_eq!(classify(&Content::Absent, &new, &file(0, 0), false), Some(Kind::ZeroLength));
        let empty = file(0, 7);
        assert_eq!(classify(&Content::Absent, &empty, &empty, true), None);
    }
}
