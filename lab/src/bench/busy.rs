//! The busy-machine scenarios' background writer: another program dirtying data at a steady
//! rate while the unpacker runs, on the same filesystem (`busy`) or on another one
//! (`busy-elsewhere`).
//!
//! Why: dpkg left sync(2) for fsync(2) in 2010 "to avoid unrelated I/O when there's background
//! work being done". On an idle machine `batch` (sync) and `syncfs` look free; with somebody
//! else's dirty data around, sync(2) writes it all, on every filesystem, and syncfs(2) writes
//! what shares the root's filesystem. The writer makes that somebody, and its own throughput
//! during the unpack is reported, because an installer that stalls the machine's other work is
//! not free either.
//!
//! What it does: [`CHUNK`]-sized `pwrite`s into one file, paced to [`RATE`], wrapping around
//! at [`SPAN`] bytes (so a long run never fills the filesystem and its dirty data stays
//! bounded), and it never flushes. A write that comes late (blocked by the kernel's dirty
//! throttling or by somebody's sync) is not made up for with a burst: the missed slots are
//! lost, so its throughput shows the stall. It starts before the unpacker and has [`LEAD`]
//! bytes dirty before the unpacker is spawned, so that there is always something of its own to
//! flush when the unpacker's first sync comes.
//!
//! It runs on a thread of the bench, never inside the measured child, and writes only the one
//! file it creates, in a directory it is given; the caller removes that directory (or the
//! whole filesystem) after the run.

use super::device::DeviceUsage;
use serde::Serialize;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The rate the writer asks for: 64 MiB/s, a busy build or a database loading data.
pub const RATE: u64 = 64 << 20;
/// One write: 1 MiB.
pub const CHUNK: u64 = 1 << 20;
/// The writer's file never grows past this: it wraps around and dirties the same pages again.
pub const SPAN: u64 = 256 << 20;
/// Bytes written before the unpacker starts (a quarter second at [`RATE`]).
pub const LEAD: u64 = 16 << 20;
/// The writer's file, in the directory it is given.
pub const FILE_NAME: &str = "unpack-bench-busy-writer";

/// What the writer did while the unpacker ran, as the CSV and JSON keep it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WriterUsage {
    /// Bytes it wrote between the unpacker's spawn and its exit.
    pub bytes: u64,
    /// Those bytes over the same seconds, in MiB/s: [`RATE`] (64) when the unpack did not slow
    /// it down. Writes are whole MiBs, so a run of a tenth of a second reads ±10 MiB/s.
    pub mib_s: f64,
    /// What reached the writer's own device in that time, for `busy-elsewhere` on a device that
    /// counts (on the same filesystem, the run's `device` counters include it).
    pub device: Option<DeviceUsage>,
}

impl WriterUsage {
    /// The usage from `bytes` written in `seconds`.
    pub fn new(bytes: u64, seconds: f64, device: Option<DeviceUsage>) -> WriterUsage {
        let mib_s = if seconds > 0.0 { bytes as f64 / (1 << 20) as f64 / seconds } else { 0.0 };
        WriterUsage { bytes, mib_s, device }
    }
}

/// A running writer; [`Writer::stop`] it (dropping it stops it too).
pub struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Writer {
    /// Creates the writer's file in `dir` and starts writing; returns once [`LEAD`] bytes are
    /// written, or the writer's error.
    pub fn start(dir: &Path) -> io::Result<Writer> {
        let path = dir.join(FILE_NAME);
        let file = File::options().write(true).create_new(true).open(&path)?;
        let (stop, written) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (thread_stop, thread_written) = (stop.clone(), written.clone());
        let thread = std::thread::Builder::new()
            .name("busy-writer".into())
            .spawn(move || write_paced(&file, &thread_stop, &thread_written))?;
        let mut writer = Writer { stop, written, thread: Some(thread) };
        while writer.written() < LEAD {
            if writer.thread.as_ref().is_some_and(|t| t.is_finished()) {
                return writer
                    .halt()
                    .and(Err(io::Error::other("the writer stopped before its lead")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(writer)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    /// Stops the writer; its error, if a write failed.
    pub fn stop(mut self) -> io::Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> io::Result<()> {
        self.stop.store(true, Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the writer panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// The writer's loop: a [`CHUNK`] every `CHUNK / RATE` seconds, late slots dropped.
fn write_paced(file: &File, stop: &AtomicBool, written: &AtomicU64) -> io::Result<()> {
    let chunk: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8 + 1).collect();
    let interval = Duration::from_secs_f64(CHUNK as f64 / RATE as f64);
    let mut next = Instant::now();
    let mut offset = 0;
    while !stop.load(Relaxed) {
        file.write_all_at(&chunk, offset)?;
        offset = (offset + CHUNK) % SPAN;
        written.fetch_add(CHUNK, Relaxed);
        next += interval;
        let now = Instant::now();
        match next.checked_duration_since(now) {
            Some(wait) => std::thread::sleep(wait),
            None => next = now,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_writes_its_lead_before_returning_and_wraps_at_its_span() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::start(dir.path()).unwrap();
        assert!(writer.written() >= LEAD);
        writer.stop().unwrap();
        let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
        assert!((LEAD..=SPAN).contains(&len), "{len}");
    }

    #[test]
    fn a_directory_it_cannot_write_is_an_error_at_start() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Writer::start(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn throughput_is_mib_per_second() {
        assert_eq!(WriterUsage::new(32 << 20, 0.5, None).mib_s, 64.0);
        assert_eq!(WriterUsage::new(1 << 20, 0.0, None).mib_s, 0.0);
    }
}
