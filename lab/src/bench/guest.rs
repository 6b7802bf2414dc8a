//! The NFS rows of a machine whose kernel has no NFS: the same `unpack-bench` command, run
//! inside a user-mode-linux guest (Linux as an ordinary process, with the NFS client and nfsd as
//! modules), whose matrix comes back to the host.
//!
//! Why a guest and not a skipped row: these machines' kernel has no NFS client and cannot load
//! modules, and NFS is where durability choices cost most. Why the whole command and not only
//! the NFS runs: every ratio of an NFS table must compare runs of one kernel, so the guest also
//! benches the backing filesystem itself ([`super::matrix`] adds that row), and the matrix
//! header names the guest's kernel and CPU count, which the guest's bench reads itself.
//!
//! Which kernel: a guest kit ([`Kit`]), the user-mode-linux package's kernel and modules, from
//! `UNPACK_BENCH_UML=DIR` ([`KIT_ENV`]) or else the system's package. Before the bench's own
//! boot, a probe boots the kit's kernel into a tiny init that prints its release and powers
//! off: a kernel that cannot run userspace on this host (Debian 12's 6.1 and 13's 6.12 on a
//! host with AMX's large xstate panic before init, "ptrace set fp regs failed") is then one
//! clear error naming the kernel, what its console said and the fix (fixtures/fetch-uml.sh),
//! not a panic in the middle of the bench's output; and the kit's modules must be those of the
//! release it reported.
//!
//! How: the guest boots with the host's root as a read-only hostfs root (so it sees this very
//! binary, the engine beside it, the kit's modules and the packages at their host paths),
//! process 1 is `lab/guest/init.sh` (built into this binary and written into a directory of our
//! own), which loads the modules from the directory named on the kernel command line, brings
//! up loopback and runs the host's argument vector with `--out` pointing into that directory,
//! mounted writable in the guest. Inside, the kernel has NFS and the bench takes the one code
//! path of [`super::nfs`]. What this module must never do: leave the guest running (its
//! processes form a process group of their own, killed by that id when the guard goes, on any
//! error, timeout or signal), or let the guest write anywhere on the host but that directory.

use super::{command, Error, Result};
use crate::workdir::Workdir;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The guest's process 1.
const INIT: &str = include_str!("../../guest/init.sh");

/// The variable that names a guest kit directory, ahead of the system's user-mode-linux.
pub const KIT_ENV: &str = "UNPACK_BENCH_UML";

/// Where the `user-mode-linux` package keeps its kernel, under the root it is installed in.
const KIT_KERNEL: &str = "usr/bin/linux.uml";

/// Where the `user-mode-linux` package keeps the kernel's modules (a directory per release),
/// under the root it is installed in.
const KIT_MODULES: &str = "usr/lib/uml/modules";

/// The probe's process 1: it says the kernel ran userspace, and which release it is.
const PROBE_INIT: &str = "#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
echo \"$0: userspace runs, kernel $(uname -r)\"
busybox poweroff -f
";

/// The probe's line, up to the release.
const PROBE_SAYS: &str = ": userspace runs, kernel ";

/// How long the probe may take: it boots in about a second.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// How the bench's error tells where to get a kernel that runs here.
const FIX: &str = "make one that does with fixtures/fetch-uml.sh DIR (in unpack's source tree; \
                   Debian unstable's user-mode-linux) and run with UNPACK_BENCH_UML=DIR \
                   (docs/nfs.md: The guest kernel)";

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

/// The guest's kernel and the modules of its release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kit {
    /// The user-mode-linux kernel.
    pub kernel: PathBuf,
    /// The directory of its modules, a directory per release (`/usr/lib/uml/modules`).
    pub modules: PathBuf,
}

impl Kit {
    /// The kit named by [`KIT_ENV`] when set, else the system's `user-mode-linux`.
    pub fn find() -> Result<Kit> {
        match std::env::var_os(KIT_ENV).filter(|dir| !dir.is_empty()) {
            Some(dir) => Kit::in_dir(Path::new(&dir)),
            None => Kit::system(),
        }
    }

