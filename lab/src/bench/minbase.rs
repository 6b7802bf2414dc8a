//! The minbase scenario (`--scenario minbase`): a Debian base system installed into an empty
//! root as an installer installs it, timed until the packages are unpacked and until the system
//! is configured.
//!
//! Why a scenario of its own: the workload where the durability choice costs most is not one
//! package but a whole system (debootstrap, image builders), where every `dpkg --unpack` pays
//! its own flushes. Each tool starts where it would start in an installer:
//! - dpkg gets the root as debootstrap's first stage leaves it, made before the clock starts:
//!   the merged-/usr symlinks, an empty database, the files of the packages `first-stage.list`
//!   names extracted by `dpkg-deb --fsys-tarfile | tar -x --keep-directory-symlink`, and every
//!   package copied into the root; then the timed `chroot ROOT dpkg --force-depends --unpack`
//!   of the whole set, with `--refuse-unsafe-io` (`dpkg`) or `--force-unsafe-io`
//!   (`dpkg-unsafe`);
//! - our engine starts from the empty root: `unpack --bootstrap`, both of its stages timed;
//! - then every tool's root gets the same timed `chroot ROOT dpkg --configure -a`, which must
//!   exit 0 ([`configure`]).
//!
//! The workload is a directory made by `fixtures/fetch-minbase.sh`: its `*.deb` and its
//! `first-stage.list` ([`read_set`]). This module never downloads anything and never decides
//! the first stage itself: the script's apt resolution decides it for dpkg, the engine's own
//! `--bootstrap` plan for the engine. It never runs dpkg outside the root's chroot, so the
//! host's database is never read or written.

use super::engine::Engine;
use super::peers::{self, Peer};
use super::plan::{Tool, Workload};
use super::{Error, Result};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The file of a minbase directory naming the first stage's packages, one file name a line.
pub const FIRST_STAGE_LIST: &str = "first-stage.list";

/// Where the dpkg peers' packages are copied, relative to the root: dpkg in the chroot reads
/// them there, as debootstrap's second stage reads `var/cache/apt/archives`.
pub const DEBS_INSIDE: &str = "var/cache/minbase";

/// The top-level directories the first stage makes symlinks into `usr/`: debootstrap's table
/// for amd64, which `unpack --bootstrap` and the dpkg reference test make too (usr-is-merged's
/// preinst refuses a root without the first three).
const MERGED_DIRS: [&str; 6] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// The environment of every command run in the root (and of the engine's bootstrap, whose
/// scripts run there): an installer's, not the bench's.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A minbase directory's packages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// Every `*.deb` of the directory, by file name.
    pub packages: Vec<PathBuf>,
    /// The ones `first-stage.list` names, in its order.
    pub first_stage: Vec<PathBuf>,
}

/// Reads the directory `fixtures/fetch-minbase.sh DIR` made: every `*.deb` in it, and the
/// first stage its `first-stage.list` names (each line the file name of one of them).
pub fn read_set(dir: &Path) -> Result<Set> {
    let dir = dir.canonicalize().map_err(Error::io(dir))?;
    let mut packages: Vec<PathBuf> = Vec::new();
    for entry in fs::read_dir(&dir).map_err(Error::io(&dir))? {
        let path = entry.map_err(Error::io(&dir))?.path();
        if path.extension().is_some_and(|e| e == "deb") && path.is_file() {
            packages.push(path);
        }
    }
    packages.sort();
    let list = dir.join(FIRST_STAGE_LIST);
    let usage = |why: String| {
        Error::Usage(format!(
            "{}: {why}; make the directory with fixtures/fetch-minbase.sh DIR",
            dir.display()
        ))
    };
    if packages.is_empty() {
        return Err(usage("no *.deb in it".to_string()));
    }
    let text = match fs::read_to_string(&list) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(usage(format!("no {FIRST_STAGE_LIST}")))
        }
        Err(e) => return Err(Error::io(&list)(e)),
    };
    let mut first_stage = Vec::new();
    for (n, name) in text.lines().map(str::trim).enumerate().filter(|(_, l)| !l.is_empty()) {
        let path = dir.join(name);
        if name.contains('/') || !packages.contains(&path) {
            return Err(usage(format!(
                "{FIRST_STAGE_LIST} line {}: '{name}' is not a package of the directory",
                n + 1
            )));
        }
        first_stage.push(path);
    }
    if first_stage.is_empty() {
        return Err(usage(format!("{FIRST_STAGE_LIST} names no package")));
    }
    Ok(Set { packages, first_stage })
}

