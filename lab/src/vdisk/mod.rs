//! A virtual disk with a device profile, counters and a write log.
//!
//! A cache flush costs about 0.05 ms on a server NVMe drive with power-loss protection, 1 to
//! 8 ms on a consumer SSD, 10 ms or more on a spinning disk and far more on an SD card; per-file
//! fsync pays it once per file, a batched strategy once per package. So the bench's matrix only
//! means something with the device named, and this module names it: a FUSE server inside the
//! calling process exposes one file, `DIR/disk.img`, held in a memfd; a loop device goes on that
//! file and the filesystem under test on the loop device. The loop driver turns every block
//! write into a write of `disk.img` and every cache flush into an fsync of it, so the server
//! sees the device's whole life: it sleeps the profile's flush latency on each fsync, paces
//! writes to its bandwidth, counts, and logs everything in the dm-log-writes format.
//!
//! ```text
//!   ext4 ──▶ /dev/loopN ──(write, fsync, fallocate of DIR/disk.img)──▶ FUSE ──▶ this process:
//!                                                   sleep, pace, count, log ──▶ memfd
//! ```
//!
//! Buffered loop I/O, not direct I/O: with FUSE writeback caching off, a buffered write of
//! `disk.img` is sent to the server before the write returns (write-through), and a flush
//! arrives as an fsync, so buffered I/O already gives the server every write and every flush,
//! in order, on any kernel. Direct I/O adds nothing for the server to see, needs the FUSE file
//! to accept `O_DIRECT`, and submits requests asynchronously, so the order in which in-flight
//! writes reach the server depends on timing; buffered, the loop worker performs one request at
//! a time. (Measured: 10 fsyncs on ext4 give the server the same bytes and the same 20 flushes
//! either way, in 47 write requests buffered against 31 direct; see docs/devices.md,
//! "Measured".) It is also what `ScratchFs` attaches by default.
//!
//! Teardown order is the one thing that can go badly wrong: a filesystem must be unmounted and
//! its loop device detached before the FUSE server stops, or the loop device is left pointing at
//! a dead file and the filesystem's last writes fail. [`VDisk::scratch_fs`] returns a guard that
//! borrows the disk, so the compiler refuses to stop the disk first. Whoever attaches the image
//! by hand ([`VDisk::image`] with `scratchfs::ScratchFs::on_existing`) must declare the disk
//! first so it drops last; if they get it wrong, stopping the disk takes down whatever still
//! uses its image (unmounts, detaches) before the FUSE mount, and says so in its error.
//!
//! This module never stops the server while a loop device still uses the image, never keeps
//! bytes on a filesystem that could itself sit on the device, and never touches a loop device
//! or mount that does not depend on its own image.

pub mod counters;
mod fuse;
pub mod log;
mod pacer;
pub mod profile;

pub use counters::Counters;
pub use fuse::{IMAGE_NAME, MARK_XATTR};
pub use profile::{Profile, ProfileError};

use crate::scratchfs::{self, LoopDevice, Mounted, ScratchFs};
use fuse::{lock, Server, Shared};
use log::{LogError, LogWriter};
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::ops::Deref;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a teardown step retries before it gives up on a busy mount.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(10);

