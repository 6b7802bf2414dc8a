//! What the root holds before a measured run: nothing (`install`), or an installed copy of the
//! same paths with other contents (`upgrade`), or that copy installed and configured by dpkg in
//! a root with dpkg's database (`upgrade-db`: the tool under test upgrades a database too); and
//! what else the machine does during it: the busy scenarios install into an empty root while a
//! background writer ([`super::busy`]) dirties data on the same filesystem (`busy`) or on
//! another one (`busy-elsewhere`); or, for `minbase`, an empty root for our engine and
//! debootstrap's first stage for dpkg, before a whole base system is installed
//! ([`super::minbase`]); or, for `apt-local`, a copy of a chroot prepared once per bench run
//! (a minbase with eatmydata and the apt-local set at version 1, version 2 in apt's lists),
//! where apt upgrades the set ([`super::apt_scenario`]); or, for `apt-install` and
//! `dist-upgrade`, a copy of a real Debian chroot of `fixtures/make-apt-chroot.sh`'s tarballs,
//! where apt installs a development set or upgrades the system to the next release, offline
//! (the same module). Two scenarios are `unpack-crashtest`'s alone: `bootstrap`, a base system
//! into an empty root by `unpack --bootstrap`, whose two stages it cuts the power in; and `apt`,
//! the `apt-local` upgrade by `apt-get upgrade` in a minbase ([`super::apt_local`]).
//!
//! Why upgrade matters: replacing files is where atomicity costs most (the old content must
//! survive until the new one is durable), and filesystems treat a rename over an existing file
//! differently (ext4's auto_da_alloc flushes it). The old copy is a rewritten package (same
//! paths, different bytes and lengths), installed with `unpack -s none` and made durable with
//! one syncfs before the run, so every tool replaces the same existing files. The preparation is
//! never measured.

use super::engine::Engine;
use super::{command, Error, Result};
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The state of the root before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    Install,
    Upgrade,
    /// An upgrade in a root with dpkg's database, the older version installed and configured by
    /// dpkg (`unpack-crashtest` adds a conffile and a file the newer version drops).
    #[serde(rename = "upgrade-db")]
    UpgradeDb,
    Busy,
    #[serde(rename = "busy-elsewhere")]
    BusyElsewhere,
    /// A Debian base system into an empty root, as an installer installs it: `unpack
    /// --bootstrap` against dpkg after a first stage, then `dpkg --configure -a`
    /// ([`super::minbase`]).
    Minbase,
    /// `apt-get upgrade` of the lab's apt-local set from version 1 to version 2 in a copy of
    /// a prepared minbase chroot, apt driving each peer's dpkg ([`super::apt_scenario`]).
    #[serde(rename = "apt-local")]
    AptLocal,
    /// `apt-get install python3 perl vim git build-essential` in a copy of
    /// `fixtures/make-apt-chroot.sh`'s `bookworm.tar`, offline ([`super::apt_scenario`]).
    #[serde(rename = "apt-install")]
    AptInstall,
    /// `apt-get dist-upgrade` to trixie in a copy of `fixtures/make-apt-chroot.sh`'s
    /// `bookworm-devel.tar`, offline ([`super::apt_scenario`]).
    #[serde(rename = "dist-upgrade")]
    DistUpgrade,
    /// `unpack --bootstrap --no-scripts` of an Essential copy of the package and a second
    /// package of the crash test's own into an empty root (`crate::crash::bootstrap`): the crash
    /// test's alone, which checks both stages after every power cut.
    Bootstrap,
    /// `apt-get upgrade` of the `apt-local` set from version 1 to 2 in a bootstrapped minbase,
    /// through `unpack-dpkg` or the real dpkg (`crate::crash::apt`): the crash test's alone.
    Apt,
}

