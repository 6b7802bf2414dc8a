//! dpkg.log: the lines dpkg writes to its log (lib/dpkg/log.c `log_message`, the `log_action`
//! and `modstatdb_note` calls of src/main/), made from a call's [`Event`]s, and the log inside
//! a root that database mode appends them to.
//!
//! Each line is the local time (`YYYY-MM-DD HH:MM:SS`), a space and a message: `startup
//! archives unpack` as a call starts, `install PKG:ARCH <none> VERSION` or `upgrade PKG:ARCH
//! OLD NEW` as a package starts, `status STATE PKG:ARCH VERSION` at each state dpkg notes, and
//! `disappear PKG:ARCH VERSION <none>`. A dpkg front end writes them where dpkg's `--log` says
//! (a path of the running system, [`line()`] and [`message`]); database mode writes them to the
//! root's own `var/log/dpkg.log` (`InRoot`), which is a file of the root like any other:
//! reached through the root's confined resolution, opened without following a symlink, and
//! only a regular file is written. This module never creates a directory, and a log that cannot
//! be written never fails a call (dpkg only warns).

use crate::durability::Directory;
use crate::error::escape;
use crate::events::Event;
use crate::fs::root::{Create, Pending, Root};
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The message that starts the log of a call of `action` (`unpack`, `install`), as dpkg's
/// `archivefiles` writes it.
pub fn startup(action: &str) -> String {
    format!("startup archives {action}")
}

/// The message `event` makes in dpkg.log; `None` for what dpkg does not log (errors, forced
/// problems).
pub fn message(event: &Event) -> Option<String> {
    match event {
        Event::Unpacking { package, old: None, version } => {
            Some(format!("install {} <none> {}", package.with_arch(), shown(version)))
        }
        Event::Unpacking { package, old: Some(old), version } => {
            Some(format!("upgrade {} {} {}", package.with_arch(), shown(old), shown(version)))
        }
        Event::Status { package, state, version } => {
            Some(format!("status {state} {} {}", package.with_arch(), shown(version)))
        }
        Event::Disappeared { package, version } => {
            Some(format!("disappear {} {} <none>", package.with_arch(), shown(version)))
        }
        _ => None,
    }
}

/// A version as dpkg shows it in its log and messages (`vdew_nonambig`): a zero epoch left out
/// unless the rest has a colon, `<none>` for no version.
pub fn shown(version: &str) -> String {
    if version.is_empty() {
        return "<none>".to_string();
    }
    match version.strip_prefix("0:") {
        Some(rest) if !rest.contains(':') => rest.to_string(),
        _ => version.to_string(),
    }
}

/// `message` as a line of dpkg.log: the local time, a space, the message and a newline.
pub fn line(message: &str) -> String {
    format!("{} {message}\n", local_time())
}

extern "C" {
    /// POSIX's, which the libc crate does not declare: reads TZ, as localtime does first.
    fn tzset();
}

/// Now, in the local time zone, as dpkg's `strftime("%Y-%m-%d %H:%M:%S")`.
fn local_time() -> String {
    // SAFETY: tzset reads TZ and the zone files into libc's globals (the engine never changes
    // the environment); localtime_r fills the tm it is given from a valid time_t.
    let tm = unsafe {
        tzset();
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return "1970-01-01 00:00:00".to_string();
        }
        tm
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// dpkg.log inside a root: its directory found through the root's confined resolution when the
/// call starts, the file opened (made 0644 if missing) at the first line, `startup archives
/// unpack` written first. A directory the root lacks means no log, silently; a file that
/// cannot be opened or written is warned about once, and the call goes on without it.
pub(crate) struct InRoot {
    state: Mutex<State>,
}

enum State {
    Closed { dir: Directory, name: OsString, shown: PathBuf },
    Open(File, PathBuf),
    Off,
}

impl InRoot {
    /// The log `rel` (a path inside the root) of `root`; `None` when its directory is not there.
    pub(crate) fn find(root: &mut Root, rel: &Path) -> Option<InRoot> {
        let name = rel.file_name()?.to_os_string();
        let parent = rel.parent().unwrap_or(Path::new(""));
        let (canon, dir) = root.resolve_dir(parent, Create::Never, &|_| Pending::Nothing).ok()?;
        let shown = root.display(&canon.join(&name));
        Some(InRoot { state: Mutex::new(State::Closed { dir, name, shown }) })
    }

    /// Appends the line of `event`, if it makes one.
    pub(crate) fn write(&self, event: &Event) {
        let Some(message) = message(event) else { return };
        let Ok(mut state) = self.state.lock() else { return };
        if let State::Closed { dir, name, shown } = &*state {
            *state = match open(dir, name) {
                Ok(file) => State::Open(file, shown.clone()),
                Err(e) => {
                    warn(shown, &e);
                    State::Off
                }
            };
            if let State::Open(file, shown) = &*state {
                if let Err(e) = (&*file).write_all(line(&startup("unpack")).as_bytes()) {
                    warn(shown, &e);
                    *state = State::Off;
                }
            }
        }
        if let State::Open(file, shown) = &*state {
            // One write per line, as dpkg's, so that lines of two writers never interleave.
            if let Err(e) = (&*file).write_all(line(&message).as_bytes()) {
                warn(shown, &e);
                *state = State::Off;
            }
        }
    }
}

fn open(dir: &Directory, name: &OsString) -> std::io::Result<File> {
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::APPEND
        | OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), name.as_os_str(), flags, Mode::from_raw_mode(0o644))?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(File::from(fd))
}

fn warn(path: &Path, e: &std::io::Error) {
    let _ = writeln!(
        std::io::stderr(),
        "unpack: warning: {}: {e}: no dpkg.log lines for this call",
        escape(path)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Package;

    #[test]
    fn messages_are_dpkgs() {
        let a = Package::new("a", "amd64", false);
        let unpacking = |old: Option<&str>| Event::Unpacking {
            package: a.clone(),
            old: old.map(String::from),
            version: "1:2.0-1".into(),
        };
        assert_eq!(message(&unpacking(None)).unwrap(), "install a:amd64 <none> 1:2.0-1");
        assert_eq!(message(&unpacking(Some("0:1.0"))).unwrap(), "upgrade a:amd64 1.0 1:2.0-1");
        let status = |version: &str| Event::Status {
            package: Package::new("b", "all", false),
            state: "not-installed".into(),
            version: version.into(),
        };
        assert_eq!(message(&status("")).unwrap(), "status not-installed b:all <none>");
        let gone = Event::Disappeared { package: a.clone(), version: "0:1:2".into() };
        assert_eq!(message(&gone).unwrap(), "disappear a:amd64 0:1:2 <none>");
        assert_eq!(message(&Event::Failed { reason: "x".into() }), None);
    }

    #[test]
    fn a_line_is_the_local_time_then_the_message() {
        let l = line("startup archives unpack");
        let (time, rest) = l.split_at(19);
        assert_eq!(rest, " startup archives unpack\n");
        let shape: String =
            time.chars().map(|c| if c.is_ascii_digit() { 'd' } else { c }).collect();
        assert_eq!(shape, "dddd-dd-dd dd:dd:dd");
    }
}
