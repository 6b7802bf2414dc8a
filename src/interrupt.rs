//! SIGINT and SIGTERM turned into a flag the engine polls: what a program embedding the engine
//! hands to [`Options::stop`](crate::Options::stop) (`Some(Arc::new(interrupt::pending))`), as
//! the `unpack` program and the lab's do. Public because the stop contract needs a flag set by
//! an async-signal-safe handler, which every embedder would otherwise write again.
//!
//! An installer is stopped with Ctrl-C or SIGTERM. Dying on the spot would leave temporary
//! files behind in the write phase and half a package in the rename phase; so the binaries
//! record the signal here, and the engine asks [`pending`] between entries: in the write phase
//! it rolls back and exits 130/143, in the rename phase it finishes first.
//!
//! Hand-written with libc's sigaction: a flag and one handler are ten lines, not worth a
//! dependency. The handler only stores into an atomic, which is async-signal-safe.

use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(signal: libc::c_int) {
    RECEIVED.store(signal, SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM (and SIGHUP: a closed terminal).
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only touches an atomic.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal received since [`install`], if any.
pub fn pending() -> Option<i32> {
    match RECEIVED.load(SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The exit status of a program a signal stopped, by the shell's convention: 128 + the signal
/// (130 for SIGINT, 143 for SIGTERM).
pub fn exit_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(1)
}
