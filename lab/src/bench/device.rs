//! Where a run's filesystem lives: a pluggable provider of the backing file under the loop
//! device, with optional counters of what reached the device.
//!
//! Why pluggable: the native provider (a sparse file in the bench's scratch directory) measures
//! this machine; the virtual disk (`src/vdisk/`, `--device`) adds device profiles and counts
//! the flushes and bytes that reached the device, which is where durability is really paid.
//! The run loop only sees this trait: the virtual provider starts a `VDisk` per run, puts
//! `ScratchFs::on_existing` on its image and hands the disk over as the [`DeviceInstance`],
//! which drops after the filesystem.
//!
//! A provider must hand out a fresh, empty device for every run and must never reuse one that a
//! previous run wrote to.

use crate::scratchfs::ScratchFs;
use crate::vdisk::{Counters, Profile, VDisk};
use serde::Serialize;
use std::io;
use std::path::Path;

/// What reached the device during one run, as the CSV and JSON keep it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceUsage {
    /// Cache flushes (FLUSH requests, and the flush after each FUA write).
    pub flushes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Write requests.
    pub writes: u64,
}

impl From<Counters> for DeviceUsage {
    fn from(c: Counters) -> DeviceUsage {
        DeviceUsage { flushes: c.flushes, bytes: c.bytes, writes: c.writes }
    }
}

/// The device under one run's filesystem (a virtual disk, say): kept alive until the
/// filesystem is down, and asked what reached it.
pub trait DeviceInstance {
    /// The counters since the device started, if it counts.
    fn counters(&self) -> Option<Counters>;
}

/// A provider of fresh devices.
pub trait Device {
    /// A short description for the report's environment.
    fn describe(&self) -> String;

    /// Makes `fstype` on a fresh device of `size` bytes and mounts it with `options`; the
    /// backing file and mount point live under `scratch`.
    fn fresh_filesystem(
        &self,
        fstype: &str,
        options: &str,
        size: u64,
        scratch: &Path,
    ) -> io::Result<DeviceFs>;
}

/// One run's mounted filesystem on its device. Dropping it unmounts first, then lets the device
/// go (field order is drop order).
pub struct DeviceFs {
    fs: ScratchFs,
    device: Option<Box<dyn DeviceInstance>>,
}

impl DeviceFs {
    /// A mounted filesystem and, when it is not a plain file of this machine, its device.
    pub fn new(fs: ScratchFs, device: Option<Box<dyn DeviceInstance>>) -> DeviceFs {
        DeviceFs { fs, device }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.fs.path()
    }

    /// The device's counters now, if it counts.
    pub fn counters(&self) -> Option<Counters> {
        self.device.as_ref().and_then(|d| d.counters())
    }

    /// Unmounts, reporting failure, then releases the device.
    pub fn teardown(self) -> io::Result<()> {
        self.fs.teardown()
    }
}

/// The machine itself: a sparse file in the scratch directory, on whatever the host filesystem
/// and disk under `$TMPDIR` are. It counts nothing.
#[derive(Debug, Default)]
pub struct Native;

impl Device for Native {
    fn describe(&self) -> String {
        "native (sparse backing file on the host filesystem)".to_string()
    }

    fn fresh_filesystem(
        &self,
        fstype: &str,
        options: &str,
        size: u64,
        scratch: &Path,
    ) -> io::Result<DeviceFs> {
        let fs = ScratchFs::create(
            fstype,
            &scratch.join("disk.img"),
            size,
            &scratch.join("mnt"),
            options,
        )?;
        Ok(DeviceFs::new(fs, None))
    }
}

/// A virtual disk with a device profile (`--device hdd`, `--device flush=8ms,bw=150MB/s`): a
/// fresh in-memory disk per run, which sleeps the profile's flush latency on every flush, paces
/// writes to its bandwidth, and counts both.
#[derive(Debug)]
pub struct Virtual {
    pub profile: Profile,
}

impl Device for Virtual {
    fn describe(&self) -> String {
        let bandwidth = self
            .profile
            .bandwidth()
            .map_or("unlimited".to_string(), |b| format!("{} MB/s", b / 1_000_000));
        format!(
            "{} (virtual disk: flush {:?}, bandwidth {bandwidth})",
            self.profile.name(),
            self.profile.flush_latency()
        )
    }

    fn fresh_filesystem(
        &self,
        fstype: &str,
        options: &str,
        size: u64,
        scratch: &Path,
    ) -> io::Result<DeviceFs> {
        let dir = scratch.join("vdisk");
        std::fs::create_dir_all(&dir)?;
        // The virtual disk is made of whole sectors; a workload's estimate is any number.
        let size = size.next_multiple_of(1 << 20);
        let disk = VDisk::start(&self.profile, size, &dir, None)
            .map_err(|e| io::Error::other(unpack::error::one_line(&e)))?;
        // The filesystem is dropped before the disk (DeviceFs's field order).
        let fs = ScratchFs::on_existing(fstype, disk.image(), &scratch.join("mnt"), options)?;
        Ok(DeviceFs::new(fs, Some(Box::new(disk))))
    }
}

impl DeviceInstance for VDisk {
    fn counters(&self) -> Option<Counters> {
        VDisk::counters(self)
    }
}

/// The provider for `--device NAME`: `native` is the machine itself.
pub fn for_profile(profile: Profile) -> Box<dyn Device> {
    if profile.is_emulated() {
        Box::new(Virtual { profile })
    } else {
        Box::new(Native)
    }
}
