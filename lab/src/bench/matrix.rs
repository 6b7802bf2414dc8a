//! From a configuration to a finished matrix: check what is asked for, prepare the workloads,
//! run every row's schedule with a progress bar, and summarize each cell.
//!
//! Why checks come first: a matrix runs for a long time, so everything that can be known to
//! fail (not root, unknown strategy, a missing mkfs or peer) fails before the first run, with
//! the fix in the message. Once runs start, a failing run is data, not an error; a signal
//! (Ctrl-C reaches the unpacker too, which then fails its run) stops the matrix between runs,
//! once the last run's filesystem is down. This module
//! never measures anything itself ([`super::run`] does) and never formats output.

use super::apt_scenario::{self, AptWorkload, Prepared};
use super::cache::Cache;
use super::counts::{Count, Counts, Launcher, Source};
use super::device::Device;
use super::engine::Engine;
use super::environment::Environment;
use super::minbase;
use super::nfs::{self, Backing, Export, NfsRow, RpcCounts};
use super::package::Package;
use super::peers::Peer;
use super::plan::{default_option_sets, FsRows, Plan, Row, Tool, Workload, COUNTING_RUNS};
use super::run::{run_once, Context, RunRecord, Site};
use super::scenario::{make_old_version, Scenario};
use super::stats::Spread;
use super::synthetic;
use super::{command, Error, Result};
use crate::scratchfs;
use crate::workdir::Workdir;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;
use unpack::{durability, fs::mountinfo};

/// What the user asked for.
pub struct Config {
    /// Packages unpacked together in every run (may be empty when `synthetic` is not).
    pub packages: Vec<PathBuf>,
    /// Generated packages, each benched on its own.
    pub synthetic: Vec<synthetic::Spec>,
    pub filesystems: Vec<String>,
    /// Mount option sets; empty means each filesystem's defaults ([`default_option_sets`]).
    pub option_sets: Vec<String>,
    /// Our strategies; `None` means every strategy the engine lists.
    pub strategies: Option<Vec<String>>,
    /// Peers; `None` means the installed ones.
    pub peers: Option<Vec<Peer>>,
    pub caches: Vec<Cache>,
    pub scenarios: Vec<Scenario>,
    /// Counted runs per cell.
    pub runs: u64,
    /// Bench this directory's filesystem instead of fresh ones.
    pub dir: Option<PathBuf>,
    /// Where fresh filesystems live.
    pub device: Box<dyn Device>,
    /// Also make the counting runs of every cell (`--counts`).
    pub counts: bool,
    /// The filesystem under NFS rows (`--fs nfs`).
    pub nfs_backing: Backing,
    /// The NFS server's export modes, one table each.
    pub nfs_exports: Vec<Export>,
}

/// A column of the tables.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    pub kind: &'static str,
}

/// The runs of one tool on one row, and their summary.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub tool: String,
    /// `strategy` or `peer`.
    pub kind: &'static str,
    /// Runs that failed; a cell with any is shown as failed, never as a time.
    pub failed: usize,
    /// Until the unpacker exited, over the successful runs.
    pub exit: Option<Spread>,
    /// Until the data was stable, over the successful runs.
    pub stable: Option<Spread>,
    /// Until the configured system was stable (the minbase scenario), over the successful runs.
    pub configured: Option<Spread>,
    /// Median device flushes per successful run until it exited and until the data was
    /// stable, when the device counts: the numbers that explain the times.
    pub device_flushes_at_exit: Option<u64>,
    pub device_flushes: Option<u64>,
    /// Median MiB/s of the busy scenarios' background writer while the unpacker ran.
    pub writer_mib_s: Option<f64>,
    /// Median over the runs of the p99 latency of all our engine's flush calls in a run.
    pub flush_p99_s: Option<f64>,
    /// NFS rows: the median per operation of the client's RPCs per successful run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs: Option<RpcCounts>,
    /// The apt-local scenario: the median shares of the time until apt exited spent in dpkg's
    /// unpack calls and in its configure calls, and the median peak RSS of a run's processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpack_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configure_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    pub runs: Vec<RunRecord>,
    /// The counting runs' instructions and system calls (`--counts`), apart from the timed
    /// runs above.
    pub counts: Option<Counts>,
}

