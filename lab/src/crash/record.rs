//! Recording one cell: a real unpack on a real filesystem on a virtual disk that logs every
//! write and flush, with marks at the moments that matter.
//!
//! The run, in order: mkfs and mount on the disk; a `root` directory; for an upgrade, the older
//! version installed with `unpack -s none` (for `upgrade-db`, installed and configured by the
//! real dpkg in a new admin directory, which puts the engine in its database mode; for `apt`,
//! the prepared root copied in); syncfs; mark `start`; the real `unpack` binary with
//! the strategy under test (for `apt`, `apt-get upgrade`: [`super::apt::Apt::upgrade`]); mark
//! `returned`; the settle time, while the filesystem runs on by
//! itself (periodic journal commits, writeback); mark `settled`; unmount; stop the disk. The
//! log is everything [`super::states`] needs.
//!
//! The settle time is the point of the exercise for the unsafe strategies: the classic loss is a
//! periodic journal commit recording the renames before delayed allocation has written the data,
//! so the default is longer than the filesystem's commit interval. This module never checks
//! anything, and never leaves a mount or a loop device behind: the disk's guards take them down
//! on every path out.

use super::CrashError;
use crate::vdisk::{Profile, VDisk};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The device: emulated (so it can log) and as fast as the host, since only order matters here.
const PROFILE: &str = "flush=0ms";

/// The smallest disk: big enough that mkfs picks the block sizes and journal a real system has
/// (ext4 goes down to 1 KiB blocks below 512 MiB; XFS needs 300 MiB).
pub const MIN_DISK_BYTES: u64 = 512 << 20;

/// The unpack root inside the filesystem.
pub const ROOT_DIR: &str = "root";

/// How one cell is run.
#[derive(Debug, Clone)]
pub struct Setup<'a> {
    pub fstype: &'a str,
    pub options: &'a str,
    pub strategy: &'a str,
    /// The packages of the call under test, and its options besides `-q -s STRATEGY`
    /// (`--bootstrap --no-scripts` for the bootstrap scenario).
    pub packages: &'a [PathBuf],
    pub flags: &'a [&'a str],
    /// The older version to install first (the upgrade scenarios).
    pub older: Option<&'a Path>,
    /// The root keeps dpkg's database: the older version is installed and configured by the
    /// real dpkg (`upgrade-db`) rather than by `unpack -s none`.
    pub database: bool,
    /// The `unpack` binary.
    pub unpack: &'a Path,
    /// The apt scenario's prepared root: copied in, then `apt-get upgrade` is the call.
    pub apt: Option<&'a super::apt::Apt>,
    pub settle: Duration,
    pub disk_bytes: u64,
    /// A new directory for the disk, the mount point and the log.
    pub dir: &'a Path,
}

/// What a recorded cell left: its write log.
#[derive(Debug, Clone)]
pub struct Recording {
    pub log: PathBuf,
    /// False when the disk's server could not be made an IO flusher (see `VDisk::is_io_flusher`).
    pub io_flusher: bool,
}

/// Runs the cell and returns its log.
pub fn record(setup: &Setup<'_>) -> Result<Recording, CrashError> {
    let disk_dir = setup.dir.join("disk");
    std::fs::create_dir_all(&disk_dir).map_err(|source| CrashError::Io {
        path: disk_dir.clone(),
        what: "creating",
        source,
    })?;
    let log = setup.dir.join("write.log");
    let profile: Profile =
        PROFILE.parse().map_err(|e| CrashError::Usage(format!("device profile {PROFILE}: {e}")))?;
    let disk = VDisk::start(&profile, setup.disk_bytes, &disk_dir, Some(&log))?;
    let io_flusher = disk.is_io_flusher();
    let ran = run_on(&disk, setup);
    let stopped = disk.stop();
    ran?;
    stopped?;
    Ok(Recording { log, io_flusher })
}

