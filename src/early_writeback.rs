//! Writeback started while an unpack is still writing, for strategies that flush once, at the
//! barrier ([`Strategy::writes_back_early`](crate::Strategy::writes_back_early)).
//!
//! Linux leaves dirty data in memory until it must write it (30 seconds old, or past the dirty
//! ratio, gigabytes on today's machines), so an unpack that flushes at its barrier leaves all of
//! it for that moment. Then the kernel's flusher allocates and writes every file on one core
//! while the unpack's threads wait: 0.15 s of the 0.55 s a `syncfs` unpack of linux-headers
//! takes, with one core idle (perf: the flusher kworker, 35% of all samples of the syncfs). A
//! helper thread here calls syncfs(2) on the root's filesystem every [`INTERVAL`] from the
//! first file to the barrier, so the flusher works alongside the unpack and the barrier finds
//! little left to write. Per-file sync_file_range(WRITE) does the same work file by file in the
//! caller's thread, without the flusher's batching; measured, it was slower (see the README).
//!
//! It only moves work earlier: durability is still the strategy's barrier, and nothing here
//! ever creates, renames or removes a name. It syncs through a descriptor of its own, so an
//! error it sees (syncfs reports each writeback error once per open file) is still reported to
//! the barrier's own syncfs, and it ignores the errors itself.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The pause between two syncs. Measured with an unpack-bench of linux-headers and
/// emacs-common (syncfs, 7 alternated runs): back to back and 20 ms gain the same on a loop
/// device, 50 ms half as much.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// The helper thread; stopped and joined by [`EarlyWriteback::stop`] or on drop.
pub struct EarlyWriteback {
    stop: Arc<(Mutex<bool>, Condvar)>,
    syncs: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl EarlyWriteback {
    /// Starts syncing the filesystem of `dir`, opened afresh for the helper's own use. `None`
    /// if it cannot be opened or the thread cannot start: the unpack goes on without it.
    pub fn start(dir: impl std::os::fd::AsFd) -> Option<EarlyWriteback> {
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
        let fd: OwnedFd = rustix::fs::openat(dir, ".", flags, rustix::fs::Mode::empty()).ok()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let syncs = Arc::new(AtomicU64::new(0));
        let (thread_stop, thread_syncs) = (stop.clone(), syncs.clone());
        let thread = std::thread::Builder::new()
            .name("early-writeback".into())
            .spawn(move || {
                let (stopped, wake) = &*thread_stop;
                let mut guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                while !*guard {
                    drop(guard);
                    let _ = rustix::fs::syncfs(&fd);
                    thread_syncs.fetch_add(1, Relaxed);
                    guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                    if !*guard {
                        guard = wake.wait_timeout(guard, INTERVAL).unwrap_or_else(PoisonError::into_inner).0;
                    }
                }
            })
            .ok()?;
        Some(EarlyWriteback { stop, syncs, thread: Some(thread) })
    }

    /// Stops the helper, waiting for a sync under way; returns how many syncs it made.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.syncs.load(Relaxed)
    }

    fn halt(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for EarlyWriteback {
    fn drop(&mut self) {
        self.halt();
    }
}
