//! Writeback started while an unpack is still writing, for strategies that flush once, at the
//! barrier ([`Strategy::writes_back_early`](crate::Strategy::writes_back_early)).
//!
//! Linux leaves dirty data in memory until it must write it (30 seconds old, or past the dirty
//! ratio, gigabytes on today's machines), so an unpack that flushes at its barrier leaves all of
//! it for that moment. Then the kernel's flusher allocates and writes every file on one core
//! while the unpack's threads wait: 0.15 s of the 0.55 s a `syncfs` unpack of linux-headers
//! takes, with one core idle (perf: the flusher kworker, 35% of all samples of the syncfs). A
//! helper thread here calls syncfs(2) on the root's filesystem every [`INTERVAL`] from the
//! first file's data to the barrier (the first sync one interval in), so the flusher works alongside the unpack and the barrier finds
//! little left to write. Per-file sync_file_range(WRITE) does the same work file by file in the
//! caller's thread, without the flusher's batching; measured, it was slower (see
//! docs/performance.md).
//!
//! It only moves work earlier: durability is still the strategy's barrier, and nothing here
//! ever creates, renames or removes a name. It syncs through a descriptor of its own, so an
//! error it sees (syncfs reports each writeback error once per open file) is still reported to
//! the barrier's own syncfs, and it ignores the errors itself.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The pause between two syncs. Measured with `scripts/ab.sh syncfs 7 PKG` over a build
/// without the helper and builds with each interval: linux-headers 0.53 s without, 0.49 back
/// to back, 0.49 at 20 ms, 0.53 at 50 ms; emacs-common 0.47, 0.47, 0.44. Again once
/// linux-headers kept to one xz decoder (`scripts/ab.sh syncfs 9` and `11`, 20, 40 and 80 ms):
/// linux-headers 0.43, 0.42, 0.43 s; emacs-common 0.45, 0.44, 0.44: flat, so 20 ms stays.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// The helper thread; stopped and joined by [`EarlyWriteback::stop`] or on drop.
pub struct EarlyWriteback {
    stop: Arc<(Mutex<bool>, Condvar)>,
    /// Returns how many syncs it made.
    thread: Option<JoinHandle<u64>>,
}

impl EarlyWriteback {
    /// Starts syncing the filesystem of `dir`, opened afresh for the helper's own use. `None`
    /// if it cannot be opened or the thread cannot start: the unpack goes on without it.
    pub fn start(dir: impl std::os::fd::AsFd) -> Option<EarlyWriteback> {
        EarlyWriteback::every(dir, INTERVAL)
    }

    fn every(dir: impl std::os::fd::AsFd, interval: Duration) -> Option<EarlyWriteback> {
        let flags = rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::CLOEXEC;
        let fd: OwnedFd = rustix::fs::openat(dir, ".", flags, rustix::fs::Mode::empty()).ok()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("early-writeback".into())
            .spawn(move || {
                let (stopped, wake) = &*thread_stop;
                let mut syncs = 0;
                let mut guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                // Waits first: a transaction that reaches its barrier within one interval
                // (most packages) has the barrier's flush alone, not one more of its own.
                loop {
                    if !*guard {
                        guard = wake
                            .wait_timeout(guard, interval)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                    if *guard {
                        break;
                    }
                    drop(guard);
                    let _ = rustix::fs::syncfs(&fd);
                    syncs += 1;
                    guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                }
                syncs
            })
            .ok()?;
        Some(EarlyWriteback { stop, thread: Some(thread) })
    }

    /// Stops the helper, waiting for a sync under way; returns how many syncs it made.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        self.thread.take().map_or(0, |thread| thread.join().unwrap_or(0))
    }
}

impl Drop for EarlyWriteback {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_stopped_within_its_first_interval_never_syncs() {
        let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
        let helper = EarlyWriteback::every(&dir, Duration::from_secs(3600)).unwrap();
        assert_eq!(helper.stop(), 0, "it synced before its first interval was over");
    }
}
