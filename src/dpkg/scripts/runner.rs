//! Maintainer scripts of the unpack phase, run as dpkg runs them (src/main/script.c): in a
//! chroot of ROOT when ROOT is not `/`, from `/`, with dpkg's environment, standard input
//! passed through, standard output to standard error when the JSON report owns standard
//! output.
//!
//! Scripts are root code from the package and from the root's database: a chroot is not a
//! sandbox, and nothing here tries to make it one (unpack(1) says so). What this module must
//! never do is run a script it did not mean to: the old scripts are opened in the admin
//! directory's `info/` without following a symlink, the new ones are written by the engine
//! itself, from the package's control members, into a directory of its own under a temporary
//! name (which recovery's rollback removes after a crash).

use crate::durability::Directory;
use crate::error::{escape, Error, Result};
use crate::options::ScriptOutput;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the new package's scripts wait while they run, in the admin directory: dpkg's
/// `tmp.ci` under the engine's temporary suffix.
pub const NEW_SCRIPTS: &str = "tmp.ci.unpack-new";

/// dpkg's name for the directory that holds the control members of the package being
/// unpacked while its new scripts run (`ADMIN/tmp.ci`): debconf's frontend, called from a
/// preinst, reads the package's `templates` and `config` beside `$0` and its name from
/// `tmp.ci/control`.
pub const CONTROL_DIR: &str = "tmp.ci";

/// [`CONTROL_DIR`] for the length of one new script's run: a symlink to the package's own
/// directory under [`NEW_SCRIPTS`], removed when dropped. Whatever was at the name before (a
/// directory a killed dpkg left, a symlink) is removed first, as dpkg removes it, and never
/// followed.
pub struct ControlDir<'a> {
    admin: &'a Directory,
}

impl<'a> ControlDir<'a> {
    pub fn link(admin: &'a Directory, package: &str) -> Result<ControlDir<'a>> {
        let path = admin.path().join(CONTROL_DIR);
        crate::fs::tree::remove_tree(admin.fd(), OsStr::new(CONTROL_DIR), &mut (0, 0))
            .map_err(|e| Error::root(&path, "removing", e))?;
        rustix::fs::symlinkat(format!("{NEW_SCRIPTS}/{package}"), admin.fd(), CONTROL_DIR)
            .map_err(|e| Error::root(&path, "creating symlink", e))?;
        Ok(ControlDir { admin })
    }
}

impl Drop for ControlDir<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(self.admin.fd(), CONTROL_DIR, AtFlags::empty());
    }
}

/// One script call: whose script, which, and its arguments.
#[derive(Debug, Clone)]
pub struct Call {
    pub of: Of,
    pub script: &'static str,
    pub args: Vec<String>,
}

/// Whose script a [`Call`] runs, for a package of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    /// The new version's, from its control archive.
    New,
    /// The installed version's it upgrades, from `info/`.
    Old,
    /// Another installed package's (by its index in the database), from `info/`: a
    /// Multi-Arch: same instance the package deconfigures.
    Installed(usize),
}

/// How scripts are run in one call.
pub struct Runner {
    /// The root as given, chrooted into unless it is `/`.
    root: PathBuf,
    /// The admin directory as the scripts see it (`/var/lib/dpkg`).
    admindir: PathBuf,
    /// Where the scripts' standard output goes.
    output: ScriptOutput,
    /// `DPKG_RUNNING_VERSION`: see [`Runner::new`].
    running_version: String,
    /// `DPKG_FORCE`: the force options in effect, as dpkg names them.
    force: String,
}

/// The force options dpkg has on when none is given (src/common/force.c): what `DPKG_FORCE`
/// says to a script, and what a `dpkg` a script runs takes as its own defaults.
pub const DEFAULT_FORCE: &str = "security-mac,downgrade";

/// The dpkg release whose unpack the engine follows: `DPKG_RUNNING_VERSION` where the root has
/// no dpkg installed yet (a bootstrap's first scripts).
pub const FOLLOWED_DPKG: &str = "1.21.22";

/// Who a script belongs to, for its environment.
pub struct Owner<'a> {
    pub package: &'a str,
    pub arch: &'a str,
    /// Installed instances of the package (Multi-Arch: same), this one counted.
    pub refcount: usize,
}

