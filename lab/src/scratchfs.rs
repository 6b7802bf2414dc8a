//! Scratch filesystems on loop devices: make one, mount it with chosen options, and always take
//! it down again.
//!
//! The bench, the crash test, the virtual disk and the integration tests all need "a fresh ext4
//! with `nodelalloc` on a loop device". They get it here, so that the teardown order is right in
//! one place: unmount before detaching the loop device, detach before the backing file goes
//! away. Guards undo in `Drop`, so a failed run or a panicking test leaves no mount and no loop
//! device behind. This module never touches a device it did not attach itself or was not
//! explicitly handed (`adopt`), and a guard whose mount or device was already taken down by
//! someone else does nothing: a loop device number may by then belong to another user.
//!
//! It drives `losetup`, `mkfs.*` and `mount` (util-linux, e2fsprogs, xfsprogs, btrfs-progs):
//! those tools carry the per-filesystem knowledge (which mount options are flags and which are
//! data), and their error messages are the ones a filesystem person expects to read.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The filesystems the project knows how to make.
pub const FILESYSTEMS: &[&str] = &["ext4", "ext3", "xfs", "btrfs"];

/// A loop device attached to a backing file; detached on drop.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    /// The backing file as the kernel names it, to recognise the device as still ours.
    backing: PathBuf,
}

impl LoopDevice {
    /// Attaches `backing` to the first free loop device.
    pub fn attach(backing: &Path) -> io::Result<LoopDevice> {
        let out = run(Command::new("losetup").arg("--find").arg("--show").arg(backing))?;
        let path = PathBuf::from(out.trim());
        if !path.starts_with("/dev") {
            return Err(io::Error::other(format!(
                "losetup printed no device for {}",
                backing.display()
            )));
        }
        let backing = backing_file(&path).unwrap_or_else(|| backing.to_path_buf());
        Ok(LoopDevice { path, backing })
    }

    /// Takes charge of `path`, a loop device attached to `backing` by someone else, so that
    /// dropping the guard detaches it. For owners that must take down what depends on them
    /// (a virtual disk stopping while a loop device still uses its image).
    pub fn adopt(path: &Path, backing: &Path) -> LoopDevice {
        LoopDevice { path: path.to_path_buf(), backing: backing.to_path_buf() }
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        // A just-unmounted filesystem can keep the device busy for a moment; retry briefly. And
        // `losetup -d` succeeding is not enough: while any other process has the device open
        // (blkid, a btrfs device scan, another test's probe), the kernel only marks it to detach
        // on the last close (autoclear) and returns at once. Dropped must mean detached, so wait
        // until the device lets go of its backing file. Patiently: on 2 busy cores, with other
        // tests' loop devices being probed, letting go took more than 5 s now and then (the
        // apt crash scenario's recording with dpkg, whose disk took 2,000 flushes).
        let attached = || backing_file(&self.path).as_ref() == Some(&self.backing);
        for _ in 0..300 {
            if !attached() {
                return; // detached (and maybe reused by someone else)
            }
            let _ = Command::new("losetup").arg("-d").arg(&self.path).output();
            if !attached() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        unpack::stderr!("warning: could not detach {}", self.path.display());
    }
}

/// A mounted filesystem; unmounted on drop.
#[derive(Debug)]
pub struct Mounted {
    target: PathBuf,
    mounted: bool,
}

impl Mounted {
    /// `mount -t FSTYPE -o OPTIONS DEVICE TARGET`. `options` may be `defaults`.
    pub fn mount(fstype: &str, device: &Path, target: &Path, options: &str) -> io::Result<Mounted> {
        std::fs::create_dir_all(target)?;
        // Canonical, as /proc/self/mountinfo spells it, so `Drop` can tell whether it is mounted.
        let target = &target.canonicalize()?;
        run(Command::new("mount")
            .arg("-t")
            .arg(fstype)
            .arg("-o")
            .arg(options)
            .arg(device)
            .arg(target))?;
        Ok(Mounted { target: target.to_path_buf(), mounted: true })
    }

    /// Takes charge of `target`, mounted by someone else, so that dropping the guard unmounts
    /// it. `target` must be spelled as in `/proc/self/mountinfo` (absolute, canonical).
    pub fn adopt(target: &Path) -> Mounted {
        Mounted { target: target.to_path_buf(), mounted: true }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.target
    }