/// True for the tools the scenario can run: our strategies, and the dpkg peers (the others do
/// not install a system).
pub fn runs(tool: &Tool) -> bool {
    matches!(tool, Tool::Strategy(_) | Tool::Peer(Peer::Dpkg | Peer::DpkgUnsafe))
}

/// Makes the empty `root` ready for `tool` (untimed) and returns the packages as the measured
/// command names them: for the engine, the workload's own paths (its root stays empty); for a
/// dpkg peer, the first stage ([`first_stage`]) and the packages copied into the root, named
/// as dpkg sees them in the chroot.
pub fn prepare(tool: &Tool, workload: &Workload, root: &Path) -> io::Result<Vec<PathBuf>> {
    if let Tool::Strategy(_) = tool {
        return Ok(workload.package_paths());
    }
    first_stage(&workload.first_stage, root)?;
    let inside = root.join(DEBS_INSIDE);
    fs::create_dir_all(&inside)?;
    let mut named = Vec::with_capacity(workload.packages.len());
    for package in workload.package_paths() {
        let name = package
            .file_name()
            .ok_or_else(|| io::Error::other(format!("{}: no file name", package.display())))?;
        fs::copy(&package, inside.join(name))?;
        named.push(Path::new("/").join(DEBS_INSIDE).join(name));
    }
    Ok(named)
}

/// debootstrap's first stage in `root`: the merged-/usr symlinks, dpkg's admin directory with
/// an empty status file, and the files of `packages`, extracted without scripts or database.
pub fn first_stage(packages: &[PathBuf], root: &Path) -> io::Result<()> {
    for dir in MERGED_DIRS {
        fs::create_dir_all(root.join("usr").join(dir))?;
        std::os::unix::fs::symlink(format!("usr/{dir}"), root.join(dir))?;
    }
    peers::make_admin_dir(root)?;
    for package in packages {
        let out =
            peers::tar_extract(&|p| Command::new(p), package, root, &["--keep-directory-symlink"])?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            return Err(io::Error::other(format!(
                "{}: extracting the first stage: {}",
                package.display(),
                said.trim()
            )));
        }
    }
    Ok(())
}

/// The measured command of `tool` on the prepared `root`: `unpack --bootstrap` for a strategy,
/// `chroot ROOT dpkg --force-depends --unpack` with the peer's I/O mode for a dpkg peer; started
/// by `launch` (`Command::new`, or under a counter for `--counts`).
pub fn run(
    engine: &Engine,
    launch: &dyn Fn(&OsStr) -> Command,
    tool: &Tool,
    packages: &[PathBuf],
    root: &Path,
) -> io::Result<Output> {
    let mut cmd = match tool {
        Tool::Strategy(strategy) => engine.bootstrap_command(launch, strategy, packages, root),
        Tool::Peer(peer @ (Peer::Dpkg | Peer::DpkgUnsafe)) => {
            let mut cmd = launch("chroot".as_ref());
            cmd.arg(root)
                .args(["dpkg", "--force-depends"])
                .args(peer.io_mode())
                .arg("--unpack")
                .args(packages);
            cmd
        }
        Tool::Peer(peer) => {
            return Err(io::Error::other(format!(
                "the {} peer does not install a system",
                peer.name()
            )))
        }
    };
    installer_env(&mut cmd).output()
}

/// `chroot ROOT dpkg --configure -a`: what finishes the system after any tool.
pub fn configure(root: &Path) -> io::Result<Output> {
    installer_env(Command::new("chroot").arg(root).args(["dpkg", "--configure", "-a"])).output()
}