/// What can go wrong with a virtual disk. Every variant names the path it is about.
#[derive(Debug, thiserror::Error)]
pub enum VdiskError {
    /// A file or directory operation failed.
    #[error("{path}: {what}")]
    Io { path: PathBuf, what: &'static str, source: io::Error },
    /// The size is not a positive multiple of the 512-byte sector.
    #[error("{path}: a disk of {size} bytes: the size must be a positive multiple of 512")]
    Size { path: PathBuf, size: u64 },
    /// A write log needs the FUSE server, which `native` does not run.
    #[error("{path}: the native profile cannot keep a write log (use an emulated profile, e.g. flush=0ms)")]
    LogNeedsEmulation { path: PathBuf },
    /// The write log cannot live inside the directory the disk is served in.
    #[error("{path}: the write log cannot live inside {dir}, where the disk is served")]
    LogInsideDisk { path: PathBuf, dir: PathBuf },
    /// The FUSE filesystem could not be mounted.
    #[error("cannot serve a virtual disk on {path}")]
    Mount { path: PathBuf, source: io::Error },
    /// The FUSE filesystem could not be unmounted.
    #[error("cannot unmount the virtual disk at {path}")]
    Unmount { path: PathBuf, source: io::Error },
    /// The server thread failed or did not end.
    #[error("the virtual disk server for {path} {reason}")]
    Server { path: PathBuf, reason: String },
    /// A mark label that cannot be logged.
    #[error("{path}: mark '{label}': {reason}")]
    Mark { path: PathBuf, label: String, reason: String },
    /// The write log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Making or mounting the scratch filesystem on the image failed.
    #[error("scratch filesystem on {path}")]
    Scratch { path: PathBuf, source: io::Error },
    /// The disk stopped while loop devices still used its image; they were taken down first.
    #[error("{path} was still in use by {devices:?} when the disk stopped: they were unmounted and detached first (tear the filesystem down before the disk)")]
    LeftAttached { path: PathBuf, devices: Vec<PathBuf> },
}

/// A virtual disk: `DIR/disk.img`, emulated by a FUSE server on its own thread of this process
/// (or a plain sparse file for [`Profile::Native`]). Stop it with [`VDisk::stop`]; dropping it
/// does the same, best effort.
#[derive(Debug)]
pub struct VDisk {
    profile: Profile,
    dir: PathBuf,
    image: PathBuf,
    log: Option<PathBuf>,
    server: Option<Running>,
    stopped: bool,
}

/// The FUSE side of an emulated disk while it runs.
#[derive(Debug)]
struct Running {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<io::Result<()>>>,
    /// The FUSE mount's device number, to recognise the mount as still ours.
    fuse_dev: u64,
    io_flusher: bool,
}

impl VDisk {
    /// Serves a disk of `size` bytes (a multiple of 512) as `dir/disk.img`. For an emulated
    /// profile the FUSE filesystem is mounted on `dir` itself (an existing directory) and `log`,
    /// if given, receives the dm-log-writes log; for `native`, `dir/disk.img` is a new sparse
    /// file, removed again when the disk stops.
    pub fn start(
        profile: &Profile,
        size: u64,
        dir: &Path,
        log: Option<&Path>,
    ) -> Result<VDisk, VdiskError> {
        let dir = dir.canonicalize().map_err(|source| VdiskError::Io {
            path: dir.to_path_buf(),
            what: "the directory to serve the disk in",
            source,
        })?;
        let image = dir.join(IMAGE_NAME);
        if size == 0 || size % u64::from(log::SECTOR_SIZE) != 0 {
            return Err(VdiskError::Size { path: image, size });
        }
        // `stopped` until there is something to take down, so an early error removes nothing.
        let mut disk =
            VDisk { profile: profile.clone(), dir, image, log: None, server: None, stopped: true };
        match profile {
            Profile::Native => {
                if let Some(log) = log {
                    return Err(VdiskError::LogNeedsEmulation { path: log.to_path_buf() });
                }
                let file =
                    File::create_new(&disk.image).map_err(|source| disk.io("create", source))?;
                disk.stopped = false;
                file.set_len(size).map_err(|source| disk.io("set the size of", source))?;
            }
            Profile::Emulated { flush_latency, bandwidth, .. } => {
                let writer = match log {
                    Some(path) => Some(disk.create_log(path)?),
                    None => None,
                };
                let backing = memfd(size).map_err(|source| disk.io("a memfd to hold", source))?;
                let shared = Arc::new(Shared::new(writer));
                let server = Server::new(backing, size, *flush_latency, *bandwidth, shared.clone());
                let (thread, io_flusher) = spawn_server(server, &disk.dir)?;
                let fuse_dev = std::fs::metadata(&disk.dir).map(|m| m.dev()).unwrap_or(0);
                disk.server = Some(Running { shared, thread: Some(thread), fuse_dev, io_flusher });
                disk.stopped = false;
                // From here on, Drop takes the mount down if anything below fails.
                let len =
                    std::fs::metadata(&disk.image).map_err(|source| disk.io("stat", source))?.len();
                if len != size {
                    return Err(VdiskError::Server {
                        path: disk.image.clone(),
                        reason: format!("serves {len} bytes instead of {size}"),
                    });
                }
            }
        }
        Ok(disk)
    }