impl Cell {
    fn new(tool: &Tool, runs: Vec<RunRecord>) -> Cell {
        let ok: Vec<&RunRecord> = runs.iter().filter(|r| r.ok).collect();
        let times =
            |f: fn(&RunRecord) -> Option<f64>| ok.iter().filter_map(|r| f(r)).collect::<Vec<f64>>();
        Cell {
            tool: tool.name().to_string(),
            kind: tool.kind(),
            failed: runs.len() - ok.len(),
            exit: Spread::of(&times(|r| r.exit_s)),
            stable: Spread::of(&times(|r| r.stable_s)),
            configured: Spread::of(&times(|r| r.configured_s)),
            device_flushes_at_exit: median_u64(
                ok.iter().filter_map(|r| r.device_at_exit.map(|d| d.flushes)).collect(),
            ),
            device_flushes: median_u64(
                ok.iter().filter_map(|r| r.device.map(|d| d.flushes)).collect(),
            ),
            writer_mib_s: median_f64(ok.iter().filter_map(|r| r.writer.map(|w| w.mib_s)).collect()),
            flush_p99_s: median_f64(
                ok.iter().filter_map(|r| r.engine.as_ref()?.flush_latency.all.p99_s).collect(),
            ),
            rpcs: median_rpcs(&ok.iter().filter_map(|r| r.rpcs.as_ref()).collect::<Vec<_>>()),
            unpack_share: median_f64(share(&ok, |a| a.unpack_s)),
            configure_share: median_f64(share(&ok, |a| a.configure_s)),
            peak_rss_bytes: median_u64(
                ok.iter().filter_map(|r| r.apt.map(|a| a.peak_rss_bytes)).collect(),
            ),
            runs,
            counts: None,
        }
    }

    /// True when no run failed and there is a time to show.
    pub fn is_clean(&self) -> bool {
        self.failed == 0 && self.exit.is_some()
    }
}

/// Per run with apt figures: the seconds `part` picks over the seconds until apt exited.
fn share(runs: &[&RunRecord], part: fn(&apt_scenario::AptFigures) -> f64) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| Some(part(r.apt.as_ref()?) / r.exit_s.filter(|s| *s > 0.0)?))
        .collect()
}

fn median_f64(values: Vec<f64>) -> Option<f64> {
    Spread::of(&values).map(|s| s.median)
}

fn median_u64(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

/// The median per operation over `runs` (an operation a run did not send counts 0 there).
fn median_rpcs(runs: &[&RpcCounts]) -> Option<RpcCounts> {
    let ops: std::collections::BTreeSet<&String> = runs.iter().flat_map(|r| r.0.keys()).collect();
    let medians = ops
        .into_iter()
        .filter_map(|op| Some((op.clone(), median_u64(runs.iter().map(|r| r.get(op)).collect())?)));
    (!runs.is_empty()).then(|| RpcCounts(medians.filter(|&(_, n)| n > 0).collect()))
}

/// One row's cells, in column order.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub workload: String,
    #[serde(flatten)]
    pub row: Row,
    /// The options mountinfo read back after mounting (from the row's first run that got that
    /// far), so a silently ignored option shows.
    pub applied_options: Option<String>,
    pub cells: Vec<Cell>,
}

/// A finished matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    pub environment: Environment,
    pub runs_per_cell: u64,
    pub columns: Vec<Column>,
    pub rows: Vec<RowResult>,
}

impl Matrix {
    /// Counted runs that failed, counting runs included, over the whole matrix: a matrix with
    /// any is incomplete (`unpack-bench` exits 3).
    pub fn failed_runs(&self) -> usize {
        self.rows
            .iter()
            .flat_map(|r| &r.cells)
            .map(|c| c.failed + c.counts.as_ref().map_or(0, |k| k.errors.len()))
            .sum()
    }