    /// The kit in `dir`: the user-mode-linux package's files under it (what
    /// `fixtures/fetch-uml.sh DIR` makes).
    pub fn in_dir(dir: &Path) -> Result<Kit> {
        let not_a_kit = |what: String| Error::Guest {
            path: dir.to_path_buf(),
            message: format!(
                "{KIT_ENV} names no user-mode-linux kit: {what}. A kit is the user-mode-linux \
                 package's {KIT_KERNEL} and {KIT_MODULES}/RELEASE under one directory, with a \
                 kernel that runs userspace on this host: {FIX}"
            ),
        };
        let dir = dir.canonicalize().map_err(|e| not_a_kit(e.to_string()))?;
        let kernel = dir.join(KIT_KERNEL);
        if !is_executable(&kernel) {
            return Err(not_a_kit(format!("no executable {}", kernel.display())));
        }
        let modules = dir.join(KIT_MODULES);
        if !modules.is_dir() {
            return Err(not_a_kit(format!("no directory {}", modules.display())));
        }
        Ok(Kit { kernel, modules })
    }

    /// The system's `user-mode-linux`: `linux` on the PATH and the package's modules.
    fn system() -> Result<Kit> {
        let kernel = command::require("linux", "user-mode-linux")?;
        let modules = Path::new("/").join(KIT_MODULES);
        if !modules.is_dir() {
            return Err(Error::MissingTool {
                tool: modules.display().to_string(),
                package: "user-mode-linux",
            });
        }
        Ok(Kit { kernel, modules })
    }

    /// Boots the kernel into `PROBE_INIT` (written into `dir`, where its console goes too)
    /// and returns the release it reported; fails when it never ran userspace, with what its
    /// console said, or when the kit has no modules for that release.
    pub fn probe(&self, dir: &Path) -> Result<String> {
        let init = dir.join("probe");
        std::fs::write(&init, PROBE_INIT).map_err(Error::io(&init))?;
        std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))
            .map_err(Error::io(&init))?;
        let console_path = dir.join("probe.console");
        let console = std::fs::File::create(&console_path).map_err(Error::io(&console_path))?;
        let console_err = console.try_clone().map_err(Error::io(&console_path))?;
        let mut boot = Command::new(&self.kernel);
        boot.arg("mem=128M")
            // `quiet`, not `loglevel=1`: a kernel's last words before a panic are errors.
            .args(["rootfstype=hostfs", "rootflags=/", "ro", "quiet"])
            .arg(cmdline_path("init", &init)?)
            .args(["con=null", "con0=fd:0,fd:1"])
            .env("TMPDIR", PHYSMEM_DIR)
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(console_err)
            .process_group(0);
        let spawned = boot.spawn().map_err(Error::io(&self.kernel))?;
        let ended = match Guest(Some(spawned)).wait(Some(PROBE_TIMEOUT))? {
            Some(status) => format!("it ended with {status}"),
            None => format!("it was killed after {} s", PROBE_TIMEOUT.as_secs()),
        };
        let bytes = std::fs::read(&console_path).map_err(Error::io(&console_path))?;
        let text = String::from_utf8_lossy(&bytes);
        let Some(release) = probe_release(&text) else {
            return Err(self.cannot_run_userspace(&text, &ended));
        };
        let modules = self.modules.join(&release);
        if !modules.join("modules.dep").is_file() {
            return Err(Error::Guest {
                path: self.kernel.clone(),
                message: format!(
                    "this user-mode-linux kernel is Linux {release}, but {} has no modules.dep: \
                     the kernel and its modules must come from one user-mode-linux package",
                    modules.display()
                ),
            });
        }
        Ok(release)
    }

    /// The error for a kernel whose probe never ran userspace: its name and version, what its
    /// console said last, why where that is known, and the fix.
    fn cannot_run_userspace(&self, console: &str, ended: &str) -> Error {
        let version = Command::new(&self.kernel)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| !v.is_empty() && !v.contains(char::is_whitespace));
        Error::Guest {
            path: self.kernel.clone(),
            message: cannot_run_message(version.as_deref(), console, ended),
        }
    }
}