    /// The image to attach a loop device to. Whoever attaches it must detach it before the disk
    /// stops; [`VDisk::scratch_fs`] does that for you.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// The directory the disk is served in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The profile it emulates.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The write log, if one is kept.
    pub fn log_path(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// True when the server thread is an IO flusher (`PR_SET_IO_FLUSHER`). Setting that needs
    /// CAP_SYS_RESOURCE, which containers often drop; without it the disk works the same, but
    /// under heavy memory pressure reclaim could wait on writeback through this very device
    /// while the server waits for memory. Callers should warn when this is false.
    /// Always true for `native`, which has no server.
    pub fn is_io_flusher(&self) -> bool {
        self.server.as_ref().is_none_or(|s| s.io_flusher)
    }

    /// The counters so far; `None` for `native`, which has no server to count.
    pub fn counters(&self) -> Option<Counters> {
        self.server.as_ref().map(|s| s.shared.counters.snapshot())
    }

    /// Adds a MARK entry labelled `label` to the write log, after every write that completed
    /// before the call. A no-op without a log. Labels are 1 to 479 bytes without NUL.
    pub fn mark(&self, label: &str) -> Result<(), VdiskError> {
        let mark_err = |reason: String| VdiskError::Mark {
            path: self.image.clone(),
            label: label.to_string(),
            reason,
        };
        log::check_mark(label).map_err(mark_err)?;
        if self.server.is_none() {
            return Ok(());
        }
        // In band, through the kernel, so the mark is ordered after the writes it follows.
        rustix::fs::setxattr(
            &self.image,
            MARK_XATTR,
            label.as_bytes(),
            rustix::fs::XattrFlags::empty(),
        )
        .map_err(|e| mark_err(io::Error::from(e).to_string()))
    }

    /// Makes `fstype` on the image (through a new loop device) and mounts it on `target` with
    /// `options`. The guard borrows the disk, so the filesystem always comes down first.
    pub fn scratch_fs(
        &self,
        fstype: &str,
        target: &Path,
        options: &str,
    ) -> Result<DiskFs<'_>, VdiskError> {
        let fs = ScratchFs::on_existing(fstype, &self.image, target, options)
            .map_err(|source| VdiskError::Scratch { path: self.image.clone(), source })?;
        Ok(DiskFs { fs, _disk: PhantomData })
    }

    /// Loop devices attached to the image right now.
    pub fn holders(&self) -> Vec<PathBuf> {
        let Ok(dir) = std::fs::read_dir("/sys/block") else { return Vec::new() };
        let mut devices: Vec<PathBuf> = dir
            .filter_map(Result::ok)
            .map(|e| Path::new("/dev").join(e.file_name()))
            .filter(|dev| scratchfs::backing_file(dev).as_deref() == Some(self.image.as_path()))
            .collect();
        devices.sort();
        devices
    }

    /// Stops the disk: takes down anything still using the image (an error, reported after
    /// cleaning up), unmounts the FUSE filesystem, waits for the server, finishes the log.
    pub fn stop(mut self) -> Result<(), VdiskError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), VdiskError> {
        if std::mem::replace(&mut self.stopped, true) {
            return Ok(());
        }
        let mut first: Option<VdiskError> = None;
        let left = self.release_holders();
        if !left.is_empty() {
            unpack::stderr!(
                "warning: {} still in use by {left:?}: taking them down first",
                self.image.display()
            );
            first = Some(VdiskError::LeftAttached { path: self.image.clone(), devices: left });
        }
        let result = match self.server.take() {
            Some(running) => self.stop_server(running),
            None => std::fs::remove_file(&self.image).map_err(|source| self.io("remove", source)),
        };
        match (first, result) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(()),
        }
    }

    /// The safety net: unmounts every mount of every loop device on the image, detaches them.
    fn release_holders(&self) -> Vec<PathBuf> {
        let devices = self.holders();
        for dev in &devices {
            let devno = std::fs::read_to_string(
                Path::new("/sys/block").join(dev.file_name().unwrap_or_default()).join("dev"),
            );
            let devno = devno.ok().and_then(|s| {
                let (a, b) = s.trim().split_once(':')?;
                Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?))
            });
            if let Some((major, minor)) = devno {
                let mut mounts = crate::mounts::of_device(major, minor).unwrap_or_default();
                // Newest first, so stacked mounts come off in reverse.
                mounts.reverse();
                for m in mounts {
                    drop(Mounted::adopt(&m.mount_point));
                }
            }
            drop(LoopDevice::adopt(dev, &self.image));
        }
        devices
    }

    fn stop_server(&self, mut running: Running) -> Result<(), VdiskError> {
        let mut first: Option<VdiskError> = self.unmount_fuse(running.fuse_dev).err();
        if let Some(thread) = running.thread.take() {
            let deadline = Instant::now() + UNMOUNT_PATIENCE;
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let outcome = if thread.is_finished() {
                match thread.join() {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(format!("failed: {e}")),
                    Err(_) => Some("panicked".to_string()),
                }
            } else {
                Some("did not end after its filesystem was unmounted".to_string())
            };
            if let Some(reason) = outcome {
                first.get_or_insert(VdiskError::Server { path: self.dir.clone(), reason });
            }
        }
        if let Some(e) = lock(&running.shared.log_failure).take() {
            first.get_or_insert(e.into());
        }
        if let Some(writer) = lock(&running.shared.log).take() {
            if let Err(e) = writer.finish() {
                first.get_or_insert(e.into());
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Unmounts the FUSE filesystem if it is still ours, patiently, lazily as a last resort.
    fn unmount_fuse(&self, fuse_dev: u64) -> Result<(), VdiskError> {
        let ours = || std::fs::metadata(&self.dir).map(|m| m.dev() == fuse_dev).unwrap_or(true);
        let deadline = Instant::now() + UNMOUNT_PATIENCE;
        loop {
            if !ours() {
                return Ok(());
            }
            match rustix::mount::unmount(&self.dir, rustix::mount::UnmountFlags::empty()) {
                Ok(()) => return Ok(()),
                Err(rustix::io::Errno::BUSY) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    // Detach it from the tree so nothing new can reach it; the server ends when
                    // the last open file on it closes.
                    let _ = rustix::mount::unmount(&self.dir, rustix::mount::UnmountFlags::DETACH);
                    return Err(VdiskError::Unmount { path: self.dir.clone(), source: e.into() });
                }
            }
        }
    }

    fn create_log(&mut self, path: &Path) -> Result<LogWriter, VdiskError> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = parent.canonicalize().map_err(|source| VdiskError::Io {
            path: path.to_path_buf(),
            what: "the directory of the write log",
            source,
        })?;
        if parent.starts_with(&self.dir) {
            return Err(VdiskError::LogInsideDisk {
                path: path.to_path_buf(),
                dir: self.dir.clone(),
            });
        }
        let path = parent.join(path.file_name().unwrap_or_default());
        let writer = LogWriter::create(&path)?;
        self.log = Some(path);
        Ok(writer)
    }

    fn io(&self, what: &'static str, source: io::Error) -> VdiskError {
        VdiskError::Io { path: self.image.clone(), what, source }
    }
}

