//! The NFS rows of a machine whose kernel has no NFS: the same `unpack-bench` command, run
//! inside a user-mode-linux guest (Debian's `user-mode-linux`: Linux 6.1 as an ordinary
//! process, with the NFS client and nfsd as modules), whose matrix comes back to the host.
//!
//! Why a guest and not a skipped row: these machines' kernel has no NFS client and cannot load
//! modules, and NFS is where durability choices cost most. Why the whole command and not only
//! the NFS runs: every ratio of an NFS table must compare runs of one kernel, so the guest also
//! benches the backing filesystem itself ([`super::matrix`] adds that row), and the matrix
//! header names the guest's kernel and CPU count, which the guest's bench reads itself.
//!
//! How: the guest boots with the host's root as a read-only hostfs root (so it sees this very
//! binary, the engine beside it and the packages at their host paths), process 1 is
//! `lab/guest/init.sh` (built into this binary and written into a directory of our own), which
//! loads the modules, brings up loopback and runs the host's argument vector with `--out`
//! pointing into that directory, mounted writable in the guest. Inside, the kernel has NFS and
//! the bench takes the one code path of [`super::nfs`]. What this module must never do: leave
//! the guest running (its processes form a process group of their own, killed by that id when
//! the guard goes, on any error or signal), or let the guest write anywhere on the host but
//! that directory.

use super::{command, Error, Result};
use crate::workdir::Workdir;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The guest's process 1.
const INIT: &str = include_str!("../../guest/init.sh");

/// Where the `user-mode-linux` package keeps the guest kernel's modules.
const MODULES: &str = "/usr/lib/uml/modules";

/// The guest's memory. It holds the runs' backing filesystems (a loop device on a file of the
/// guest's tmpfs), the backing filesystem's page cache and the NFS client's, so about three
/// times what one run unpacks, twice that for an upgrade; the guest's memory is a file in
/// `PHYSMEM_DIR`, taken from the host's RAM only as the guest touches it.
pub const MEM_MIB: u64 = 3072;

/// Where user-mode-linux keeps the guest's memory file: RAM, never a disk of the host, which
/// would otherwise write back up to [`MEM_MIB`] of it while the bench measures.
const PHYSMEM_DIR: &str = "/dev/shm";

/// The guest's directory on the host, as the guest mounts it.
const SHARE_IN_GUEST: &str = "/run/unpack-share";

/// Runs `argv` (this program's own argument vector, program first) in a guest and brings the
/// matrix back: into `out` when given, else `matrix.md` on stdout. Returns the guest bench's
/// exit status.
pub fn run_bench(argv: &[OsString], out: Option<&Path>) -> Result<u8> {
    let linux = command::require("linux", "user-mode-linux")?;
    command::require("busybox", "busybox-static")?;
    if !Path::new(MODULES).is_dir() {
        return Err(Error::MissingTool { tool: MODULES.to_string(), package: "user-mode-linux" });
    }
    let temp = std::env::temp_dir();
    let share = Workdir::new(&temp, "unpack-bench-guest").map_err(Error::io(&temp))?;
    let dir = share.path();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(Error::io(&path))
    };
    write("init.sh", INIT.as_bytes())?;
    let init = dir.join("init.sh");
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))
        .map_err(Error::io(&init))?;
    let exe = std::env::current_exe().map_err(Error::io("/proc/self/exe"))?;
    let mut guest_argv = vec![exe.into_os_string()];
    guest_argv.extend(without_out(&argv[1.min(argv.len())..]));
    guest_argv
        .extend([OsString::from("--out"), Path::new(SHARE_IN_GUEST).join("out").into_os_string()]);
    write("argv", &nul_separated(&guest_argv))?;
    let cwd = std::env::current_dir().map_err(Error::io("."))?;
    write("cwd", cwd.as_os_str().as_bytes())?;

    let mut boot = Command::new(linux);
    boot.arg(format!("mem={MEM_MIB}M"))
        // Only emergencies on the console, which is our stderr (the guest's loop driver logs
        // every WRITE_ZEROES mkfs tries on a tmpfs file).
        .args(["rootfstype=hostfs", "rootflags=/", "ro", "quiet", "loglevel=1"])
        .arg(format!("init={}", init.display()))
        .arg(format!("UNPACK_GUEST_SHARE={}", dir.display()))
        // The guest's console is our stderr: its progress and messages show as the bench's own.
        .args(["con=null", "con0=fd:0,fd:1"])
        .env("TMPDIR", PHYSMEM_DIR)
        .stdin(Stdio::null())
        .stdout(stderr()?)
        .process_group(0);
    let guest = Guest(Some(boot.spawn().map_err(Error::io("linux"))?));
    guest.wait()?;
    let status =
        std::fs::read_to_string(dir.join("status")).ok().and_then(|s| s.trim().parse::<u8>().ok());
    let Some(status) = status else {
        return Err(Error::Command {
            path: dir.to_path_buf(),
            command: "the user-mode-linux guest".to_string(),
            message: "it ended without the bench's exit status (its console output is above)"
                .to_string(),
        });
    };
    let made = dir.join("out");
    match out {
        Some(out) if made.is_dir() => copy_dir(&made, out)?,
        None if made.is_dir() => {
            let md = made.join("matrix.md");
            let text = std::fs::read_to_string(&md).map_err(Error::io(&md))?;
            unpack::cli::print(&text).map_err(|e| Error::Output {
                path: PathBuf::from("stdout"),
                message: e.to_string(),
            })?;
        }
        _ => {}
    }
    Ok(status)
}

/// The running guest; dropping it kills its whole process group (every process of the guest).
struct Guest(Option<Child>);

impl Guest {
    /// Waits for the guest to power off; a signal to the bench stops it.
    fn wait(mut self) -> Result<()> {
        let Some(child) = self.0.as_mut() else { return Ok(()) };
        loop {
            match child.try_wait() {
                Ok(Some(_)) => {
                    self.0 = None;
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => return Err(Error::io("linux")(e)),
            }
            if let Some(signal) = unpack::interrupt::pending() {
                return Err(Error::Interrupted { signal });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let group = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = child.wait();
        }
    }
}

/// A copy of our stderr for the guest's console.
fn stderr() -> Result<Stdio> {
    use std::os::fd::AsFd;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().map_err(Error::io("stderr"))?;
    Ok(Stdio::from(fd))
}

/// `args` without `--out DIR` / `--out=DIR`: the guest writes into the shared directory.
fn without_out(args: &[OsString]) -> Vec<OsString> {
    let mut kept = Vec::new();
    let mut skip = false;
    for arg in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == OsStr::new("--out") {
            skip = true;
        } else if !arg.as_bytes().starts_with(b"--out=") {
            kept.push(arg.clone());
        }
    }
    kept
}

fn nul_separated(args: &[OsString]) -> Vec<u8> {
    args.iter().flat_map(|a| a.as_bytes().iter().copied().chain([0])).collect()
}

/// Copies the files of `from` into `to` (created if needed).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(Error::io(to))?;
    for entry in std::fs::read_dir(from).map_err(Error::io(from))? {
        let path = entry.map_err(Error::io(from))?.path();
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, to.join(name)).map_err(Error::io(&path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_out_option_is_taken_out_in_both_spellings() {
        let args: Vec<OsString> = ["a.deb", "--out", "x", "--fs", "nfs", "--out=y", "-o", "vers=3"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(
            without_out(&args),
            ["a.deb", "--fs", "nfs", "-o", "vers=3"].map(OsString::from)
        );
        assert_eq!(nul_separated(&[OsString::from("a b"), OsString::from("c")]), b"a b\0c\0");
    }
}