/// The message of [`Kit::cannot_run_userspace`].
fn cannot_run_message(version: Option<&str>, console: &str, ended: &str) -> String {
    let which = version.map(|v| format!(" (Linux {v})")).unwrap_or_default();
    let said = match console_reason(console) {
        Some(lines) => format!("its console said \"{}\"", lines.join("\", then \"")),
        None => "its console said nothing".to_string(),
    };
    let why = if console.contains("set fp regs failed") {
        " This kernel hands ptrace a fixed-size buffer for its processes' FP registers, and a \
         host whose xstate is larger (AMX: dmesg | grep xstate) refuses it; a newer \
         user-mode-linux asks the host for the size (Debian 12's 6.1 and 13's 6.12 do not, \
         unstable's 7.2 does)."
    } else {
        ""
    };
    format!(
        "this user-mode-linux kernel{which} cannot run userspace on this host: it never ran the \
         guest's init ({ended}; {said}).{why} A kernel that runs here: {FIX}"
    )
}

/// What a console says about a guest that never ran userspace: the kernel panic's line and the
/// one before it (the reason, such as "userspace - ptrace set fp regs failed, errno = 14"), or
/// else its last three lines.
fn console_reason(console: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> =
        console.lines().map(|l| l.trim_end()).filter(|l| !l.trim().is_empty()).collect();
    let picked: Vec<&str> = match lines.iter().position(|l| l.starts_with("Kernel panic")) {
        Some(0) => lines[..1].to_vec(),
        Some(i) => lines[i - 1..=i].to_vec(),
        None => lines[lines.len().saturating_sub(3)..].to_vec(),
    };
    (!picked.is_empty()).then(|| picked.into_iter().map(str::to_string).collect())
}

/// The release in the probe's line (its console adds a carriage return to each line).
fn probe_release(console: &str) -> Option<String> {
    console.lines().find_map(|line| {
        let release = line.split_once(PROBE_SAYS)?.1.trim();
        (!release.is_empty()).then(|| release.to_string())
    })
}

fn is_executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `NAME=PATH` for the kernel command line, which splits at white space: refused when `path`
/// has any, or is not UTF-8.
fn cmdline_path(name: &str, path: &Path) -> Result<String> {
    match path.to_str() {
        Some(p) if !p.contains(char::is_whitespace) => Ok(format!("{name}={p}")),
        _ => Err(Error::Guest {
            path: path.to_path_buf(),
            message: format!(
                "the guest gets this path on its kernel command line ({name}=), which cannot \
                 hold white space or bytes that are not UTF-8: choose another TMPDIR or {KIT_ENV}"
            ),
        }),
    }
}

