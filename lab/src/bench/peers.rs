//! The tools people already unpack with, run exactly as they would run them, so the matrix
//! answers "what does our safety cost compared with what you use today".
//!
//! - `dpkg`: `dpkg --unpack` with `--refuse-unsafe-io`, i.e. today's dpkg as shipped (its
//!   sync_file_range + fsync dance), whatever `/etc/dpkg/dpkg.cfg.d` says;
//! - `dpkg-unsafe`: the same with `--force-unsafe-io` (what Docker images configure);
//! - `eatmydata`: `dpkg` (`--refuse-unsafe-io`) under eatmydata, whose preloaded library makes
//!   every fsync, fdatasync, sync and sync_file_range a no-op (container builds, CI, image
//!   builders); in the apt-local scenario, apt under eatmydata inside the chroot;
//! - `tar`: `dpkg-deb --fsys-tarfile | tar -x`, no flushing at all;
//! - `tar-sync`: `tar`, then `sync`: the crude way to make it durable;
//! - `decompress`: `dpkg-deb --fsys-tarfile PKG > /dev/null`, which writes nothing into the
//!   root: the floor for one decompression stream, the yardstick of issue #7's targets (dpkg-deb
//!   decodes multi-block xz streams on several threads).
//!
//! dpkg gets a minimal admin directory (`var/lib/dpkg/{status,updates,info}`) under the root and
//! `--root=ROOT --force-not-root --force-depends --no-triggers`, which keeps it to unpacking.
//! This module never runs anything through a shell, and never lets dpkg look at the host's own
//! database: the admin directory is always the one under the root.

use super::command;
use super::{Error, Result};
use serde::Serialize;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// dpkg's admin directory, relative to the root.
pub const ADMIN_DIR: &str = "var/lib/dpkg";

/// A peer unpacker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    Dpkg,
    DpkgUnsafe,
    Eatmydata,
    Tar,
    TarSync,
    Decompress,
}

impl Peer {
    /// Every peer, in the order the table shows them.
    pub const ALL: [Peer; 6] =
        [Peer::Dpkg, Peer::DpkgUnsafe, Peer::Eatmydata, Peer::Tar, Peer::TarSync, Peer::Decompress];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Dpkg => "dpkg",
            Peer::DpkgUnsafe => "dpkg-unsafe",
            Peer::Eatmydata => "eatmydata",
            Peer::Tar => "tar",
            Peer::TarSync => "tar-sync",
            Peer::Decompress => "decompress",
        }
    }

    /// The programs it runs, each with the Debian package that ships it.
    fn tools(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Peer::Dpkg | Peer::DpkgUnsafe => &[("dpkg", "dpkg")],
            Peer::Eatmydata => &[("eatmydata", "eatmydata"), ("dpkg", "dpkg")],
            Peer::Tar => &[("dpkg-deb", "dpkg"), ("tar", "tar")],
            Peer::TarSync => &[("dpkg-deb", "dpkg"), ("tar", "tar"), ("sync", "coreutils")],
            Peer::Decompress => &[("dpkg-deb", "dpkg")],
        }
    }

    /// True when every program it runs is installed.
    pub fn is_installed(self) -> bool {
        self.tools().iter().all(|(tool, _)| command::find_in_path(tool).is_some())
    }

    /// Fails, naming the package to install, when a program it runs is missing.
    pub fn require(self) -> Result<()> {
        for (tool, package) in self.tools() {
            command::require(tool, package)?;
        }
        Ok(())
    }

    /// Makes `root` ready for this peer (untimed): dpkg's admin directory.
    pub fn prepare_root(self, root: &Path) -> io::Result<()> {
        if matches!(self, Peer::Dpkg | Peer::DpkgUnsafe | Peer::Eatmydata) {
            make_admin_dir(root)?;
        }
        Ok(())
    }

    /// dpkg's I/O mode option for this peer: safe for `dpkg` and `eatmydata` (whose flushes
    /// eatmydata takes away), unsafe for `dpkg-unsafe`, none for the peers that are not dpkg.
    pub fn io_mode(self) -> &'static [&'static str] {
        match self {
            Peer::Dpkg | Peer::Eatmydata => &["--refuse-unsafe-io"],
            Peer::DpkgUnsafe => &["--force-unsafe-io"],
            Peer::Tar | Peer::TarSync | Peer::Decompress => &[],
        }
    }

    /// Unpacks `packages` into `root`: the measured part. Every program starts through
    /// `launch` (`Command::new`, or under a counter for `--counts`).
    pub fn run(
        self,
        launch: &dyn Fn(&OsStr) -> Command,
        packages: &[PathBuf],
        root: &Path,
    ) -> io::Result<Output> {
        match self {
            Peer::Dpkg | Peer::DpkgUnsafe | Peer::Eatmydata => {
                let mut root_arg = std::ffi::OsString::from("--root=");
                root_arg.push(root);
                let mut cmd = if self == Peer::Eatmydata {
                    let mut cmd = launch("eatmydata".as_ref());
                    cmd.arg("dpkg");
                    cmd
                } else {
                    launch("dpkg".as_ref())
                };
                cmd.arg(root_arg)
                    .args(["--force-not-root", "--force-depends", "--no-triggers"])
                    .args(self.io_mode())
                    .arg("--unpack")
                    .args(packages)
                    .stdin(Stdio::null())
                    .output()
            }
            Peer::Tar => each_package(packages, |p| tar_extract(launch, p, root, &[])),
            Peer::TarSync => {
                let out = each_package(packages, |p| tar_extract(launch, p, root, &[]))?;
                if !out.status.success() {
                    return Ok(out);
                }
                launch("sync".as_ref()).stdin(Stdio::null()).output()
            }
            Peer::Decompress => each_package(packages, |p| decompress_one(launch, p)),
        }
    }
}

