//! The flush and rename system calls the engine makes, each one counted.
//!
//! The report's `syscalls` object and the tests that check "`none` flushes nothing, `fsync`
//! flushes once per file" read these counters, so every flush or rename the engine makes must
//! go through here and nowhere else. The counters are atomics because `parallel` flushes from a
//! pool of threads.
//!
//! Each flush is also timed (`Latency`): filesystem people judge a flush by its latency
//! distribution (a device cache flush of ~8 ms, the variance of fdatasync), not by a total. The
//! record is a fixed log-scale histogram, not the samples, so that a 100,000-file fsync run
//! costs the same few kilobytes as a one-file run, and recording is two clock reads and three
//! relaxed atomic adds, which a flush of microseconds to milliseconds does not notice.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The counted calls. One instance per transaction.
#[derive(Debug, Default)]
pub struct Syscalls {
    fsync: AtomicU64,
    fdatasync: AtomicU64,
    sync: AtomicU64,
    syncfs: AtomicU64,
    syncfs_early: AtomicU64,
    sync_file_range: AtomicU64,
    rename: AtomicU64,
    latency: FlushLatency,
}

/// The latency record of each flush kind, beside the counts.
#[derive(Debug, Default)]
struct FlushLatency {
    fsync: Latency,
    fdatasync: Latency,
    sync: Latency,
    syncfs: Latency,
    sync_file_range: Latency,
}

/// A snapshot of [`Syscalls`], as the JSON report shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallCounts {
    pub fsync: u64,
    pub fdatasync: u64,
    pub sync: u64,
    pub syncfs: u64,
    /// The syncs of the early writeback (`early_writeback.rs`) during the
    /// write phase: how many depends on how long it took.
    pub syncfs_early: u64,
    pub sync_file_range: u64,
    pub rename: u64,
}

/// Which part of `sync_file_range(2)` to ask for.
#[derive(Debug, Clone, Copy)]
pub enum RangeSync {
    /// Start writeback of dirty pages (`SYNC_FILE_RANGE_WRITE`) without waiting.
    StartWrite,
    /// Wait for writeback already under way (`SYNC_FILE_RANGE_WAIT_BEFORE`).
    WaitBefore,
}

impl Syscalls {
    pub fn fsync(&self, fd: impl AsFd) -> io::Result<()> {
        self.fsync.fetch_add(1, Relaxed);
        self.latency.fsync.time(|| rustix::fs::fsync(fd)).map_err(io::Error::from)
    }

    pub fn fdatasync(&self, fd: impl AsFd) -> io::Result<()> {
        self.fdatasync.fetch_add(1, Relaxed);
        self.latency.fdatasync.time(|| rustix::fs::fdatasync(fd)).map_err(io::Error::from)
    }

    pub fn sync(&self) {
        self.sync.fetch_add(1, Relaxed);
        self.latency.sync.time(rustix::fs::sync);
    }

    pub fn syncfs(&self, fd: impl AsFd) -> io::Result<()> {
        self.syncfs.fetch_add(1, Relaxed);
        self.latency.syncfs.time(|| rustix::fs::syncfs(fd)).map_err(io::Error::from)
    }

    /// `sync_file_range(fd, 0, 0, flags)` over the whole file. Neither rustix nor nix wraps
    /// it, hence libc.
    pub fn sync_file_range(&self, fd: impl AsFd, what: RangeSync) -> io::Result<()> {
        self.sync_file_range.fetch_add(1, Relaxed);
        let flags = match what {
            RangeSync::StartWrite => libc::SYNC_FILE_RANGE_WRITE,
            RangeSync::WaitBefore => libc::SYNC_FILE_RANGE_WAIT_BEFORE,
        };
        // SAFETY: a plain system call on a borrowed, open descriptor.
        let rc = self
            .latency
            .sync_file_range
            .time(|| unsafe { libc::sync_file_range(fd.as_fd().as_raw_fd(), 0, 0, flags) });
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `renameat(2)` within one directory.
    pub fn rename(
        &self,
        dir: impl AsFd,
        from: &std::ffi::OsStr,
        to: &std::ffi::OsStr,
    ) -> io::Result<()> {
        self.rename.fetch_add(1, Relaxed);
        rustix::fs::renameat(&dir, from, &dir, to).map_err(io::Error::from)
    }

    /// Counts the syncs the early writeback (`early_writeback.rs`) made.
    pub(crate) fn add_syncfs_early(&self, n: u64) {
        self.syncfs_early.fetch_add(n, Relaxed);
    }

    pub fn counts(&self) -> SyscallCounts {
        SyscallCounts {
            fsync: self.fsync.load(Relaxed),
            fdatasync: self.fdatasync.load(Relaxed),
            sync: self.sync.load(Relaxed),
            syncfs: self.syncfs.load(Relaxed),
            syncfs_early: self.syncfs_early.load(Relaxed),
            sync_file_range: self.sync_file_range.load(Relaxed),
            rename: self.rename.load(Relaxed),
        }
    }

    /// The latency summaries of every flush kind, and of all of them together.
    pub fn latencies(&self) -> FlushLatencies {
        let l = &self.latency;
        let kinds = [&l.fsync, &l.fdatasync, &l.sync, &l.syncfs, &l.sync_file_range];
        let all = Latency::default();
        for kind in kinds {
            all.add(kind);
        }
        FlushLatencies {
            fsync: l.fsync.summary(),
            fdatasync: l.fdatasync.summary(),
            sync: l.sync.summary(),
            syncfs: l.syncfs.summary(),
            sync_file_range: l.sync_file_range.summary(),
            all: all.summary(),
        }
    }
}

/// The report's `flush_latency` object: one summary per flush kind of [`SyscallCounts`], and
/// `all` over every flush together. The early writeback's syncs (`syncfs_early`) run on a
/// helper thread beside the unpack, never on its path, and are not timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlushLatencies {
    pub fsync: LatencySummary,
    pub fdatasync: LatencySummary,
    pub sync: LatencySummary,
    pub syncfs: LatencySummary,
    pub sync_file_range: LatencySummary,
    pub all: LatencySummary,
}

