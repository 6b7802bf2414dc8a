//! The apt scenarios (issue 28): a whole apt run timed, apt driving each peer's dpkg, so that
//! the bench answers "what does safety cost under apt" and not only "what does one unpack cost".
//! One module for the three workloads ([`AptWorkload`]): they differ in how their chroot is
//! prepared, how it is entered and what apt is asked to do, and in nothing they measure.
//!
//! `apt-local`: the chroot is prepared once per bench run, untimed ([`Prepared::make`]): the
//! minbase of a `fixtures/fetch-minbase.sh` directory bootstrapped by `unpack --bootstrap` and
//! configured, eatmydata installed from the host's `apt-get download eatmydata libeatmydata1`,
//! the lab's apt-local set ([`super::apt_local`]) installed at version 1 by apt with the real
//! dpkg, and version 2's repository in apt's lists; the timed part is `apt-get upgrade -y`
//! alone: 24 packages upgraded with their scripts, conffiles, Pre-Depends and a file trigger,
//! entered by a plain `chroot` (the set's scripts need no /proc).
//!
//! `apt-install` and `dist-upgrade`: the chroot is a tarball of `fixtures/make-apt-chroot.sh`
//! extracted once per bench run ([`Prepared::from_tarball`]; `bookworm.tar`, a minbase with
//! eatmydata, and `bookworm-devel.tar`, the same after the install), every archive already in
//! apt's cache. The timed part is `apt-get install -y python3 perl vim git build-essential`, or
//! `apt-get dist-upgrade -y` with the sources switched to trixie in the preparation, entered
//! as `fixtures/apt-workload.sh` enters it: `in_root --offline` of `fixtures/apt-chroot-lib.sh`
//! (compiled in and written to the bench's directory), namespaces that mount /proc, /sys, /dev
//! and a /run tmpfs for the run alone and take every mount and leftover process down with
//! them, and no network, so a run that would download fails instead.
//!
//! In every workload the front end `unpack-dpkg` (the one beside the engine) is copied to
//! `/usr/local/bin`, and apt runs as each peer makes it run:
//! - `dpkg`: apt with `-o DPkg::Options::=--refuse-unsafe-io`, the real dpkg as shipped, whatever
//!   a `dpkg.cfg.d` says;
//! - `dpkg-unsafe`: with `--force-unsafe-io` instead;
//! - `eatmydata`: `eatmydata apt-get`, with `--refuse-unsafe-io` (eatmydata takes the flushes);
//! - a strategy: apt with `unpack-dpkg` as its dpkg, the strategy chosen by
//!   `UNPACK_DPKG_STRATEGY` (which wins over the front end's configuration and over a
//!   `force-unsafe-io`, which would otherwise make it `none`), and `--refuse-unsafe-io`.
//!
//! apt's dpkg is always a timer of the bench's own ([`TIMER`]): a shell script that runs the
//! peer's dpkg (`UNPACK_BENCH_DPKG`) with apt's arguments and logs each call's start and end
//! ([`CALL_LOG`]), from which the run's unpack and configure shares are read, measured per
//! call. Its cost (two `date` processes a call) is the same for every peer. The peak RSS is
//! the largest of the run's processes, as GNU time reads it from wait4.
//!
//! After each run its root is compared with a reference made in the preparation (the same apt
//! run in another copy, by the `dpkg` peer for apt-local and by the `eatmydata` peer for the
//! real workloads: the same dpkg without its flushes, the same tree in a fraction of the time)
//! by [`crate::compare`], leaving out what two runs differ in anyway ([`IGNORE`]): a run whose
//! tree or database differs is a failed run, never a time. This module never runs apt or dpkg
//! outside a chroot, never touches the host's database, never lets a run reach the network
//! (the real workloads), and never mounts anything outside a namespace that dies with the run.

use super::apt_local;
use super::engine::Engine;
use super::minbase::installer_env;
use super::peers::Peer;
use super::plan::Tool;
use super::scenario::Scenario;
use super::{command, Error, Result};
use crate::compare::{self, ignore::Ignore};
use serde::Serialize;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where the prepared chroot has the front end.
pub const FRONT_END: &str = "/usr/local/bin/unpack-dpkg";