impl std::str::FromStr for Peer {
    type Err = Error;

    fn from_str(s: &str) -> Result<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Peer::ALL.iter().map(|p| p.name()).collect();
            Error::Usage(format!("unknown peer '{s}' (known: {})", known.join(", ")))
        })
    }
}

/// Runs `one` for each package in turn, stopping at the first failure, whose output is
/// returned.
fn each_package(
    packages: &[PathBuf],
    one: impl Fn(&Path) -> io::Result<Output>,
) -> io::Result<Output> {
    let mut last = None;
    for package in packages {
        let out = one(package)?;
        if !out.status.success() {
            return Ok(out);
        }
        last = Some(out);
    }
    last.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no package given"))
}

/// Makes dpkg's admin directory under `root` (`var/lib/dpkg` with `updates/`, `info/` and a
/// `status` file), keeping the database a scenario installed there already.
pub fn make_admin_dir(root: &Path) -> io::Result<()> {
    let admin = root.join(ADMIN_DIR);
    fs::create_dir_all(admin.join("updates"))?;
    fs::create_dir_all(admin.join("info"))?;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(admin.join("status"))
        .map(drop)
}

/// Installs and configures `packages` in `root` with the real dpkg (`--unpack`, then
/// `--configure -a`, dependencies not checked): a root whose database says they are installed,
/// exactly as dpkg leaves it. Untimed preparation, never a measured run.
pub fn install_configured(packages: &[PathBuf], root: &Path) -> io::Result<()> {
    make_admin_dir(root)?;
    let mut root_arg = std::ffi::OsString::from("--root=");
    root_arg.push(root);
    for action in [&["--unpack"][..], &["--configure", "-a"][..]] {
        let args = if action[0] == "--unpack" { packages } else { &[] };
        let out = Command::new("dpkg")
            .arg(&root_arg)
            .args(["--force-depends", "--no-triggers"])
            .args(action)
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code().unwrap_or(-1);
            return Err(io::Error::other(format!(
                "dpkg {} exited {code}: {}",
                action.join(" "),
                said.trim()
            )));
        }
    }
    Ok(())
}

/// `dpkg-deb --fsys-tarfile PKG > /dev/null`.
fn decompress_one(launch: &dyn Fn(&OsStr) -> Command, package: &Path) -> io::Result<Output> {
    launch("dpkg-deb".as_ref())
        .arg("--fsys-tarfile")
        .arg(package)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
}

/// `dpkg-deb --fsys-tarfile PKG | tar -x -f - OPTIONS... -C ROOT`, each started by `launch`.
pub fn tar_extract(
    launch: &dyn Fn(&OsStr) -> Command,
    package: &Path,
    root: &Path,
    options: &[&str],
) -> io::Result<Output> {
    let mut deb = launch("dpkg-deb".as_ref())
        .arg("--fsys-tarfile")
        .arg(package)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let Some(stream) = deb.stdout.take() else {
        return Err(io::Error::other("dpkg-deb has no stdout pipe"));
    };
    let tar = launch("tar".as_ref())
        .args(["-x", "-f", "-"])
        .args(options)
        .arg("-C")
        .arg(root)
        .stdin(stream)
        .output();
    let tar = match tar {
        Ok(tar) => tar,
        Err(e) => {
            let _ = deb.kill();
            let _ = deb.wait();
            return Err(e);
        }
    };
    let deb = deb.wait_with_output()?;
    Ok(if deb.status.success() { tar } else { deb })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_are_usage_errors() {
        for peer in Peer::ALL {
            assert_eq!(peer.name().parse::<Peer>().unwrap(), peer);
        }
        let err = "rpm".parse::<Peer>().unwrap_err();
        assert!(err.is_usage() && err.to_string().contains("dpkg-unsafe"), "{err}");
    }

    #[test]
    fn dpkg_admin_directory_is_made_under_the_root_only_for_dpkg() {
        let dir = tempfile::tempdir().unwrap();
        Peer::Tar.prepare_root(dir.path()).unwrap();
        assert!(!dir.path().join("var").exists());
        Peer::Dpkg.prepare_root(dir.path()).unwrap();
        let admin = dir.path().join("var/lib/dpkg");
        assert!(admin.join("updates").is_dir() && admin.join("info").is_dir());
        assert_eq!(fs::read(admin.join("status")).unwrap(), b"");
    }
}
