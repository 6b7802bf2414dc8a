//! What the front end tells apt and the administrator as the engine goes: status-fd lines and
//! dpkg.log lines made from the engine's events, and dpkg's messages on standard error.
//!
//! status-fd's grammar is dpkg's (man dpkg, lib/dpkg/log.c `statusfd_send`): `processing:
//! install|upgrade|disappear: PKG`, `status: PKG: STATE`, `status: ARCHIVE : error : MESSAGE`,
//! each line's newlines made spaces. PKG is named as dpkg's `pnaw_nonambig` names it: with its
//! architecture when it is `Multi-Arch: same` or of neither the native architecture nor `all`.
//! The descriptors are made close-on-exec at once, as dpkg makes them, so that no maintainer
//! script inherits them. dpkg.log is the path `--log` names on the running system, opened at
//! the first line (made 0644 if missing), appended one `write` per line; a log that cannot be
//! opened is warned about and left, as dpkg leaves it. A status-fd that cannot be written is
//! fatal to dpkg: here it is remembered and ends the call with exit 2 once the package at hand
//! is done.

use crate::dpkg_log;
use crate::error::escape;
use crate::events::{Event, Package};
use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::{BorrowedFd, FromRawFd};
use std::path::PathBuf;
use std::sync::Mutex;

/// The reporter of one call; shared with the engine's events callback.
pub struct Reporter {
    state: Mutex<State>,
}

struct State {
    fds: Vec<(i32, ManuallyDrop<File>)>,
    log: Log,
    native: String,
    /// The archive being processed, as given or walked.
    archive: String,
    /// Its error was reported (the engine's `Failed` event).
    failed: bool,
    /// The package it unpacks, `NAME:ARCH`, once known.
    package: Option<String>,
    /// The first status-fd write that failed.
    broken: Option<String>,
    /// The packages the call made `triggers-pending`, `NAME:ARCH`, in order.
    pending: Vec<String>,
    /// The `startup` line, until written.
    startup: Option<String>,
    /// The front end's own line after it: the strategy and where it came from.
    strategy: Option<String>,
}

enum Log {
    Closed(PathBuf),
    Open(File),
    Off,
}