/// apt's dpkg in every run: the bench's timer of dpkg calls.
pub const TIMER: &str = "/usr/local/sbin/unpack-bench-dpkg";

/// The timer's log in the root: `START END ARGS...` a call, seconds since the epoch.
pub const CALL_LOG: &str = "/var/log/unpack-bench-dpkg.log";

/// The timer: runs `$UNPACK_BENCH_DPKG` with apt's arguments, its exit status kept, and logs
/// the call. No `set -e`: the call's failure is apt's to see.
const TIMER_SCRIPT: &str = "#!/bin/sh
# unpack-bench's timer of apt's dpkg calls (the apt-local scenario): START END ARGS per call.
start=$(date +%s.%N)
\"$UNPACK_BENCH_DPKG\" \"$@\"
status=$?
echo \"$start $(date +%s.%N) $*\" >> /var/log/unpack-bench-dpkg.log
exit $status
";

/// The real dpkg in the root.
const REAL_DPKG: &str = "/usr/bin/dpkg";

/// dpkg's log in the root, where the front end logs the strategy of each of its calls.
pub const DPKG_LOG: &str = "/var/log/dpkg.log";

/// The packages of the eatmydata peer, downloaded on the host for the host's release (the
/// minbase's: fetch-minbase.sh resolves it with the host's lists).
const EATMYDATA: [&str; 2] = ["eatmydata", "libeatmydata1"];

/// What a run and the reference differ in anyway, besides fixtures/apt-workload.ignore's
/// (logs, apt's caches): the engine's state directory, which only the front end's runs have.
pub const IGNORE: &str = "var/lib/unpack\n";

/// True for the tools the scenario runs: our strategies (through `unpack-dpkg`) and the peers
/// that are a dpkg apt can drive.
pub fn runs(tool: &Tool) -> bool {
    matches!(tool, Tool::Strategy(_) | Tool::Peer(Peer::Dpkg | Peer::DpkgUnsafe | Peer::Eatmydata))
}

/// Which apt run a scenario times, and from what chroot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AptWorkload {
    /// `apt-get upgrade` of the lab's apt-local set, in a minbase prepared here.
    Local,
    /// `apt-get install` of the install set of `fixtures/apt-chroot-lib.sh`, from
    /// `bookworm.tar`.
    Install,
    /// `apt-get dist-upgrade` to trixie, from `bookworm-devel.tar`.
    DistUpgrade,
}

impl AptWorkload {
    /// The workload of `scenario`, if it is an apt scenario.
    pub fn of(scenario: Scenario) -> Option<AptWorkload> {
        match scenario {
            Scenario::AptLocal => Some(AptWorkload::Local),
            Scenario::AptInstall => Some(AptWorkload::Install),
            Scenario::DistUpgrade => Some(AptWorkload::DistUpgrade),
            _ => None,
        }
    }

    /// The tarball of `fixtures/make-apt-chroot.sh` the workload starts from, if it is a real
    /// one.
    pub fn tarball(self) -> Option<&'static str> {
        match self {
            AptWorkload::Local => None,
            AptWorkload::Install => Some("bookworm.tar"),
            AptWorkload::DistUpgrade => Some("bookworm-devel.tar"),
        }
    }

    /// apt-get's words after its options: what the run asks apt to do.
    fn apt_args(self) -> Vec<String> {
        let words: Vec<&str> = match self {
            AptWorkload::Local => vec!["upgrade", "-y"],
            AptWorkload::DistUpgrade => vec!["dist-upgrade", "-y"],
            AptWorkload::Install => {
                let mut words = vec!["install", "-y"];
                words.extend(lib_value("INSTALL_SET").split_whitespace());
                words
            }
        };
        words.into_iter().map(str::to_string).collect()
    }

    /// The peer whose run in the preparation is the reference.
    fn reference_peer(self) -> Peer {
        match self {
            AptWorkload::Local => Peer::Dpkg,
            AptWorkload::Install | AptWorkload::DistUpgrade => Peer::Eatmydata,
        }
    }
}

/// `fixtures/apt-chroot-lib.sh`, which enters the real workloads' chroots as
/// `fixtures/apt-workload.sh` does, extracts their tarballs and switches their sources.
const CHROOT_LIB: &str = include_str!("../../../fixtures/apt-chroot-lib.sh");