/// An installer's environment and no standard input.
pub(crate) fn installer_env(cmd: &mut Command) -> &mut Command {
    cmd.env_clear()
        .env("PATH", PATH)
        .env("LC_ALL", "C")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name)
    }

    /// A minbase directory of small fixture packages, `first` of them in the first stage.
    fn set_dir(first: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in ["pkg-v1_1.0_all.deb", "other_1.0_all.deb"] {
            fs::copy(fixture(name), dir.path().join(name)).unwrap();
        }
        fs::write(
            dir.path().join(FIRST_STAGE_LIST),
            first.iter().map(|n| format!("{n}\n")).collect::<String>(),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_set_is_every_deb_of_the_directory_and_the_first_stage_its_list_names() {
        let dir = set_dir(&["other_1.0_all.deb"]);
        let set = read_set(dir.path()).unwrap();
        let names: Vec<_> =
            set.packages.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["other_1.0_all.deb", "pkg-v1_1.0_all.deb"]);
        assert_eq!(set.first_stage, [set.packages[0].clone()]);
    }

    #[test]
    fn a_directory_without_a_usable_first_stage_is_a_usage_error_naming_it() {
        for (first, says) in [
            (&["missing_1.0_all.deb"][..], "line 1: 'missing_1.0_all.deb' is not a package"),
            (&["../other_1.0_all.deb"][..], "is not a package of the directory"),
            (&[][..], "names no package"),
        ] {
            let dir = set_dir(first);
            let err = read_set(dir.path()).unwrap_err();
            assert!(
                err.is_usage()
                    && err.to_string().contains(says)
                    && err.to_string().contains("fetch-minbase.sh"),
                "{err}"
            );
        }
        let dir = set_dir(&[]);
        fs::remove_file(dir.path().join(FIRST_STAGE_LIST)).unwrap();
        let err = read_set(dir.path()).unwrap_err();
        assert!(err.is_usage() && err.to_string().contains("no first-stage.list"), "{err}");
    }

    #[test]
    fn the_first_stage_is_merged_usr_an_empty_database_and_only_the_listed_files() {
        let dir = set_dir(&["pkg-v1_1.0_all.deb"]);
        let set = read_set(dir.path()).unwrap();
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        first_stage(&set.first_stage, &root).unwrap();
        for d in MERGED_DIRS {
            assert_eq!(fs::read_link(root.join(d)).unwrap(), Path::new("usr").join(d));
        }
        assert_eq!(fs::read(root.join("var/lib/dpkg/status")).unwrap(), b"");
        let listed = |deb: &str| {
            let out =
                Command::new("dpkg-deb").arg("--contents").arg(fixture(deb)).output().unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .filter(|l| l.starts_with('-'))
                .map(|l| l.rsplit(' ').next().unwrap().trim_start_matches("./").to_string())
                .collect::<Vec<_>>()
        };
        let (ours, theirs) = (listed("pkg-v1_1.0_all.deb"), listed("other_1.0_all.deb"));
        assert!(!ours.is_empty() && !theirs.is_empty());
        assert!(ours.iter().all(|f| root.join(f).is_file()), "{ours:?}");
        assert!(theirs.iter().all(|f| !root.join(f).exists()), "{theirs:?}");
    }

    #[test]
    fn the_engine_keeps_an_empty_root_and_dpkg_gets_the_packages_inside_it() {
        let dir = set_dir(&["pkg-v1_1.0_all.deb"]);
        let set = read_set(dir.path()).unwrap();
        let packages = set
            .packages
            .iter()
            .map(|p| super::super::package::Package::inspect(p).unwrap())
            .collect();
        let workload = Workload {
            label: "w".into(),
            synthetic_files: None,
            packages,
            old_packages: Vec::new(),
            first_stage: set.first_stage,
        };
        let (ours, theirs) = (dir.path().join("ours"), dir.path().join("theirs"));
        for root in [&ours, &theirs] {
            fs::create_dir(root).unwrap();
        }
        assert_eq!(
            prepare(&Tool::Strategy("fsync".into()), &workload, &ours).unwrap(),
            set.packages
        );
        assert_eq!(fs::read_dir(&ours).unwrap().count(), 0, "the engine bootstraps the empty root");
        let inside = prepare(&Tool::Peer(Peer::Dpkg), &workload, &theirs).unwrap();
        assert_eq!(
            inside,
            [
                Path::new("/var/cache/minbase/other_1.0_all.deb"),
                Path::new("/var/cache/minbase/pkg-v1_1.0_all.deb")
            ]
        );
        for (copy, original) in inside.iter().zip(&set.packages) {
            assert_eq!(
                fs::read(theirs.join(copy.strip_prefix("/").unwrap())).unwrap(),
                fs::read(original).unwrap()
            );
        }
        assert!(theirs.join("bin").is_symlink());
    }

    #[test]
    fn only_our_strategies_and_the_dpkg_peers_install_a_system() {
        assert!(runs(&Tool::Strategy("none".into())));
        assert!(runs(&Tool::Peer(Peer::Dpkg)) && runs(&Tool::Peer(Peer::DpkgUnsafe)));
        assert!(!runs(&Tool::Peer(Peer::Tar)) && !runs(&Tool::Peer(Peer::Decompress)));
    }
}