impl Runner {
    /// Scripts for `root` (chrooted into unless `/`) whose admin directory is `admin_rel`.
    /// `running_version` is the version of the dpkg installed in the root, the one whose tools
    /// (dpkg-maintscript-helper, dpkg-divert) a script calls: a script compares it with
    /// `dpkg --compare-versions`, so it must be a version.
    pub fn new(
        root: &Path,
        admin_rel: &Path,
        output: ScriptOutput,
        running_version: Option<&str>,
    ) -> Runner {
        Runner {
            root: root.to_path_buf(),
            admindir: Path::new("/").join(admin_rel),
            output,
            running_version: running_version.unwrap_or(FOLLOWED_DPKG).to_string(),
            force: DEFAULT_FORCE.to_string(),
        }
    }

    /// Runs `dir/file` (a directory inside the root, `file` checked to be a regular file there
    /// and not followed through a symlink) as script `name` with `args`. `Ok(None)`: there is no
    /// such script. `Ok(Some(success))` otherwise.
    pub fn run(
        &self,
        dir: &Directory,
        dir_in_root: &Path,
        file: &str,
        name: &str,
        owner: &Owner<'_>,
        args: &[&str],
    ) -> Result<Option<bool>> {
        let host_path = dir.path().join(file);
        match rustix::fs::statat(dir.fd(), file, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(Error::root(&host_path, "stat of a maintainer script", e)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
                return Err(Error::root(
                    &host_path,
                    "running a maintainer script",
                    std::io::Error::other("not a regular file"),
                ));
            }
            Ok(_) => {}
        }
        let chroot = self.root != Path::new("/");
        let inside = Path::new("/").join(dir_in_root).join(file);
        // By the path the script sees, the one dpkg gives it (`$0` is this path, not argv[0]).
        let mut cmd = Command::new(&inside);
        cmd.arg0(name)
            .args(args)
            .env("DPKG_MAINTSCRIPT_PACKAGE", owner.package)
            .env("DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT", owner.refcount.to_string())
            .env("DPKG_MAINTSCRIPT_ARCH", owner.arch)
            .env("DPKG_MAINTSCRIPT_NAME", name)
            .env("DPKG_MAINTSCRIPT_DEBUG", "0")
            .env("DPKG_RUNNING_VERSION", &self.running_version)
            .env("DPKG_ADMINDIR", &self.admindir)
            .env("DPKG_ROOT", "")
            .env("DPKG_FORCE", &self.force)
            .stdin(Stdio::inherit());
        if self.output == ScriptOutput::Stderr {
            cmd.stdout(std::io::stderr());
        }
        let root = chroot.then(|| self.root.clone());
        // dpkg's umask (022, lib/dpkg/program.c) whatever the caller's: a caller's 077 would make
        // what the scripts create unreadable to everyone else. Always through pre_exec, so the
        // script is started by execvp, which runs a script without `#!` through /bin/sh as
        // dpkg's does (posix_spawnp, which Command uses otherwise, does not).
        // SAFETY: umask, chroot and chdir are async-signal-safe system calls, made in the child
        // between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
                if let Some(root) = &root {
                    rustix::process::chroot(root)?;
                }
                rustix::process::chdir("/")?;
                Ok(())
            });
        }
        let _ = std::io::stdout().flush();
        let status =
            cmd.status().map_err(|e| Error::root(&host_path, "running a maintainer script", e))?;
        Ok(Some(status.success()))
    }
}

/// Writes a control member (`bytes`) as `dir/name` with permission bits `mode`, replacing what
/// was there.
pub fn write_file(dir: &Directory, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
    let path = dir.path().join(name);
    match rustix::fs::unlinkat(dir.fd(), name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(Error::root(&path, "removing", e)),
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), OsStr::new(name), flags, Mode::empty())
        .map_err(|e| Error::root(&path, "creating", e))?;
    // Through the descriptor, so that the umask takes nothing away.
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o777))
        .map_err(|e| Error::root(&path, "chmod", e))?;
    std::fs::File::from(fd).write_all(bytes).map_err(|e| Error::root(&path, "writing", e))
}

/// Removes [`NEW_SCRIPTS`] and what it holds.
pub fn remove_new(admin: &Directory) -> Result<()> {
    crate::fs::tree::remove_tree(admin.fd(), OsStr::new(NEW_SCRIPTS), &mut (0, 0))
        .or_else(|e| if e == Errno::NOENT { Ok(()) } else { Err(e) })
        .map_err(|e| Error::root(admin.path().join(NEW_SCRIPTS), "removing", e))
}

/// A script's failure, for the error that ends the call: `then` says what was done about it.
pub fn failed(package: &str, name: &str, args: &[&str], then: &str) -> Error {
    Error::Script {
        what: format!("{} {name} {}: {then}", escape(package), escape(&args.join(" "))),
    }
}