/// The value of the library's `NAME="VALUE"` line (its install set), so that the bench and
/// `fixtures/apt-workload.sh` install one set; empty if there is none (a test holds it).
fn lib_value(name: &str) -> &'static str {
    let prefix = format!("{name}=\"");
    CHROOT_LIB
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str())?.strip_suffix('"'))
        .unwrap_or_default()
}

/// What one apt run's dpkg calls and processes took, read after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AptFigures {
    /// apt's calls of its dpkg.
    pub dpkg_calls: u64,
    /// Seconds in `--unpack` (and `--install`) calls.
    pub unpack_s: f64,
    /// Seconds in `--configure` (and `--triggers-only`) calls.
    pub configure_s: f64,
    /// The largest resident set of the run's processes.
    pub peak_rss_bytes: u64,
}

impl AptFigures {
    /// Reads the timer's log `log` (a run's [`CALL_LOG`]) and GNU time's `%M` output `rss`.
    pub fn read(log: &Path, rss: &Path) -> std::result::Result<AptFigures, String> {
        let text = fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut figures = parse_calls(&text).map_err(|e| format!("{}: {e}", log.display()))?;
        let kib = fs::read_to_string(rss).map_err(|e| format!("{}: {e}", rss.display()))?;
        let kib: u64 = kib
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{}: no maximum resident set size in it", rss.display()))?;
        figures.peak_rss_bytes = kib.saturating_mul(1024);
        Ok(figures)
    }
}

/// For a strategy's run, that every call the front end made in it ran the strategy asked for,
/// chosen by `UNPACK_DPKG_STRATEGY` (its `unpack-dpkg strategy NAME (WHY)` lines in `dpkg_log`,
/// [`DPKG_LOG`]), and that there was one at least: nothing (a `force-unsafe-io`, the front end's
/// configuration) turned it into another. Nothing to check for a peer.
pub fn check_strategy(tool: &Tool, dpkg_log: &str) -> std::result::Result<(), String> {
    let Tool::Strategy(strategy) = tool else { return Ok(()) };
    let expected = format!("{strategy} (UNPACK_DPKG_STRATEGY)");
    let chosen: Vec<&str> = dpkg_log
        .lines()
        .filter_map(|l| l.split_once(" unpack-dpkg strategy "))
        .map(|(_, s)| s)
        .collect();
    match chosen.iter().find(|s| **s != expected) {
        _ if chosen.is_empty() => {
            Err(format!("{DPKG_LOG}: no call of unpack-dpkg logged its strategy"))
        }
        Some(other) => {
            Err(format!("{DPKG_LOG}: unpack-dpkg ran with strategy {other}, not {expected}"))
        }
        None => Ok(()),
    }
}

/// The calls of a timer's log, summed by kind.
fn parse_calls(text: &str) -> std::result::Result<AptFigures, String> {
    let mut figures = AptFigures::default();
    for (n, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let mut time = || words.next().and_then(|w| w.parse::<f64>().ok());
        let (Some(start), Some(end)) = (time(), time()) else {
            return Err(format!("line {}: not START END ARGS: '{line}'", n + 1));
        };
        let seconds = (end - start).max(0.0);
        let args: Vec<&str> = words.collect();
        figures.dpkg_calls += 1;
        if args.iter().any(|a| matches!(*a, "--unpack" | "--install" | "-i")) {
            figures.unpack_s += seconds;
        } else if args.iter().any(|a| matches!(*a, "--configure" | "--triggers-only")) {
            figures.configure_s += seconds;
        }
    }
    Ok(figures)
}

/// The chroot every run copies, and what its result is held to.
pub struct Prepared {
    workload: AptWorkload,
    chroot: PathBuf,
    reference: PathBuf,
    ignore: Ignore,
    /// [`CHROOT_LIB`], written in the bench's directory: how the real workloads are entered.
    lib: PathBuf,
    /// What a run of a real workload needs on its filesystem ([`Prepared::space_needed`]).
    space: Option<u64>,
}

