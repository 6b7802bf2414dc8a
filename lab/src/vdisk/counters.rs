//! What the emulated device saw: writes, bytes, flushes, discards, and the time it made its
//! callers wait.
//!
//! The bench puts these beside every time it reports, because a time without the number of
//! flushes behind it cannot be explained. The server bumps them with relaxed atomics (one
//! writer, readers only want a recent total); they must never feed back into what the server
//! does.

use std::fmt;
use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of the device's counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Write requests served (one per FUSE write; the kernel splits large writes at 1 MiB).
    pub writes: u64,
    /// Bytes written by those requests.
    pub bytes: u64,
    /// Cache flushes: fsyncs of the image, i.e. FLUSH requests and the flush the block layer
    /// issues after each FUA write.
    pub flushes: u64,
    /// Discards (fallocate punch-hole).
    pub discards: u64,
    /// Write-zeroes requests (fallocate zero-range).
    pub zeroes: u64,
    /// Time slept for flush latency: `flushes` times the profile's latency.
    pub flush_wait: Duration,
    /// Time slept to hold writes to the profile's bandwidth.
    pub write_wait: Duration,
}

impl Counters {
    /// What happened between `earlier` and `self` (saturating, so a mixed-up order gives zeros,
    /// never a panic).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            writes: self.writes.saturating_sub(earlier.writes),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            flushes: self.flushes.saturating_sub(earlier.flushes),
            discards: self.discards.saturating_sub(earlier.discards),
            zeroes: self.zeroes.saturating_sub(earlier.zeroes),
            flush_wait: self.flush_wait.saturating_sub(earlier.flush_wait),
            write_wait: self.write_wait.saturating_sub(earlier.write_wait),
        }
    }
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, earlier: Counters) -> Counters {
        self.since(&earlier)
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} writes, {} bytes, {} flushes, {} discards, {} write-zeroes; slept {:.3?} for flushes, {:.3?} for bandwidth",
            self.writes, self.bytes, self.flushes, self.discards, self.zeroes, self.flush_wait, self.write_wait
        )
    }
}

/// The live counters the server thread bumps.
#[derive(Debug, Default)]
pub(crate) struct LiveCounters {
    writes: AtomicU64,
    bytes: AtomicU64,
    flushes: AtomicU64,
    discards: AtomicU64,
    zeroes: AtomicU64,
    flush_wait_ns: AtomicU64,
    write_wait_ns: AtomicU64,
}

impl LiveCounters {
    pub(crate) fn write(&self, bytes: u64) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn flush(&self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn discard(&self) {
        self.discards.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn zeroes(&self) {
        self.zeroes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn flush_wait(&self, d: Duration) {
        self.flush_wait_ns.fetch_add(nanos(d), Ordering::Relaxed);
    }

    pub(crate) fn write_wait(&self, d: Duration) {
        self.write_wait_ns.fetch_add(nanos(d), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        Counters {
            writes: self.writes.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            discards: self.discards.load(Ordering::Relaxed),
            zeroes: self.zeroes.load(Ordering::Relaxed),
            flush_wait: Duration::from_nanos(self.flush_wait_ns.load(Ordering::Relaxed)),
            write_wait: Duration::from_nanos(self.write_wait_ns.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_subtracts_and_saturates() {
        let live = LiveCounters::default();
        let before = live.snapshot();
        live.write(4096);
        live.write(512);
        live.flush();
        live.flush_wait(Duration::from_millis(10));
        let after = live.snapshot();
        let d = after - before;
        assert_eq!((d.writes, d.bytes, d.flushes), (2, 4608, 1));
        assert_eq!(d.flush_wait, Duration::from_millis(10));
        assert_eq!(before.since(&after), Counters::default());
    }
}