    /// The cells with a failed run, each as `WORKLOAD on FS, SCENARIO, -o OPTIONS CACHE: TOOL`
    /// (see `cell_label`).
    pub fn failed_cells(&self) -> Vec<String> {
        self.rows
            .iter()
            .flat_map(|r| {
                r.cells
                    .iter()
                    .filter(|c| {
                        c.failed > 0 || c.counts.as_ref().is_some_and(|k| !k.errors.is_empty())
                    })
                    .map(move |c| (r, c))
            })
            .map(|(r, c)| cell_label(&r.workload, &r.row, &c.tool))
            .collect()
    }
}

/// A cell in words, as the progress bar and the list of failed cells name it.
fn cell_label(workload: &str, row: &Row, tool: &str) -> String {
    let (fs, scenario, options, cache) =
        (&row.filesystem_label(), row.scenario.name(), &row.mount_options, row.cache.name());
    format!("{workload} on {fs}, {scenario}, -o {options} {cache}: {tool}")
}

/// Runs the whole matrix.
pub fn run_matrix(config: Config) -> Result<Matrix> {
    super::scenario::refuse_crash_only(&config.scenarios)?;
    let is_root = rustix::process::geteuid().is_root();
    if config.dir.is_none() && !is_root {
        return Err(Error::NeedsRoot(
            "unpack-bench needs root: it makes filesystems on loop devices. Run it as root, or \
             bench an existing directory's filesystem with --dir DIR"
                .to_string(),
        ));
    }
    if config.scenarios.contains(&Scenario::BusyElsewhere) && !is_root {
        return Err(Error::NeedsRoot("--scenario busy-elsewhere needs root: it makes the writer's filesystem on a loop device".to_string()));
    }
    if config.caches.contains(&Cache::Cold) && !is_root {
        return Err(Error::NeedsRoot(
            "--cache cold needs root: it drops the page cache".to_string(),
        ));
    }
    if config.packages.is_empty() && config.synthetic.is_empty() {
        return Err(Error::Usage(
            "nothing to unpack: give a PACKAGE or --synthetic N:SIZE".to_string(),
        ));
    }
    if config.runs == 0 {
        return Err(Error::Usage("--runs must be at least 1".to_string()));
    }
    if let Some(scenario) = config.scenarios.iter().find(|s| s.installs_a_system()) {
        check_minbase(&config, *scenario)?;
    }
    check_apt_chroots(&config)?;
    if let Some(scenario) = config.scenarios.iter().find(|s| config.counts && s.runs_apt()) {
        return Err(Error::Usage(format!(
            "--counts: not with --scenario {} (its counts would be per entry of the workload, which apt does not unpack)",
            scenario.name()
        )));
    }
    let engine = Engine::find()?;
    let tools = choose_tools(&config)?;
    let counts = if config.counts { Some(Source::detect()?) } else { None };
    let filesystems = choose_filesystems(&config)?;
    let nfs_rows = filesystems.iter().any(|f| f.nfs.is_some());
    if nfs_rows && !nfs::kernel_has_nfs() {
        return Err(Error::Usage(
            "this kernel has no NFS client and server (/proc/filesystems lists no nfs and nfsd): load the nfs and \
             nfsd modules, or let unpack-bench run the NFS rows in a user-mode-linux guest"
                .to_string(),
        ));
    }

    let temp = std::env::temp_dir();
    let workdir = Workdir::new(&temp, "unpack-bench").map_err(Error::io(&temp))?;
    let workloads = prepare_workloads(&config, workdir.path())?;
    let apt = prepare_apt(&config, &engine, &workloads, workdir.path())?;
    let rows = Plan::rows_for(workloads.len(), &filesystems, &config.scenarios, &config.caches);
    let plan = Plan { workloads, rows, tools, runs: config.runs, counts };

    let (site, host, device) = match &config.dir {
        Some(dir) => (Site::Dir(dir.clone()), dir.clone(), format!("--dir {}", dir.display())),
        None => (
            Site::Device(config.device.as_ref()),
            workdir.path().to_path_buf(),
            config.device.describe(),
        ),
    };
    let mut environment = Environment::read(device, &host, engine.path(), &plan.workloads);
    // The server lives as long as the matrix; every run exports its own fresh filesystem.
    let server = if nfs_rows {
        environment.nfs = Some(nfs::describe(&config.option_sets_or(nfs::DEFAULT_CLIENT_SETS)));
        Some(nfs::Server::start()?)
    } else {
        None
    };
    let ctx = Context {
        engine: &engine,
        site,
        scratch: workdir.path(),
        writer_device: config.device.as_ref(),
        nfs_server: server.as_ref(),
        launcher: None,
        apt: &apt,
    };
    let rows = run_plan(&ctx, &plan)?;
    Ok(Matrix {
        environment,
        runs_per_cell: plan.runs,
        columns: plan
            .tools
            .iter()
            .map(|t| Column { name: t.name().to_string(), kind: t.kind() })
            .collect(),
        rows,
    })
}