impl Prepared {
    /// Prepares the apt-local chroot in `dir` (a directory of the bench's own) from the minbase
    /// `packages`, and the reference from a copy of it. Needs the network for eatmydata.
    pub fn make(engine: &Engine, packages: &[PathBuf], dir: &Path) -> Result<Prepared> {
        let repositories = dir.join("repositories");
        for version in [1, 2] {
            let at = apt_local::repository(&repositories, version);
            apt_local::build(&at, apt_local::DEFAULT_PACKAGES, version)?;
        }
        let chroot = dir.join("chroot");
        fs::create_dir_all(&chroot).map_err(Error::io(&chroot))?;
        let launch = |p: &OsStr| Command::new(p);
        let mut bootstrap = engine.bootstrap_command(&launch, "syncfs", packages, &chroot);
        command::output(installer_env(&mut bootstrap), &chroot)?;
        let mut configure = Command::new("chroot");
        configure.arg(&chroot).args(["dpkg", "--configure", "-a"]);
        command::output(installer_env(&mut configure), &chroot)?;
        install_eatmydata(&chroot, &dir.join("eatmydata"))?;
        install_front_end(engine, &chroot)?;
        apt_local::use_version(&chroot, &repositories, 1)?;
        apt(&chroot, &["update"])?;
        let mut install = vec!["install".to_string(), "-y".to_string()];
        install.extend((0..apt_local::DEFAULT_PACKAGES).map(apt_local::name));
        apt(&chroot, &install.iter().map(String::as_str).collect::<Vec<_>>())?;
        apt_local::use_version(&chroot, &repositories, 2)?;
        apt(&chroot, &["update"])?;
        Prepared::with_reference(AptWorkload::Local, chroot, write_lib(dir)?, dir)
    }

    /// Prepares the chroot of a real `workload` in `dir` from its tarball in `chroots` (a
    /// directory of `fixtures/make-apt-chroot.sh`), and the reference from a copy of it.
    /// Offline: the tarball has every archive.
    pub fn from_tarball(
        engine: &Engine,
        workload: AptWorkload,
        chroots: &Path,
        dir: &Path,
    ) -> Result<Prepared> {
        let tarball = chroots.join(workload.tarball().unwrap_or_default());
        check_tarball(workload, chroots)?;
        fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let lib = write_lib(dir)?;
        let chroot = dir.join("chroot");
        let mut extract = lib_command(&lib, "extract \"$1\" \"$2\"", [&tarball, &chroot]);
        command::output(&mut extract, &chroot)?;
        install_front_end(engine, &chroot)?;
        if workload == AptWorkload::DistUpgrade {
            let sources = "write_sources \"$1\" \"$TRIXIE_SUITES\" \"$TRIXIE_SECURITY\"";
            command::output(&mut lib_command(&lib, sources, [&chroot]), &chroot)?;
        }
        Prepared::with_reference(workload, chroot, lib, dir)
    }

