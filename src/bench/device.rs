//! Where a run's filesystem lives: a pluggable provider of the backing file under the loop
//! device, with optional counters of what reached the device.
//!
//! Why pluggable: the native provider (a sparse file in the bench's scratch directory) measures
//! this machine; the virtual disk (`src/vdisk/`, `--device`) will add device profiles and count
//! the flushes and bytes that reached the device, which is where durability is really paid.
//! The run loop only sees this trait, so adding a provider touches nothing else.
//!
//! A provider must hand out a fresh, empty device for every run and must never reuse one that a
//! previous run wrote to.

use crate::scratchfs::ScratchFs;
use serde::Serialize;
use std::io;
use std::path::Path;

/// What reached the device, as a provider counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Cache flushes (FLUSH/FUA requests) the device received.
    pub flushes: u64,
    /// Bytes written to the device.
    pub bytes: u64,
}

impl Counters {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: Counters) -> Counters {
        Counters {
            flushes: self.flushes.saturating_sub(earlier.flushes),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// Reads a device's counters; also keeps the device alive for as long as it is held.
pub trait CounterSource {
    /// The counters now (monotonic for the life of the device).
    fn read(&self) -> io::Result<Counters>;
}

/// A provider of fresh devices.
pub trait Device {
    /// A short description for the report's environment.
    fn describe(&self) -> String;

    /// Makes `fstype` on a fresh device of `size` bytes and mounts it with `options`; the
    /// backing file and mount point live under `scratch`.
    fn fresh_filesystem(&self, fstype: &str, options: &str, size: u64, scratch: &Path) -> io::Result<DeviceFs>;
}

/// One run's mounted filesystem on its device. Dropping it unmounts first, then lets the device
/// go (field order is drop order).
pub struct DeviceFs {
    fs: ScratchFs,
    counters: Option<Box<dyn CounterSource>>,
}

impl DeviceFs {
    /// A mounted filesystem with, when the device counts, its counter source.
    pub fn new(fs: ScratchFs, counters: Option<Box<dyn CounterSource>>) -> DeviceFs {
        DeviceFs { fs, counters }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.fs.path()
    }

    /// The counters now, if this device counts.
    pub fn counters(&self) -> Option<io::Result<Counters>> {
        self.counters.as_ref().map(|c| c.read())
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

    fn fresh_filesystem(&self, fstype: &str, options: &str, size: u64, scratch: &Path) -> io::Result<DeviceFs> {
        let fs = ScratchFs::create(fstype, &scratch.join("disk.img"), size, &scratch.join("mnt"), options)?;
        Ok(DeviceFs::new(fs, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_since_is_the_difference_and_never_wraps() {
        let a = Counters { flushes: 3, bytes: 100 };
        let b = Counters { flushes: 5, bytes: 4196 };
        assert_eq!(b.since(a), Counters { flushes: 2, bytes: 4096 });
        assert_eq!(a.since(b), Counters::default());
    }
}