/// Which tools a scenario runs.
type ToolFilter = fn(&Tool) -> bool;

/// Our strategies (by their names or aliases, shown by name), then the peers (checked
/// installed).
fn choose_tools(config: &Config) -> Result<Vec<Tool>> {
    let strategies = config
        .strategies
        .clone()
        .unwrap_or_else(|| durability::names().into_iter().map(String::from).collect());
    let mut tools: Vec<Tool> = Vec::new();
    for s in strategies {
        let info = durability::info(&s).ok_or_else(|| {
            Error::Usage(format!(
                "unknown strategy '{s}' (known: {})",
                durability::names().join(", ")
            ))
        })?;
        tools.push(Tool::Strategy(info.name.to_string()));
    }
    // The apt scenarios' peers run in their chroot, which has their programs: the host needs none.
    let in_chroot = config.scenarios.iter().all(|s| s.runs_apt());
    let peers = match &config.peers {
        Some(peers) => {
            for peer in peers.iter().filter(|_| !in_chroot) {
                peer.require()?;
            }
            peers.clone()
        }
        None if in_chroot => Peer::ALL.to_vec(),
        None => Peer::ALL.into_iter().filter(|p| p.is_installed()).collect(),
    };
    let mut peers: Vec<Tool> = peers.into_iter().map(Tool::Peer).collect();
    let apt_why = "is not a dpkg apt can drive (dpkg, dpkg-unsafe and eatmydata are)";
    let limits: [(Scenario, ToolFilter, &str); 4] = [
        (Scenario::Minbase, minbase::runs, "does not install a system (dpkg and dpkg-unsafe do)"),
        (Scenario::AptLocal, apt_scenario::runs, apt_why),
        (Scenario::AptInstall, apt_scenario::runs, apt_why),
        (Scenario::DistUpgrade, apt_scenario::runs, apt_why),
    ];
    for (scenario, runs, why) in limits {
        if !config.scenarios.contains(&scenario) {
            continue;
        }
        if let (Some(_), Some(other)) = (&config.peers, peers.iter().find(|p| !runs(p))) {
            let (scenario, peer) = (scenario.name(), other.name());
            return Err(Error::Usage(format!("--scenario {scenario}: the {peer} peer {why}")));
        }
        peers.retain(runs);
    }
    tools.extend(peers);
    let mut unique: Vec<Tool> = Vec::new();
    for tool in tools {
        if !unique.contains(&tool) {
            unique.push(tool);
        }
    }
    if unique.is_empty() {
        return Err(Error::Usage("no strategy and no peer to bench".to_string()));
    }
    Ok(unique)
}

/// What the minbase and apt-local scenarios need, known before any run: one directory of
/// `fixtures/fetch-minbase.sh` as the workload (read again, and checked, by
/// [`prepare_workloads`]), no synthetic package, and chroot; apt-local's tools besides.
fn check_minbase(config: &Config, scenario: Scenario) -> Result<()> {
    let name = scenario.name();
    if !config.synthetic.is_empty() {
        return Err(Error::Usage(format!("--scenario {name} installs the system of a fetch-minbase.sh directory, not a --synthetic package")));
    }
    if !matches!(config.packages.as_slice(), [dir] if dir.is_dir()) {
        return Err(Error::Usage(format!(
            "--scenario {name} needs one PACKAGE argument: the directory fixtures/fetch-minbase.sh DIR made"
        )));
    }
    if config.scenarios.contains(&Scenario::AptLocal) {
        apt_scenario::require(AptWorkload::Local)?;
    }
    command::require("chroot", "coreutils").map(drop)
}