    /// The prepared `chroot` of `workload` (`lib` is [`CHROOT_LIB`] written) and its reference,
    /// made in `dir` by the workload's reference peer in a copy.
    fn with_reference(
        workload: AptWorkload,
        chroot: PathBuf,
        lib: PathBuf,
        dir: &Path,
    ) -> Result<Prepared> {
        let reference = dir.join("reference");
        fs::create_dir(&reference).map_err(Error::io(&reference))?;
        let mut prepared =
            Prepared { workload, chroot, reference, ignore: ignore()?, lib, space: None };
        prepared.copy_to(&prepared.reference).map_err(Error::io(&prepared.reference))?;
        let rss = dir.join("reference.rss");
        let peer = Tool::Peer(workload.reference_peer());
        let launch = |p: &OsStr| Command::new(p);
        let out = prepared
            .run(&launch, &peer, &prepared.reference, &rss)
            .map_err(Error::io(&prepared.reference))?;
        if !out.status.success() {
            return Err(Error::Command {
                path: prepared.reference.clone(),
                command: format!("the reference apt run (the {} peer)", peer.name()),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        if workload.tarball().is_some() {
            let du = Command::new("du").args(["-sxb", "--"]).arg(&prepared.reference).output();
            let text = du.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let bytes = text.ok().and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok());
            prepared.space = bytes.map(|b| b.saturating_mul(2));
        }
        Ok(prepared)
    }

    /// A generous estimate of the space a run of a real workload needs on its filesystem: twice
    /// its reference's tree (the chroot after the run, apt's cache of archives in it); `None`
    /// for apt-local, whose minbase workload has its own estimate.
    pub fn space_needed(&self) -> Option<u64> {
        self.space
    }

    /// The workload this chroot is for.
    pub fn workload(&self) -> AptWorkload {
        self.workload
    }

    /// Copies the prepared chroot into the empty directory `root` (`cp -a`: owners, modes,
    /// links and times as they are).
    pub fn copy_to(&self, root: &Path) -> io::Result<()> {
        let out = Command::new("cp")
            .arg("-a")
            .arg("--")
            .arg(self.chroot.join("."))
            .arg(root)
            .stdin(Stdio::null())
            .output()?;
        if out.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&out.stderr);
        Err(io::Error::other(format!("cp -a of the prepared chroot: {}", said.trim())))
    }

    /// Why `root`, after a run, is not the reference's tree and database (the first few
    /// differences), if it is not.
    pub fn check(&self, root: &Path) -> std::result::Result<(), String> {
        let found = compare::compare(&self.reference, root, &self.ignore)
            .map_err(|e| format!("comparing with the reference: {e}"))?;
        if found.differences.is_empty() {
            return Ok(());
        }
        let first: Vec<String> = found.differences.iter().take(3).map(|d| d.line()).collect();
        Err(format!(
            "the tree or database differs from the reference (the {} peer's run) in {} ways: {}",
            self.workload.reference_peer().name(),
            found.differences.len(),
            first.join("; ")
        ))
    }
}

/// fixtures/apt-workload.ignore's rules and [`IGNORE`]'s.
fn ignore() -> Result<Ignore> {
    let mut ignore = Ignore::default();
    let workloads = include_bytes!("../../../fixtures/apt-workload.ignore");
    for (text, name) in
        [(&workloads[..], "fixtures/apt-workload.ignore"), (IGNORE.as_bytes(), "IGNORE")]
    {
        ignore.add(text, Path::new(name)).map_err(|e| Error::Usage(e.to_string()))?;
    }
    Ok(ignore)
}

/// `apt-get ARGS` in `root` with the real dpkg, for the preparation; fails with apt's message.
fn apt(root: &Path, args: &[&str]) -> Result<String> {
    command::output(installer_env(&mut apt_local::apt_get(root, None, args)), root)
}

/// Downloads eatmydata's packages into `dir` on the host and installs them in `root` with the
/// root's dpkg.
fn install_eatmydata(root: &Path, dir: &Path) -> Result<()> {
    command::require("apt-get", "apt")?;
    fs::create_dir_all(dir).map_err(Error::io(dir))?;
    command::output(Command::new("apt-get").arg("download").args(EATMYDATA).current_dir(dir), dir)?;
    let inside = root.join("tmp/unpack-bench-eatmydata");
    fs::create_dir_all(&inside).map_err(Error::io(&inside))?;
    let mut debs = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if let (Some(name), true) = (path.file_name(), path.extension().is_some_and(|e| e == "deb"))
        {
            fs::copy(&path, inside.join(name)).map_err(Error::io(&path))?;
            debs.push(Path::new("/tmp/unpack-bench-eatmydata").join(name));
        }
    }
    let mut install = Command::new("chroot");
    install.arg(root).args(["dpkg", "-i"]).args(&debs);
    command::output(installer_env(&mut install), root)?;
    fs::remove_dir_all(&inside).map_err(Error::io(&inside))
}

/// Copies `unpack-dpkg` (beside the engine) to [`FRONT_END`] in `root`, and writes [`TIMER`].
fn install_front_end(engine: &Engine, root: &Path) -> Result<()> {
    let front_end = engine.path().with_file_name("unpack-dpkg");
    for (inside, from) in [(FRONT_END, Some(&front_end)), (TIMER, None)] {
        let at = root.join(inside.trim_start_matches('/'));
        let parent = at.parent().unwrap_or(root);
        fs::create_dir_all(parent).map_err(Error::io(parent))?;
        match from {
            Some(from) => fs::copy(from, &at).map(drop).map_err(Error::io(from))?,
            None => fs::write(&at, TIMER_SCRIPT).map_err(Error::io(&at))?,
        }
        fs::set_permissions(&at, fs::Permissions::from_mode(0o755)).map_err(Error::io(&at))?;
    }
    Ok(())
}