    /// Unmounts now and reports failure, instead of the best effort of `Drop`. A filesystem
    /// its owner unmounted already (the NFS rows unmount their backing filesystem themselves,
    /// see `bench::nfs::Server::unmount_backing`) is not a failure.
    pub fn unmount(mut self) -> io::Result<()> {
        self.mounted = false;
        if matches!(crate::mounts::is_mount_point(&self.target), Ok(false)) {
            return Ok(());
        }
        run(Command::new("umount").arg(&self.target)).map(drop)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.mounted {
            return;
        }
        for _ in 0..50 {
            if matches!(crate::mounts::is_mount_point(&self.target), Ok(false)) {
                return; // unmounted already
            }
            let ok = Command::new("umount").arg(&self.target).output().map(|o| o.status.success());
            if matches!(ok, Ok(true)) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // Last resort: detach lazily so the loop device can still go.
        let _ = Command::new("umount").arg("-l").arg(&self.target).output();
    }
}

/// The Debian package that ships `mkfs.FSTYPE`, for the error a user sees when it is missing.
pub fn mkfs_package(fstype: &str) -> &'static str {
    match fstype {
        "xfs" => "xfsprogs",
        "btrfs" => "btrfs-progs",
        _ => "e2fsprogs",
    }
}

/// Makes a filesystem of `fstype` on `device`, quietly and without asking questions.
pub fn mkfs(fstype: &str, device: &Path) -> io::Result<()> {
    if !FILESYSTEMS.contains(&fstype) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown filesystem '{fstype}' (known: {})", FILESYSTEMS.join(", ")),
        ));
    }
    let tool = format!("mkfs.{fstype}");
    let mut cmd = Command::new(&tool);
    match fstype {
        "xfs" | "btrfs" => cmd.arg("-f").arg("-q"),
        // No lazy init: its background thread would write during the measured runs.
        _ => cmd.arg("-F").arg("-q").arg("-E").arg("lazy_itable_init=0,lazy_journal_init=0"),
    };
    match run(cmd.arg(device)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{tool} not found: install the Debian package {}", mkfs_package(fstype)),
        )),
        other => other.map(drop),
    }
}

/// A sparse backing file of `size` bytes, a loop device on it, a fresh filesystem, mounted.
/// Dropping it unmounts, detaches and removes the backing file, in that order.
#[derive(Debug)]
pub struct ScratchFs {
    // Field order is drop order.
    mounted: Option<Mounted>,
    device: Option<LoopDevice>,
    backing: PathBuf,
    remove_backing: bool,
}

impl ScratchFs {
    /// Makes `fstype` on a new sparse file `backing` and mounts it on `target` with `options`.
    pub fn create(
        fstype: &str,
        backing: &Path,
        size: u64,
        target: &Path,
        options: &str,
    ) -> io::Result<ScratchFs> {
        let file = std::fs::File::create(backing)?;
        file.set_len(size)?;
        drop(file);
        let mut fs = ScratchFs {
            mounted: None,
            device: None,
            backing: backing.to_path_buf(),
            remove_backing: true,
        };
        fs.format_and_mount(fstype, target, options)?;
        Ok(fs)
    }

    /// Makes `fstype` on an existing backing file (for instance a virtual disk's `disk.img`) that
    /// this guard must not remove, and mounts it.
    pub fn on_existing(
        fstype: &str,
        backing: &Path,
        target: &Path,
        options: &str,
    ) -> io::Result<ScratchFs> {
        let mut fs = ScratchFs {
            mounted: None,
            device: None,
            backing: backing.to_path_buf(),
            remove_backing: false,
        };
        fs.format_and_mount(fstype, target, options)?;
        Ok(fs)
    }

    fn format_and_mount(&mut self, fstype: &str, target: &Path, options: &str) -> io::Result<()> {
        let device = LoopDevice::attach(&self.backing)?;
        mkfs(fstype, device.path())?;
        let mounted = Mounted::mount(fstype, device.path(), target, options)?;
        self.device = Some(device);
        self.mounted = Some(mounted);
        Ok(())
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.mounted.as_ref().expect("mounted until dropped").path()
    }

    /// The loop device.
    pub fn device(&self) -> &Path {
        self.device.as_ref().expect("attached until dropped").path()
    }

    /// Unmounts (reporting failure), detaches, removes the backing file.
    pub fn teardown(mut self) -> io::Result<()> {
        if let Some(m) = self.mounted.take() {
            m.unmount()?;
        }
        Ok(())
    }
}

impl Drop for ScratchFs {
    fn drop(&mut self) {
        drop(self.mounted.take());
        drop(self.device.take());
        if self.remove_backing {
            let _ = std::fs::remove_file(&self.backing);
        }
    }
}

/// The file a loop device is attached to, as the kernel names it (without the " (deleted)"
/// it appends once the file is removed); `None` when detached.
pub fn backing_file(device: &Path) -> Option<PathBuf> {
    let name = device.file_name()?;
    let sys = Path::new("/sys/block").join(name).join("loop/backing_file");
    let text = std::fs::read_to_string(sys).ok()?;
    let text = text.trim_end_matches('\n');
    Some(PathBuf::from(text.strip_suffix(" (deleted)").unwrap_or(text)))
}

/// Runs a command, returning its stdout, or an error carrying its stderr.
pub(crate) fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("{:?}: {e}", cmd.get_program())))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "{:?} {:?} failed: {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