impl Reporter {
    /// A reporter writing to the descriptors `fds` (made close-on-exec here) and the log
    /// `log`, naming packages against the architecture `native`. A descriptor that is not open
    /// is an error naming it.
    pub fn new(fds: &[i32], log: Option<PathBuf>, native: &str) -> Result<Reporter, String> {
        let mut files: Vec<(i32, ManuallyDrop<File>)> = Vec::new();
        for &fd in fds {
            // SAFETY: F_GETFD only reads the descriptor's flags.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(format!("--status-fd {fd}: not an open file descriptor"));
            }
            set_cloexec(fd, true);
            // SAFETY: the descriptor is open (checked above) and was handed to this process to
            // write to; it is never closed here (ManuallyDrop), so a descriptor given twice (it
            // gets each line twice, as dpkg writes it) or one of the standard ones stays open.
            files.push((fd, ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })));
        }
        Ok(Reporter {
            state: Mutex::new(State {
                fds: files,
                log: log.map_or(Log::Off, Log::Closed),
                native: native.to_string(),
                archive: String::new(),
                failed: false,
                package: None,
                broken: None,
                pending: Vec::new(),
                startup: None,
                strategy: None,
            }),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// dpkg.log's first line of the call, `startup archives ACTION`: written before the
    /// first line the call logs, or by [`Reporter::started`]. dpkg writes it once it holds its
    /// locks, so a call that finds them held logs nothing.
    pub fn startup(&self, action: &str) {
        self.with(|s| s.startup = Some(dpkg_log::startup(action)));
    }

    /// The durability strategy of the call, `name`, chosen by `why` (the environment, the
    /// configuration file, `--force-unsafe-io`, the default): logged after the `startup` line,
    /// as `unpack-dpkg strategy NAME (WHY)`, the one line of the log that is not dpkg's.
    pub fn strategy(&self, name: &str, why: &str) {
        self.with(|s| s.strategy = Some(format!("unpack-dpkg strategy {name} ({why})")));
    }

    /// The call got as far as dpkg's `startup` line (it holds the locks): written now if it
    /// was not yet.
    pub fn started(&self) {
        self.with(|s| s.flush_startup());
    }

    /// The next archive starts.
    pub fn begin(&self, archive: &str) {
        self.with(|s| {
            s.archive = archive.to_string();
            s.failed = false;
            s.package = None;
        });
    }

    /// One event of the engine.
    pub fn event(&self, event: &Event) {
        self.with(|s| {
            if let Some(message) = dpkg_log::message(event) {
                s.log_line(&message);
            }
            match event {
                Event::Unpacking { package, old, .. } => {
                    let action = if old.is_some() { "upgrade" } else { "install" };
                    let name = s.name(package);
                    s.package = Some(package.with_arch());
                    s.status_line(&format!("processing: {action}: {name}"));
                }
                Event::Status { package, state, .. } => {
                    let name = s.name(package);
                    if state == "triggers-pending" && !s.pending.contains(&package.with_arch()) {
                        s.pending.push(package.with_arch());
                    }
                    s.status_line(&format!("status: {name}: {state}"));
                }
                Event::Disappeared { package, .. } => {
                    let name = s.name(package);
                    s.status_line(&format!("processing: disappear: {name}"));
                }
                Event::Failed { reason } => {
                    s.failed = true;
                    let line = format!("status: {} : error : {reason}", s.archive);
                    s.status_line(&line);
                }
                Event::Notice { message } => {
                    for line in message.lines() {
                        say(&format!("unpack-dpkg: {}", escape(line)));
                    }
                }
            }
        });
    }

    /// The archive at hand failed with `reason`: its status-fd error line unless the engine
    /// reported it, and dpkg's message on standard error.
    pub fn failed(&self, action: &str, reason: &str) {
        self.with(|s| {
            if !s.failed {
                let line = format!("status: {} : error : {reason}", s.archive);
                s.status_line(&line);
            }
            say(&format!(
                "unpack-dpkg: error processing archive {} (--{action}):\n {reason}",
                escape(&s.archive)
            ));
        });
    }

    /// The package the archive at hand unpacked, `NAME:ARCH`.
    pub fn package(&self) -> Option<String> {
        self.with(|s| s.package.clone())
    }

    /// The packages the call made `triggers-pending`, `NAME:ARCH`: those whose triggers dpkg
    /// runs at the end of an `--unpack` without `--no-triggers`.
    pub fn pending(&self) -> Vec<String> {
        self.with(|s| s.pending.clone())
    }

    /// The first status-fd write that failed, if any.
    pub fn broken(&self) -> Option<String> {
        self.with(|s| s.broken.clone())
    }

    /// Runs `f` with the status-fd descriptors inheritable, for the real dpkg called after
    /// the unpack to write to them too.
    pub fn inheriting<T>(&self, f: impl FnOnce() -> T) -> T {
        let fds: Vec<i32> = self.with(|s| s.fds.iter().map(|(fd, _)| *fd).collect());
        fds.iter().for_each(|&fd| set_cloexec(fd, false));
        let out = f();
        fds.iter().for_each(|&fd| set_cloexec(fd, true));
        out
    }
}

impl State {
    fn name(&self, p: &Package) -> String {
        if p.multi_arch_same || (p.arch != "all" && p.arch != self.native) {
            p.with_arch()
        } else {
            p.name.clone()
        }
    }

    fn status_line(&mut self, line: &str) {
        let line = format!("{}\n", line.replace('\n', " "));
        for (fd, file) in &self.fds {
            if let Err(e) = (&**file).write_all(line.as_bytes()) {
                self.broken.get_or_insert(format!("unable to write to status fd {fd}: {e}"));
            }
        }
    }

    fn flush_startup(&mut self) {
        if let Some(startup) = self.startup.take() {
            self.log_line(&startup);
            if let Some(strategy) = self.strategy.take() {
                self.log_line(&strategy);
            }
        }
    }

    fn log_line(&mut self, message: &str) {
        self.flush_startup();
        if let Log::Closed(path) = &self.log {
            self.log = match open_log(path) {
                Ok(file) => Log::Open(file),
                Err(e) => {
                    say(&format!(
                        "unpack-dpkg: warning: could not open log '{}': {e}",
                        escape(path)
                    ));
                    Log::Off
                }
            };
        }
        if let Log::Open(file) = &self.log {
            // One write per line, as dpkg's, so that two writers' lines never interleave.
            let _ = (&*file).write_all(dpkg_log::line(message).as_bytes());
        }
    }
}

/// A line on standard error, as dpkg says things there; a standard error that cannot be
/// written (closed, a pipe nobody reads) loses the line, never the call.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn open_log(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().append(true).create(true).mode(0o644).open(path)
}

/// Sets or clears `FD_CLOEXEC` on `fd`, a descriptor open for the life of the process.
fn set_cloexec(fd: i32, on: bool) {
    // SAFETY: `fd` was checked open, and this process never closes it.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    if let Ok(flags) = rustix::io::fcntl_getfd(fd) {
        let flags = if on {
            flags | rustix::io::FdFlags::CLOEXEC
        } else {
            flags - rustix::io::FdFlags::CLOEXEC
        };
        let _ = rustix::io::fcntl_setfd(fd, flags);
    }
}