impl Scenario {
    /// Every scenario, in the order the tables show them.
    pub const ALL: [Scenario; 11] = [
        Scenario::Install,
        Scenario::Upgrade,
        Scenario::UpgradeDb,
        Scenario::Busy,
        Scenario::BusyElsewhere,
        Scenario::Minbase,
        Scenario::AptLocal,
        Scenario::AptInstall,
        Scenario::DistUpgrade,
        Scenario::Bootstrap,
        Scenario::Apt,
    ];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Install => "install",
            Scenario::Upgrade => "upgrade",
            Scenario::UpgradeDb => "upgrade-db",
            Scenario::Busy => "busy",
            Scenario::BusyElsewhere => "busy-elsewhere",
            Scenario::Minbase => "minbase",
            Scenario::AptLocal => "apt-local",
            Scenario::AptInstall => "apt-install",
            Scenario::DistUpgrade => "dist-upgrade",
            Scenario::Bootstrap => "bootstrap",
            Scenario::Apt => "apt",
        }
    }

    /// True for the scenarios only `unpack-bench` runs: the busy ones (a writer beside the run),
    /// minbase (a whole system) and the apt scenarios (whole apt runs); `unpack-crashtest`
    /// refuses them.
    pub fn is_bench_only(self) -> bool {
        self.writer().is_some() || self.installs_a_system() || self.runs_apt()
    }

    /// True for the scenarios that time a whole apt run in a prepared chroot: apt-local,
    /// apt-install and dist-upgrade ([`super::apt_scenario`]).
    pub fn runs_apt(self) -> bool {
        matches!(self, Scenario::AptLocal | Scenario::AptInstall | Scenario::DistUpgrade)
    }

    /// True for the scenarios whose workload is a minbase directory (`fixtures/fetch-minbase.sh`)
    /// and whose runs happen in a whole system: minbase and apt-local.
    pub fn installs_a_system(self) -> bool {
        matches!(self, Scenario::Minbase | Scenario::AptLocal)
    }

    /// True for the scenarios only `unpack-crashtest` runs: bootstrap, whose point is what a
    /// power cut between and inside the two stages leaves, and apt, what one inside an apt run
    /// leaves; `unpack-bench` refuses them.
    pub fn is_crash_only(self) -> bool {
        matches!(self, Scenario::Bootstrap | Scenario::Apt)
    }

    /// Where the background writer writes during the run, if the scenario has one.
    pub fn writer(self) -> Option<WriterSite> {
        match self {
            Scenario::Busy => Some(WriterSite::SameFilesystem),
            Scenario::BusyElsewhere => Some(WriterSite::OtherFilesystem),
            Scenario::Install
            | Scenario::Upgrade
            | Scenario::UpgradeDb
            | Scenario::Minbase
            | Scenario::AptLocal
            | Scenario::AptInstall
            | Scenario::DistUpgrade
            | Scenario::Bootstrap
            | Scenario::Apt => None,
        }
    }

    /// Brings `root` (an empty directory) to this scenario's starting state; `old` are the
    /// rewritten packages of [`make_old_version`]. The caller syncs afterwards. (The minbase
    /// root depends on the tool: [`super::minbase::prepare`]; an apt scenario's root is the prepared
    /// chroot's copy: [`super::apt_scenario::Prepared::copy_to`].) The crash test's scenarios are
    /// refused: [`refuse_crash_only`] keeps them from getting here.
    pub fn prepare(self, engine: &Engine, old: &[PathBuf], root: &Path) -> Result<()> {
        match self {
            Scenario::Install
            | Scenario::Busy
            | Scenario::BusyElsewhere
            | Scenario::Minbase
            | Scenario::AptLocal
            | Scenario::AptInstall
            | Scenario::DistUpgrade => Ok(()),
            Scenario::Upgrade => engine.install_unsafely(old, root),
            Scenario::UpgradeDb => {
                super::peers::install_configured(old, root).map_err(Error::io(root))
            }
            Scenario::Bootstrap | Scenario::Apt => refuse_crash_only(&[self]),
        }
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Scenario, String> {
        Scenario::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Scenario::ALL.iter().map(|c| c.name()).collect();
            format!("unknown scenario '{s}' (known: {})", known.join(", "))
        })
    }
}

/// A usage error (exit 2) naming the first of `scenarios` that only `unpack-crashtest` runs.
pub fn refuse_crash_only(scenarios: &[Scenario]) -> Result<()> {
    match scenarios.iter().find(|s| s.is_crash_only()) {
        Some(s) => Err(Error::Usage(format!(
            "--scenario {}: a scenario of unpack-crashtest, which cuts the power in it; unpack-bench does not time it",
            s.name()
        ))),
        None => Ok(()),
    }
}

/// The filesystem the busy scenarios' writer dirties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterSite {
    /// The run's own filesystem, beside the root.
    SameFilesystem,
    /// A filesystem of the bench's own for the writer alone: ext4 with default options, fresh
    /// for every run, on the same kind of device as the run's.
    OtherFilesystem,
}

/// Writes into `dir` a copy of `package` whose regular files have other bytes and other
/// lengths at the same paths (control data unchanged), using dpkg-deb to take it apart and put
/// it back together. Returns the new package's path.
pub fn make_old_version(package: &Path, dir: &Path) -> Result<PathBuf> {
    let stem = package.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let stage = dir.join(format!("{stem}.old-tree"));
    let out = dir.join(format!("{stem}.old.deb"));
    command::output(
        Command::new("dpkg-deb").arg("--raw-extract").arg(package).arg(&stage),
        package,
    )?;
    rewrite_tree(&stage, &stage.join("DEBIAN"))?;
    // -Znone: it is only installed in the untimed preparation, so make it fast to build.
    command::output(
        Command::new("dpkg-deb").args(["--nocheck", "-Znone", "--build"]).arg(&stage).arg(&out),
        package,
    )?;
    fs::remove_dir_all(&stage).map_err(Error::io(&stage))?;
    Ok(out)
}