/// The real apt workloads benched (apt-install, dist-upgrade).
fn real_apt_workloads(config: &Config) -> Vec<AptWorkload> {
    let workloads = config.scenarios.iter().filter_map(|s| AptWorkload::of(*s));
    workloads.filter(|w| w.tarball().is_some()).collect()
}

/// What the real apt scenarios need, known before any run: one PACKAGE argument, the directory
/// of `fixtures/make-apt-chroot.sh` with their tarballs, no other scenario (whose workload that
/// directory is not), no synthetic package, and their tools.
fn check_apt_chroots(config: &Config) -> Result<()> {
    let real = real_apt_workloads(config);
    if real.is_empty() {
        return Ok(());
    }
    let names = "--scenario apt-install and dist-upgrade";
    if let Some(other) =
        config.scenarios.iter().find(|s| !s.runs_apt() || *s == &Scenario::AptLocal)
    {
        return Err(Error::Usage(format!(
            "{names} take the tarballs' directory as their DIR: bench them apart from {}",
            other.name()
        )));
    }
    let [chroots] = config.packages.as_slice() else {
        return Err(Error::Usage(format!(
            "{names} need one PACKAGE argument: the directory of fixtures/make-apt-chroot.sh's tarballs"
        )));
    };
    if !config.synthetic.is_empty() {
        return Err(Error::Usage(format!("{names} run apt, not a --synthetic package")));
    }
    for workload in real {
        apt_scenario::check_tarball(workload, chroots)?;
        apt_scenario::require(workload)?;
    }
    Ok(())
}

/// The apt scenarios' chroots, one per apt scenario benched: apt-local's from the minbase
/// workload (the first: [`check_minbase`] made it the only one), the real workloads' from
/// their tarballs in the PACKAGE directory ([`check_apt_chroots`]), each under the progress of
/// a line on stderr: they take minutes.
fn prepare_apt(
    config: &Config,
    engine: &Engine,
    workloads: &[Workload],
    scratch: &std::path::Path,
) -> Result<Vec<Prepared>> {
    let mut prepared = Vec::new();
    for scenario in config.scenarios.iter().filter(|s| s.runs_apt()) {
        let Some(workload) = AptWorkload::of(*scenario) else { continue };
        let name = scenario.name();
        unpack::stderr!(
            "unpack-bench: preparing the {name} chroot and its reference run (untimed)"
        );
        let dir = scratch.join(name);
        prepared.push(match config.packages.first() {
            Some(chroots) if workload.tarball().is_some() => {
                Prepared::from_tarball(engine, workload, chroots, &dir)?
            }
            _ => {
                let packages = workloads.first().map(Workload::package_paths).unwrap_or_default();
                Prepared::make(engine, &packages, &dir)?
            }
        });
    }
    Ok(prepared)
}

impl Config {
    /// The `-o` sets, or `defaults` when none are given.
    fn option_sets_or(&self, defaults: &[&str]) -> Vec<String> {
        if self.option_sets.is_empty() {
            defaults.iter().map(|s| s.to_string()).collect()
        } else {
            self.option_sets.clone()
        }
    }
}