impl Drop for VDisk {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            unpack::stderr!("warning: stopping the virtual disk: {e}");
        }
    }
}

/// A scratch filesystem on a [`VDisk`]'s image. It borrows the disk, so it is always
/// unmounted and its loop device detached before the disk can stop. Dereferences to
/// [`ScratchFs`] for its mount point and loop device.
#[derive(Debug)]
pub struct DiskFs<'d> {
    fs: ScratchFs,
    _disk: PhantomData<&'d VDisk>,
}

impl DiskFs<'_> {
    /// Unmounts (reporting failure) and detaches.
    pub fn teardown(self) -> Result<(), VdiskError> {
        let path = self.fs.path().to_path_buf();
        self.fs.teardown().map_err(|source| VdiskError::Scratch { path, source })
    }
}

impl Deref for DiskFs<'_> {
    type Target = ScratchFs;
    fn deref(&self) -> &ScratchFs {
        &self.fs
    }
}

/// A sparse in-memory file of `size` bytes: only written blocks cost memory, and it vanishes
/// with the process whatever happens.
fn memfd(size: u64) -> io::Result<File> {
    let fd = rustix::fs::memfd_create("unpack-vdisk", rustix::fs::MemfdFlags::CLOEXEC)?;
    let file = File::from(fd);
    file.set_len(size)?;
    Ok(file)
}

/// Mounts the server on `dir` from a new thread and serves it there until it is unmounted;
/// returns the thread and whether it is an IO flusher. The thread makes itself an IO flusher
/// first, so that the session's serving thread, which it spawns, inherits the flag: memory
/// reclaim must never wait on writeback through the device the thread itself serves.
fn spawn_server(
    server: Server,
    dir: &Path,
) -> Result<(JoinHandle<io::Result<()>>, bool), VdiskError> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("unpack-vdisk".to_string()),
        fuser::MountOption::Subtype("unpack-vdisk".to_string()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoExec,
        fuser::MountOption::NoAtime,
    ];
    // One thread: the log's order is the order requests were answered.
    config.n_threads = Some(1);
    let (tx, rx) = mpsc::sync_channel::<io::Result<bool>>(1);
    let mount_point = dir.to_path_buf();
    let mount_err = |source| VdiskError::Mount { path: dir.to_path_buf(), source };
    let thread = std::thread::Builder::new()
        .name("unpack-vdisk".to_string())
        .spawn(move || {
            let io_flusher = rustix::process::configure_io_flusher_behavior(true).is_ok();
            match fuser::Session::new(server, &mount_point, &config) {
                Ok(session) => {
                    let _ = tx.send(Ok(io_flusher));
                    session.run()
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    Ok(())
                }
            }
        })
        .map_err(mount_err)?;
    match rx.recv() {
        Ok(Ok(io_flusher)) => Ok((thread, io_flusher)),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(mount_err(e))
        }
        Err(_) => {
            let _ = thread.join();
            Err(mount_err(io::Error::other("the server thread ended before mounting")))
        }
    }
}