/// How long the calls of one kind took. The percentiles are the upper edge of their histogram
/// bucket (at most 1/16 above the true value, never above `max_s`); `None` without calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Calls timed: the same as the call count in [`SyscallCounts`].
    pub count: u64,
    pub total_s: f64,
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub max_s: Option<f64>,
}

/// Sub-buckets per power of two: each bucket is at most 1/16 of its lower edge wide.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Latencies from 0 to 2^41 ns (36 minutes) have buckets of their own; longer ones share the
/// last (`max_s` still has them exactly). 38 octaves of 16, plus the 16 exact nanoseconds.
const TOP_BIT: u32 = 40;
const BUCKETS: usize = ((TOP_BIT - SUB_BITS + 2) as usize) * SUB as usize;

/// The latency record of one flush kind: a log-scale histogram of nanoseconds (about 5 KiB,
/// whatever the number of calls), their total and their maximum. Lock-free: `parallel` flushes
/// from several threads at once.
#[derive(Debug)]
struct Latency {
    buckets: [AtomicU64; BUCKETS],
    total_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Latency {
    /// Runs `call` and records how long it took, whatever it returned.
    fn time<T>(&self, call: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let result = call();
        self.record(start.elapsed());
        result
    }

    fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)].fetch_add(1, Relaxed);
        self.total_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }

    /// Adds `other`'s record to this one (for the `all` summary).
    fn add(&self, other: &Latency) {
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.fetch_add(theirs.load(Relaxed), Relaxed);
        }
        self.total_ns.fetch_add(other.total_ns.load(Relaxed), Relaxed);
        self.max_ns.fetch_max(other.max_ns.load(Relaxed), Relaxed);
    }

    fn summary(&self) -> LatencySummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        let max_ns = self.max_ns.load(Relaxed);
        let secs = |ns: u64| ns as f64 / 1e9;
        let quantile =
            |q: f64| (count > 0).then(|| secs(quantile_ns(&counts, count, q).min(max_ns)));
        LatencySummary {
            count,
            total_s: secs(self.total_ns.load(Relaxed)),
            p50_s: quantile(0.50),
            p99_s: quantile(0.99),
            max_s: (count > 0).then(|| secs(max_ns)),
        }
    }
}

/// The bucket of a latency of `ns` nanoseconds: below 16 ns one each; above, 16 per power of
/// two, indexed by the top bit and the 4 bits below it.
fn bucket(ns: u64) -> usize {
    let ns = ns.min((1 << (TOP_BIT + 1)) - 1);
    if ns < SUB {
        return ns as usize;
    }
    let top = 63 - ns.leading_zeros();
    let sub = (ns >> (top - SUB_BITS)) & (SUB - 1);
    ((top - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The largest latency bucket `index` holds.
fn bucket_upper_ns(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB {
        return index;
    }
    let (octave, sub) = (index / SUB - 1, index % SUB);
    ((SUB + sub + 1) << octave) - 1
}

/// The upper edge of the bucket holding the `q` quantile: the smallest bucket with at least
/// `ceil(q * count)` calls at or below it.
fn quantile_ns(counts: &[u64], count: u64, q: f64) -> u64 {
    let rank = ((q * count as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (index, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return bucket_upper_ns(index);
        }
    }
    u64::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_latency_falls_in_a_bucket_whose_upper_edge_is_within_a_sixteenth() {
        for ns in
            (0..5000).chain([1 << 20, 8_000_000, (1 << 20) + 12345, 999_999_999, 1 << 41, u64::MAX])
        {
            let i = bucket(ns);
            assert!(i < BUCKETS, "{ns}");
            let upper = bucket_upper_ns(i);
            let clamped = ns.min((1 << (TOP_BIT + 1)) - 1);
            assert!(
                upper >= clamped && upper - clamped <= clamped / 16,
                "{ns}: bucket {i} ends at {upper}"
            );
            assert!(
                i == 0 || bucket_upper_ns(i - 1) < clamped,
                "{ns}: the bucket before {i} holds it too"
            );
        }
    }

    #[test]
    fn the_summary_counts_every_call_and_orders_its_percentiles() {
        let l = Latency::default();
        for ms in 1..=100u64 {
            l.record(Duration::from_millis(ms));
        }
        l.record(Duration::from_secs(3 * 3600));
        let s = l.summary();
        assert_eq!(s.count, 101);
        assert_eq!(s.max_s, Some(3.0 * 3600.0));
        let (p50, p99) = (s.p50_s.unwrap(), s.p99_s.unwrap());
        assert!((0.051..=0.051 * 17.0 / 16.0).contains(&p50), "{p50}");
        assert!((0.100..=0.100 * 17.0 / 16.0).contains(&p99), "{p99}");
        assert_eq!(Latency::default().summary(), LatencySummary::default());
    }
}