/// Each filesystem with its option sets; for `--dir`, the directory's filesystem as mounted;
/// for `--fs nfs`, the backing filesystem itself, then one NFS table per export mode.
fn choose_filesystems(config: &Config) -> Result<Vec<FsRows>> {
    if let Some(dir) = &config.dir {
        if !dir.is_dir() {
            return Err(Error::Usage(format!("--dir {}: not a directory", dir.display())));
        }
        let info = mountinfo::for_path(dir).map_err(Error::io(dir))?;
        return Ok(vec![FsRows {
            filesystem: info.fstype,
            option_sets: vec!["as mounted".to_string()],
            nfs: None,
        }]);
    }
    command::require("losetup", "mount")?;
    command::require("mount", "mount")?;
    if config.filesystems.iter().any(|f| f == nfs::FS_NAME) {
        if config.filesystems.len() > 1 {
            return Err(Error::Usage(
                "--fs nfs benches alone (its -o sets are the NFS client's; it benches its backing filesystem \
                 itself, see --nfs-backing)"
                    .to_string(),
            ));
        }
        let backing = &config.nfs_backing;
        if !scratchfs::FILESYSTEMS.contains(&backing.filesystem.as_str()) {
            let known = scratchfs::FILESYSTEMS.join(", ");
            return Err(Error::Usage(format!(
                "--nfs-backing: unknown filesystem '{}' (known: {known})",
                backing.filesystem
            )));
        }
        command::require(
            &format!("mkfs.{}", backing.filesystem),
            scratchfs::mkfs_package(&backing.filesystem),
        )?;
        let plain = FsRows {
            filesystem: backing.filesystem.clone(),
            option_sets: vec![backing.options.clone()],
            nfs: None,
        };
        let exports = config.nfs_exports.iter().map(|&export| FsRows {
            filesystem: nfs::FS_NAME.to_string(),
            option_sets: config.option_sets_or(nfs::DEFAULT_CLIENT_SETS),
            nfs: Some(NfsRow { backing: backing.clone(), export }),
        });
        return Ok(std::iter::once(plain).chain(exports).collect());
    }
    let mut out = Vec::new();
    for fs in &config.filesystems {
        if !scratchfs::FILESYSTEMS.contains(&fs.as_str()) {
            return Err(Error::Usage(format!(
                "unknown filesystem '{fs}' (known: {}, {})",
                scratchfs::FILESYSTEMS.join(", "),
                nfs::FS_NAME
            )));
        }
        command::require(&format!("mkfs.{fs}"), scratchfs::mkfs_package(fs))?;
        let sets = if config.option_sets.is_empty() {
            default_option_sets(fs)
        } else {
            config.option_sets.clone()
        };
        out.push(FsRows { filesystem: fs.clone(), option_sets: sets, nfs: None });
    }
    Ok(out)
}

/// The command-line packages as one workload (a directory of `fixtures/fetch-minbase.sh`
/// stands for its packages, with its first stage), then one workload per synthetic package;
/// with their rewritten old versions when the upgrade scenario is benched.
fn prepare_workloads(config: &Config, scratch: &std::path::Path) -> Result<Vec<Workload>> {
    let mut workloads = Vec::new();
    if let (false, Some(chroots)) = (real_apt_workloads(config).is_empty(), config.packages.first())
    {
        // The real apt workloads' runs unpack what apt chooses from the chroot's archives.
        workloads.push(Workload {
            label: format!("{} (fixtures/make-apt-chroot.sh)", chroots.display()),
            synthetic_files: None,
            packages: Vec::new(),
            old_packages: Vec::new(),
            first_stage: Vec::new(),
        });
    } else if !config.packages.is_empty() {
        let (paths, first_stage, dir) = match config.packages.as_slice() {
            [dir] if dir.is_dir() => {
                let set = minbase::read_set(dir)?;
                (
                    set.packages,
                    set.first_stage,
                    dir.file_name().map(|n| n.to_string_lossy().into_owned()),
                )
            }
            paths => {
                if let Some(dir) = paths.iter().find(|p| p.is_dir()) {
                    return Err(Error::Usage(format!(
                        "{}: a directory must be the only PACKAGE argument",
                        dir.display()
                    )));
                }
                (paths.to_vec(), Vec::new(), None)
            }
        };
        let packages = paths.iter().map(|p| Package::inspect(p)).collect::<Result<Vec<_>>>()?;
        let names: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
        let label = match dir {
            Some(dir) => format!("{dir} ({} packages)", names.len()),
            None if names.len() <= 3 => names.join("+"),
            None => format!("{}+{} more", names[0], names.len() - 1),
        };
        workloads.push(Workload {
            label,
            synthetic_files: None,
            packages,
            old_packages: Vec::new(),
            first_stage,
        });
    }
    for spec in &config.synthetic {
        let deb = spec.generate(scratch)?;
        workloads.push(Workload {
            label: format!("synthetic {spec}"),
            synthetic_files: Some(spec.files),
            packages: vec![Package::inspect(&deb)?],
            old_packages: Vec::new(),
            first_stage: Vec::new(),
        });
    }
    if config.scenarios.iter().any(|s| matches!(s, Scenario::Upgrade | Scenario::UpgradeDb)) {
        for workload in &mut workloads {
            workload.old_packages = workload
                .packages
                .iter()
                .map(|p| make_old_version(&p.path, scratch))
                .collect::<Result<_>>()?;
        }
    }
    Ok(workloads)
}