/// Replaces every regular file under `dir` (except under `skip`) by [`old_content`] of a
/// different length, keeping its mode.
fn rewrite_tree(dir: &Path, skip: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if path == skip {
            continue;
        }
        let meta = fs::symlink_metadata(&path).map_err(Error::io(&path))?;
        if meta.is_dir() {
            rewrite_tree(&path, skip)?;
        } else if meta.is_file() {
            // Remove and recreate rather than truncate: works on read-only files without root.
            fs::remove_file(&path).map_err(Error::io(&path))?;
            fs::write(&path, old_content(meta.len())).map_err(Error::io(&path))?;
            fs::set_permissions(&path, meta.permissions()).map_err(Error::io(&path))?;
        }
    }
    Ok(())
}

/// Content for the old version of a file of `len` bytes: never the same length (half of it, or
/// a few bytes more for the tiniest files), so the upgrade changes sizes as well as bytes.
fn old_content(len: u64) -> Vec<u8> {
    let new_len = if len > 2 { len / 2 + 1 } else { len + 3 };
    b"unpack-bench: the old version of this file\n"
        .iter()
        .copied()
        .cycle()
        .take(new_len as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_content_never_has_the_original_length() {
        for len in [0u64, 1, 2, 3, 4, 5, 100, 4096, 1 << 20] {
            assert_ne!(old_content(len).len() as u64, len, "{len}");
        }
    }

    /// The upgrade-db preparation leaves the old copy installed and configured in dpkg's
    /// database, which the dpkg peer's own preparation keeps and its run upgrades.
    #[test]
    fn upgrade_db_installs_the_old_copy_with_dpkg_and_the_dpkg_peer_upgrades_it() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: dpkg --root installs as root");
            return;
        }
        use super::super::peers::{install_configured, Peer};
        let dir = tempfile::tempdir().unwrap();
        let deb =
            super::super::synthetic::Spec { files: 3, size: 100 }.generate(dir.path()).unwrap();
        let old = make_old_version(&deb, dir.path()).unwrap();
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        let status = || {
            let out = Command::new("dpkg-query")
                .arg(format!("--root={}", root.display()))
                .args(["--showformat=${Status}", "--show", "synthetic-3-100"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        install_configured(&[old], &root).unwrap();
        assert_eq!(status(), "install ok installed");
        Peer::Dpkg.prepare_root(&root).unwrap();
        assert_eq!(status(), "install ok installed", "the peer's preparation keeps the database");
        let out = Peer::Dpkg.run(&|p| Command::new(p), &[deb], &root).unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(status(), "install ok unpacked");
        let f = root.join("usr/share/synthetic-3-100/d0000/f0000001");
        assert_eq!(fs::metadata(f).unwrap().len(), 100, "the new content");
    }

    #[test]
    fn the_old_version_has_the_same_paths_and_different_contents() {
        let dir = tempfile::tempdir().unwrap();
        let spec = super::super::synthetic::Spec { files: 5, size: 100 };
        let deb = spec.generate(dir.path()).unwrap();
        let old = make_old_version(&deb, dir.path()).unwrap();
        let list = |p: &Path| {
            let out = Command::new("dpkg-deb").arg("--contents").arg(p).output().unwrap();
            assert!(out.status.success());
            let text = String::from_utf8(out.stdout).unwrap();
            let mut names: Vec<String> = text
                .lines()
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
                .collect();
            names.sort();
            names
        };
        assert_eq!(list(&deb), list(&old));
        let (new_x, old_x) = (dir.path().join("new"), dir.path().join("oldx"));
        for (p, x) in [(&deb, &new_x), (&old, &old_x)] {
            assert!(Command::new("dpkg-deb").arg("-x").arg(p).arg(x).status().unwrap().success());
        }
        let f = "usr/share/synthetic-5-100/d0000/f0000003";
        let (a, b) = (fs::read(new_x.join(f)).unwrap(), fs::read(old_x.join(f)).unwrap());
        assert_eq!(a.len(), 100);
        assert_eq!(b.len(), 51);
        assert!(!dir.path().join("synthetic-5-100_1.0_all.old-tree").exists(), "stage removed");
    }
}