impl Prepared {
    /// The measured command of `tool` in the prepared copy `root`: GNU time (its `%M` into
    /// `rss`) over the workload's apt run entered as the workload is (`chroot ROOT`, or
    /// `in_root --offline ROOT` of `fixtures/apt-chroot-lib.sh`), `[eatmydata] apt-get` with
    /// the timer as apt's dpkg and the tool's dpkg, I/O mode and strategy; the first program
    /// started by `launch`.
    pub fn command(
        &self,
        launch: &dyn Fn(&OsStr) -> Command,
        tool: &Tool,
        root: &Path,
        rss: &Path,
    ) -> io::Result<Command> {
        let (dpkg, io_mode, under): (&str, &str, &[&str]) = match tool {
            Tool::Strategy(_) => (FRONT_END, "--refuse-unsafe-io", &[]),
            Tool::Peer(Peer::Eatmydata) => (REAL_DPKG, "--refuse-unsafe-io", &["eatmydata"]),
            Tool::Peer(peer @ (Peer::Dpkg | Peer::DpkgUnsafe)) => {
                (REAL_DPKG, peer.io_mode().first().copied().unwrap_or_default(), &[])
            }
            Tool::Peer(peer) => {
                return Err(io::Error::other(format!("the {} peer does not run apt", peer.name())))
            }
        };
        let option = format!("DPkg::Options::={io_mode}");
        let mut args = vec!["-o".to_string(), option];
        args.extend(self.workload.apt_args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let words = apt_local::apt_get_words(Some(TIMER), &args);
        let mut env = vec![("UNPACK_BENCH_DPKG", dpkg)];
        if let Tool::Strategy(strategy) = tool {
            env.push(("UNPACK_DPKG_STRATEGY", strategy));
        }
        let mut cmd = launch("time".as_ref());
        cmd.args(["-f", "%M", "-o"]).arg(rss);
        if self.workload.tarball().is_none() {
            cmd.arg("chroot").arg(root).args(under).args(words);
            installer_env(&mut cmd).envs(env);
            return Ok(cmd);
        }
        // in_root gives the command a clean environment but for its `--env=` words.
        cmd.args(["bash", "-c", "source \"$0\" && in_root --offline \"$@\""]).arg(&self.lib);
        cmd.arg(root).args(under).args(words);
        cmd.args(env.iter().map(|(name, value)| format!("--env={name}={value}")));
        cmd.stdin(Stdio::null());
        Ok(cmd)
    }

    /// Runs [`Prepared::command`] and waits for it.
    pub fn run(
        &self,
        launch: &dyn Fn(&OsStr) -> Command,
        tool: &Tool,
        root: &Path,
        rss: &Path,
    ) -> io::Result<Output> {
        self.command(launch, tool, root, rss)?.output()
    }
}

/// Writes [`CHROOT_LIB`] into `dir`; its path.
fn write_lib(dir: &Path) -> Result<PathBuf> {
    let lib = dir.join("apt-chroot-lib.sh");
    fs::write(&lib, CHROOT_LIB).map_err(Error::io(&lib))?;
    Ok(lib)
}

/// `bash -c 'source LIB && SCRIPT' LIB ARGS...`: a function of the chroot library.
fn lib_command<const N: usize>(lib: &Path, script: &str, args: [&Path; N]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &format!("set -euo pipefail; source \"$0\" && {script}")]).arg(lib).args(args);
    cmd.stdin(Stdio::null());
    cmd
}

/// That `chroots` holds the tarball of the real `workload`, or an error naming it and the
/// command that makes it.
pub fn check_tarball(workload: AptWorkload, chroots: &Path) -> Result<()> {
    let Some(name) = workload.tarball() else { return Ok(()) };
    let tarball = chroots.join(name);
    if tarball.is_file() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: no such tarball; `sudo fixtures/make-apt-chroot.sh {}` makes it (about 0.8 GB of downloads, once)",
        tarball.display(),
        chroots.display()
    )))
}