fn run_on(disk: &VDisk, setup: &Setup<'_>) -> Result<(), CrashError> {
    let fs = disk.scratch_fs(setup.fstype, &setup.dir.join("mnt"), setup.options)?;
    let root = fs.path().join(ROOT_DIR);
    std::fs::create_dir(&root).map_err(|source| CrashError::Io {
        path: root.clone(),
        what: "creating",
        source,
    })?;
    match setup.older {
        Some(older) if setup.database => install_with_dpkg(older, &root)?,
        Some(older) => super::unpack(setup.unpack, "none", &[], &[older], &root)?,
        None => {}
    }
    if let Some(apt) = setup.apt {
        apt.copy_into(&root)?;
    }
    syncfs(&root)?;
    disk.mark(super::states::MARK_START)?;
    match setup.apt {
        Some(_) => super::apt::Apt::upgrade(&root, setup.strategy)?,
        None => super::unpack(setup.unpack, setup.strategy, setup.flags, setup.packages, &root)?,
    }
    disk.mark(super::states::MARK_RETURNED)?;
    settle(setup.settle)?;
    disk.mark(super::states::MARK_SETTLED)?;
    fs.teardown()?;
    Ok(())
}

/// Lets the filesystem run on for `time`, watching for a signal (a settle time can be half a
/// minute).
fn settle(time: Duration) -> Result<(), CrashError> {
    let end = std::time::Instant::now() + time;
    loop {
        super::check_interrupt()?;
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Makes dpkg's admin directory in `root` and installs `package` there as dpkg does:
/// `dpkg --unpack`, then `dpkg --configure -a`, so that the old state is exactly dpkg's.
pub fn install_with_dpkg(package: &Path, root: &Path) -> Result<(), CrashError> {
    crate::bench::peers::install_configured(&[package.to_path_buf()], root).map_err(|e| {
        CrashError::Tool {
            path: "dpkg".into(),
            reason: format!("installing {} in {}: {e}", package.display(), root.display()),
        }
    })
}

fn syncfs(path: &Path) -> Result<(), CrashError> {
    let err = |source: std::io::Error| CrashError::Io {
        path: path.to_path_buf(),
        what: "syncfs",
        source,
    };
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| err(e.into()))?;
    rustix::fs::syncfs(&fd).map_err(|e| err(e.into()))
}

/// The settle time when none is asked for: the filesystem's periodic commit interval plus two
/// seconds. ext3/ext4 commit every 5 s (`commit=`), btrfs every 30 s (`commit=`), and XFS
/// pushes its log from the `xfssyncd` worker (`fs.xfs.xfssyncd_centisecs`, 30 s).
pub fn default_settle(fstype: &str, options: &str) -> Duration {
    let commit = options
        .split(',')
        .find_map(|o| o.strip_prefix("commit="))
        .and_then(|v| v.parse::<u64>().ok());
    let interval = match fstype {
        "xfs" => std::fs::read_to_string("/proc/sys/fs/xfs/xfssyncd_centisecs")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(30), |centis| {
                Duration::from_millis(centis.saturating_mul(10))
            }),
        "btrfs" => Duration::from_secs(commit.unwrap_or(30)),
        _ => Duration::from_secs(commit.filter(|&c| c > 0).unwrap_or(5)),
    };
    interval + Duration::from_secs(2)
}

/// The disk for a package whose versions hold `bytes` together: at least [`MIN_DISK_BYTES`],
/// room for both versions and their temporary copies, a whole number of MiB.
pub fn disk_bytes(bytes: u64) -> u64 {
    let want = bytes.saturating_mul(4).saturating_add(64 << 20);
    want.max(MIN_DISK_BYTES).div_ceil(1 << 20).saturating_mul(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_outlasts_the_commit_interval_asked_for() {
        assert_eq!(default_settle("ext4", "defaults"), Duration::from_secs(7));
        assert_eq!(default_settle("ext4", "noauto_da_alloc,commit=1"), Duration::from_secs(3));
        assert_eq!(default_settle("btrfs", "defaults"), Duration::from_secs(32));
        assert!(default_settle("xfs", "defaults") > Duration::from_secs(2));
    }

    #[test]
    fn disks_are_whole_mebibytes_and_never_below_the_minimum() {
        assert_eq!(disk_bytes(0), MIN_DISK_BYTES);
        assert_eq!(disk_bytes(1 << 30) % (1 << 20), 0);
        assert!(disk_bytes(1 << 30) > 4 << 30);
    }
}