/// Runs `argv` (this program's own argument vector, program first) in a guest and brings the
/// matrix back: into `out` when given, else `matrix.md` on stdout. Returns the guest bench's
/// exit status.
pub fn run_bench(argv: &[OsString], out: Option<&Path>) -> Result<u8> {
    let kit = Kit::find()?;
    command::require("busybox", "busybox-static")?;
    let temp = std::env::temp_dir();
    let share = Workdir::new(&temp, "unpack-bench-guest").map_err(Error::io(&temp))?;
    let dir = share.path();
    let release = kit.probe(dir)?;
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

    let mut boot = Command::new(&kit.kernel);
    boot.arg(format!("mem={MEM_MIB}M"))
        // Only emergencies on the console, which is our stderr (the guest's loop driver logs
        // every WRITE_ZEROES mkfs tries on a tmpfs file).
        .args(["rootfstype=hostfs", "rootflags=/", "ro", "quiet", "loglevel=1"])
        .arg(cmdline_path("init", &init)?)
        .arg(cmdline_path("UNPACK_GUEST_SHARE", dir)?)
        .arg(cmdline_path("UNPACK_GUEST_MODULES", &kit.modules.join(&release))?)
        // The guest's console is our stderr: its progress and messages show as the bench's own.
        .args(["con=null", "con0=fd:0,fd:1"])
        .env("TMPDIR", PHYSMEM_DIR)
        .stdin(Stdio::null())
        .stdout(stderr()?)
        .process_group(0);
    let guest = Guest(Some(boot.spawn().map_err(Error::io(&kit.kernel))?));
    guest.wait(None)?;
    let status =
        std::fs::read_to_string(dir.join("status")).ok().and_then(|s| s.trim().parse::<u8>().ok());
    let Some(status) = status else {
        return Err(Error::Command {
            path: dir.to_path_buf(),
            command: format!("the user-mode-linux guest ({})", kit.kernel.display()),
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
    /// Waits for the guest to power off, for at most `limit` when given: its exit status, or
    /// None when the time was up (the guest is then killed). A signal to the bench stops it.
    fn wait(mut self, limit: Option<Duration>) -> Result<Option<ExitStatus>> {
        let Some(child) = self.0.as_mut() else { return Ok(None) };
        let deadline = limit.map(|limit| Instant::now() + limit);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.0 = None;
                    return Ok(Some(status));
                }
                Ok(None) => {}
                Err(e) => return Err(Error::io("linux")(e)),
            }
            if let Some(signal) = unpack::interrupt::pending() {
                return Err(Error::Interrupted { signal });
            }
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Ok(None);
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

    /// Debian 12's user-mode-linux on a host with AMX, as its console says it with `quiet`.
    const PANIC: &str = "\
SELinux: CONFIG_SECURITY_SELINUX_CHECKREQPROT_VALUE is non-zero.
mmapper_init - find_iomem failed
Failed to initialize ubd device 0 :Couldn't determine size of device's file
userspace - ptrace set fp regs failed, errno = 14
Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
CPU: 0 PID: 1 Comm: probe Not tainted 6.1.176 #1
Stack:
 606944ba 607e7fcd 88457b90 6067bb96
";

    #[test]
    fn the_reason_is_the_panic_and_the_line_before_it_else_the_last_lines() {
        assert_eq!(
            console_reason(PANIC).unwrap(),
            [
                "userspace - ptrace set fp regs failed, errno = 14",
                "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b"
            ]
        );
        assert_eq!(console_reason("Kernel panic - x\n").unwrap(), ["Kernel panic - x"]);
        assert_eq!(console_reason("a\n\nb\r\nc\nd\n").unwrap(), ["b", "c", "d"]);
        assert_eq!(console_reason("\n \n"), None);
    }

    #[test]
    fn the_message_names_version_reason_cause_and_fix() {
        let m = cannot_run_message(Some("6.1.176"), PANIC, "it ended with signal: 6 (SIGABRT)");
        assert!(m.starts_with("this user-mode-linux kernel (Linux 6.1.176) cannot run userspace"));
        let said = "(it ended with signal: 6 (SIGABRT); its console said \"userspace - ptrace set \
                    fp regs failed, errno = 14\", then \"Kernel panic";
        assert!(m.contains(said), "{m}");
        assert!(
            m.contains("xstate")
                && m.contains("fetch-uml.sh DIR")
                && m.contains("UNPACK_BENCH_UML=DIR"),
            "{m}"
        );
        let other = cannot_run_message(None, "", "it was killed after 60 s");
        assert!(other.starts_with("this user-mode-linux kernel cannot run userspace"), "{other}");
        assert!(other.contains("its console said nothing") && !other.contains("xstate"), "{other}");
        assert!(other.contains("UNPACK_BENCH_UML=DIR"), "{other}");
    }

    #[test]
    fn the_probe_reports_its_release_through_the_consoles_carriage_returns() {
        let console = format!("{PANIC}/tmp/x/probe{PROBE_SAYS}7.2.7\r\nreboot: Power down\n");
        assert_eq!(probe_release(&console).as_deref(), Some("7.2.7"));
        assert_eq!(probe_release(PANIC), None);
        assert_eq!(probe_release(&format!("x{PROBE_SAYS}\r\n")), None);
    }

    #[test]
    fn a_path_with_white_space_never_reaches_the_kernel_command_line() {
        assert_eq!(
            cmdline_path("init", Path::new("/tmp/a/init.sh")).unwrap(),
            "init=/tmp/a/init.sh"
        );
        let err = cmdline_path("init", Path::new("/tmp/a b/init.sh")).unwrap_err().to_string();
        assert!(err.starts_with("/tmp/a b/init.sh: ") && err.contains("white space"), "{err}");
    }
}