/// What preparing and running `workload` needs on the host besides the minbase's own: GNU
/// time, chroot and cp; apt-get (to download eatmydata) and dpkg-dev (the repositories' index)
/// for apt-local; bash, tar and unshare for the real workloads.
pub fn require(workload: AptWorkload) -> Result<()> {
    let common = [("time", "time"), ("chroot", "coreutils"), ("cp", "coreutils")];
    let own: &[(&str, &str)] = match workload {
        AptWorkload::Local => &[("apt-get", "apt"), ("dpkg-scanpackages", "dpkg-dev")],
        AptWorkload::Install | AptWorkload::DistUpgrade => {
            &[("bash", "bash"), ("tar", "tar"), ("unshare", "util-linux")]
        }
    };
    for (tool, package) in common.iter().chain(own) {
        command::require(tool, package)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(workload: AptWorkload, chroot: PathBuf, reference: PathBuf) -> Prepared {
        let (ignore, lib) = (ignore().unwrap(), PathBuf::from("/lib.sh"));
        Prepared { workload, chroot, reference, ignore, lib, space: None }
    }

    /// The real workloads enter their chroot through the fixtures' library, offline, with
    /// their environment as `--env=` words, and ask apt for their own run.
    #[test]
    fn the_real_workloads_run_offline_through_the_chroot_library_with_their_own_apt_words() {
        let launch = |p: &OsStr| Command::new(p);
        let (root, rss) = (Path::new("/r"), Path::new("/rss"));
        let install = prepared(AptWorkload::Install, "/c".into(), "/ref".into());
        let ours = format!(
            "{:?}",
            install.command(&launch, &Tool::Strategy("fsync".into()), root, rss).unwrap()
        );
        for word in [
            "in_root --offline",
            "\"/lib.sh\" \"/r\" \"apt-get\"",
            "\"install\" \"-y\" \"python3\" \"perl\" \"vim\" \"git\" \"build-essential\"",
            "\"--env=UNPACK_DPKG_STRATEGY=fsync\"",
            "--env=UNPACK_BENCH_DPKG=/usr/local/bin/unpack-dpkg",
        ] {
            assert!(ours.contains(word), "{word} not in {ours}");
        }
        let upgrade = prepared(AptWorkload::DistUpgrade, "/c".into(), "/ref".into());
        let eat = format!(
            "{:?}",
            upgrade.command(&launch, &Tool::Peer(Peer::Eatmydata), root, rss).unwrap()
        );
        assert!(
            eat.contains("\"/r\" \"eatmydata\" \"apt-get\"")
                && eat.contains("\"dist-upgrade\" \"-y\""),
            "{eat}"
        );
        assert_eq!(AptWorkload::of(Scenario::DistUpgrade), Some(AptWorkload::DistUpgrade));
        assert_eq!(AptWorkload::of(Scenario::Minbase), None);
    }

    #[test]
    fn a_missing_tarball_is_refused_naming_it_and_the_command_that_makes_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_tarball(AptWorkload::DistUpgrade, dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("bookworm-devel.tar") && err.contains("fixtures/make-apt-chroot.sh"),
            "{err}"
        );
        check_tarball(AptWorkload::Local, dir.path()).unwrap();
        fs::write(dir.path().join("bookworm.tar"), "").unwrap();
        check_tarball(AptWorkload::Install, dir.path()).unwrap();
    }

    #[test]
    fn calls_are_summed_by_kind() {
        let log = "10.0 10.5 --assert-multi-arch\n\
                   11.0 13.0 --status-fd 10 --no-triggers --unpack --auto-deconfigure /a.deb\n\
                   13.0 14.25 --status-fd 10 --configure --pending\n\
                   14.25 14.5 --status-fd 10 --triggers-only -a\n";
        let f = parse_calls(log).unwrap();
        assert_eq!((f.dpkg_calls, f.unpack_s, f.configure_s), (4, 2.0, 1.5));
    }

    #[test]
    fn a_strategy_run_passes_only_if_every_front_end_call_ran_that_strategy() {
        let log = "2026-12-06 06:00:00 startup archives unpack\n\
                   2026-12-06 06:00:00 unpack-dpkg strategy syncfs (UNPACK_DPKG_STRATEGY)\n";
        let syncfs = Tool::Strategy("syncfs".into());
        check_strategy(&syncfs, log).unwrap();
        let err = check_strategy(&Tool::Strategy("fsync".into()), log).unwrap_err();
        assert!(err.contains("strategy syncfs (UNPACK_DPKG_STRATEGY), not fsync"), "{err}");
        let unsafe_io =
            format!("{log}2026-12-06 06:00:01 unpack-dpkg strategy none (--force-unsafe-io)\n");
        assert!(check_strategy(&syncfs, &unsafe_io)
            .unwrap_err()
            .contains("none (--force-unsafe-io)"));
        assert!(check_strategy(&syncfs, "").unwrap_err().contains("no call of unpack-dpkg"));
        check_strategy(&Tool::Peer(Peer::Dpkg), "").unwrap();
    }

    #[test]
    fn a_line_without_its_times_is_an_error_naming_it() {
        let err = parse_calls("10.0 11.0 --configure\nboom\n").unwrap_err();
        assert!(err.contains("line 2") && err.contains("boom"), "{err}");
    }

    #[test]
    fn every_peer_apt_can_drive_gets_an_explicit_io_mode_and_the_others_are_refused() {
        let launch = |p: &OsStr| Command::new(p);
        let (root, rss) = (Path::new("/r"), Path::new("/rss"));
        let prepared = prepared(AptWorkload::Local, PathBuf::from("/c"), PathBuf::from("/ref"));
        let command = |tool: &Tool| prepared.command(&launch, tool, root, rss);
        let line = |tool: Tool| format!("{:?}", command(&tool).unwrap());
        let safe = line(Tool::Peer(Peer::Dpkg));
        assert!(
            safe.contains("DPkg::Options::=--refuse-unsafe-io") && safe.contains(TIMER),
            "{safe}"
        );
        assert!(line(Tool::Peer(Peer::DpkgUnsafe)).contains("DPkg::Options::=--force-unsafe-io"));
        let eat = line(Tool::Peer(Peer::Eatmydata));
        assert!(eat.contains("\"/r\" \"eatmydata\" \"apt-get\""), "{eat}");
        let ours = line(Tool::Strategy("fsync".into()));
        assert!(
            ours.contains("UNPACK_DPKG_STRATEGY=\"fsync\"") && ours.contains(FRONT_END),
            "{ours}"
        );
        assert!(command(&Tool::Peer(Peer::Tar)).is_err());
        assert!(runs(&Tool::Peer(Peer::Eatmydata)) && !runs(&Tool::Peer(Peer::TarSync)));
    }

    /// The check a run's root passes: the reference's tree and database, but for logs and the
    /// engine's state; a file of the set that differs fails it, named.
    #[test]
    fn a_root_that_differs_from_the_reference_beyond_the_ignored_files_fails_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (reference, root) = (dir.path().join("reference"), dir.path().join("root"));
        for (top, log, data) in [(&reference, "one\n", "2.0\n"), (&root, "two\n", "2.0\n")] {
            for (path, text) in [
                ("var/log/unpack-bench-dpkg.log", log),
                ("var/lib/unpack/txn.tmp", log),
                ("usr/share/al-00/data-1", data),
            ] {
                let at = top.join(path);
                fs::create_dir_all(at.parent().unwrap()).unwrap();
                fs::write(&at, text).unwrap();
            }
        }
        let prepared = prepared(AptWorkload::Local, reference.clone(), reference);
        prepared.check(&root).unwrap();
        fs::write(root.join("usr/share/al-00/data-1"), "1.0\n").unwrap();
        let err = prepared.check(&root).unwrap_err();
        assert!(err.contains("in 1 ways") && err.contains("usr/share/al-00/data-1"), "{err}");
    }

    #[test]
    fn the_ignore_rules_leave_out_logs_and_the_engine_state_and_nothing_else() {
        use compare::difference::Difference;
        let ignore = ignore().unwrap();
        let d = |subject: &str| Difference::new(subject.into(), "content", "a".into(), "b".into());
        assert!(ignore.covers(&d("var/log/unpack-bench-dpkg.log")));
        assert!(ignore.covers(&d("var/lib/unpack/lock")));
        assert!(!ignore.covers(&d("usr/share/al-00/data-1")));
    }
}