/// Every row's schedule, under a progress bar on stderr.
fn run_plan(ctx: &Context, plan: &Plan) -> Result<Vec<RowResult>> {
    let bar = ProgressBar::new(plan.total_runs()).with_style(
        ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:30} {pos}/{len} runs, about {eta} left\n{wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let entries = match plan.counts {
        Some(_) => plan.workloads.iter().map(entries).collect::<Result<Vec<u64>>>()?,
        None => Vec::new(),
    };
    let mut results = Vec::with_capacity(plan.rows.len());
    for row in &plan.rows {
        let workload = &plan.workloads[row.workload];
        let mut runs: Vec<Vec<RunRecord>> = vec![Vec::new(); plan.tools.len()];
        for step in plan.schedule() {
            let tool = &plan.tools[step.tool];
            let round = if step.is_warm_up() {
                "warm-up".to_string()
            } else {
                format!("run {}/{}", step.round, plan.runs)
            };
            bar.set_message(format!("{} {round}", cell_label(&workload.label, row, tool.name())));
            stop_if_signalled(&bar)?;
            let record = run_once(ctx, workload, row, tool, step.round)?;
            if !step.is_warm_up() {
                runs[step.tool].push(record);
            }
            bar.inc(1);
        }
        let applied_options = runs.iter().flatten().find_map(|r| r.applied_options.clone());
        results.push(RowResult {
            workload: workload.label.clone(),
            row: row.clone(),
            applied_options,
            cells: plan.tools.iter().zip(runs).map(|(tool, runs)| Cell::new(tool, runs)).collect(),
        });
        if let (Some(source), Some(result)) = (plan.counts, results.last_mut()) {
            for (tool, cell) in plan.tools.iter().zip(&mut result.cells) {
                bar.set_message(format!(
                    "{} counting runs",
                    cell_label(&workload.label, row, tool.name())
                ));
                stop_if_signalled(&bar)?;
                cell.counts =
                    Some(count_cell(ctx, workload, row, tool, source, entries[row.workload])?);
                bar.inc(COUNTING_RUNS);
            }
        }
    }
    bar.finish_and_clear();
    Ok(results)
}

/// Stops the matrix, leaving the progress bar as it is, when a signal came since the last run.
fn stop_if_signalled(bar: &ProgressBar) -> Result<()> {
    match unpack::interrupt::pending() {
        Some(signal) => {
            bar.abandon();
            Err(Error::Interrupted { signal })
        }
        None => Ok(()),
    }
}

/// The entries of `workload`'s archives, as dpkg-deb lists them.
pub fn entries(workload: &Workload) -> Result<u64> {
    workload.packages.iter().try_fold(0u64, |sum, p| {
        let listing =
            command::output(Command::new("dpkg-deb").arg("--contents").arg(&p.path), &p.path)?;
        Ok(sum + listing.lines().count() as u64)
    })
}

/// The counting runs of `tool` on `row`, each on a fresh filesystem like a timed run; the
/// counters' files live in a directory of the bench's scratch, removed afterwards.
pub fn count_cell(
    ctx: &Context,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    source: Source,
    entries: u64,
) -> Result<Counts> {
    let mut counts = Counts::new(entries, source);
    for count in [Count::Syscalls, Count::Instructions(source)] {
        let dir = ctx.scratch.join("counts");
        std::fs::create_dir(&dir).map_err(Error::io(&dir))?;
        let launcher = Launcher::new(count, &dir);
        let counting = ctx.with_launcher(&launcher);
        let record = run_once(&counting, workload, row, tool, 1);
        let read = match &record {
            Ok(r) if r.ok => launcher.read_into(&mut counts),
            Ok(r) => Err(r.error.clone().unwrap_or_else(|| "failed".to_string())),
            Err(_) => Ok(()),
        };
        std::fs::remove_dir_all(&dir).map_err(Error::io(&dir))?;
        record?;
        if let Err(e) = read {
            counts.errors.push(format!("{}: {e}", count.name()));
        }
    }
    Ok(counts)
}
