//! The matrix of `unpack-crashtest`: its cells run one after another (record, states, images,
//! checks), the results gathered per cell, and a state of an earlier run rebuilt for a person
//! to look at (`--replay`). It sequences what the other files of [`super`] do and must never
//! leave a mount, loop device or FUSE mount behind, whatever a cell does.

use super::check::{Deeper, Expected, FsFailure, Kind, Violation};
use super::expect::{Content, Tree};
use super::states::{State, StateInfo, Timeline};
use super::{apt, bootstrap, check, database, image, older, record};
use super::{check_interrupt, new_workdir, CrashError};
pub use crate::bench::scenario::Scenario;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The mount option sets when none are given: on ext4 the ones that decide when data reaches
/// the disk; ext3 has no delayed allocation to switch off; XFS and btrfs as they come.
pub fn default_option_sets(fstype: &str) -> Vec<String> {
    let sets: &[&str] = match fstype {
        "ext4" => &["defaults", "noauto_da_alloc", "nodelalloc", "data=writeback"],
        "ext3" => &["defaults", "data=writeback"],
        _ => &["defaults"],
    };
    sets.iter().map(|s| s.to_string()).collect()
}

/// One run of the matrix.
#[derive(Debug, Clone)]
pub struct Config {
    /// The package under test; none for a run of the `apt` scenario alone, whose packages are
    /// the lab's.
    pub package: Option<PathBuf>,
    /// A minbase directory (`fixtures/fetch-minbase.sh DIR`), for the `apt` scenario.
    pub minbase: Option<PathBuf>,
    /// The `unpack` binary under test.
    pub unpack: PathBuf,
    pub strategies: Vec<String>,
    pub filesystems: Vec<String>,
    /// Mount option sets for every filesystem; empty: [`default_option_sets`].
    pub option_sets: Vec<String>,
    pub scenarios: Vec<Scenario>,
    /// Crash states checked per cell, at most.
    pub states: usize,
    pub seed: u64,
    /// Time the filesystem runs on after the unpacker returns; `None`: [`record::default_settle`].
    pub settle: Option<Duration>,
    /// Keep each cell's write log in this directory (for `--replay`).
    pub keep_logs: Option<PathBuf>,
}

/// The result of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    /// `fs/options/scenario/strategy`, what `--replay` takes.
    pub id: String,
    pub fs: String,
    pub options: String,
    pub scenario: Scenario,
    pub strategy: String,
    pub settle_s: f64,
    pub disk_bytes: u64,
    /// The kept write log, relative to the output directory.
    pub log: Option<PathBuf>,
    /// Why the cell could not be run, if it could not.
    pub error: Option<String>,
    pub log_entries: u64,
    pub flushes: usize,
    /// Flushes after the exit that the filesystem did not cause (see
    /// `Timeline::idle_flushes_after_returned`): the run was disturbed by another process.
    pub foreign_flushes: usize,
    pub epochs: usize,
    /// Candidate states considered, and how many were left out as duplicates.
    pub candidates: usize,
    pub duplicates: usize,
    /// States checked, and how many of them a crash after the exit can leave.
    pub states: usize,
    pub states_after_returned: usize,
    pub states_with_violations: usize,
    /// Violations (state x path) per kind.
    pub kinds: BTreeMap<Kind, usize>,
    /// States with at least one violation of the kind, per kind.
    pub states_by_kind: BTreeMap<Kind, usize>,
    /// States `unpack --recover` ran on (invariant 3), and how many of them held a rename
    /// journal (recovery rolls forward) or an intent without one (it rolls back).
    pub states_recovered: usize,
    pub states_with_journal: usize,
    pub states_with_intent: usize,
    /// The bootstrap scenario: where recovery left the root of each state, and how often the
    /// bootstrap ran again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapStates>,
    /// The apt scenario: the packages' states after recovery and the repairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apt: Option<AptStates>,
    pub violations: Vec<Violation>,
    /// Mount and fsck failures: the filesystem's, reported apart.
    pub fs_failures: Vec<FsFailure>,
    /// The states with a violation or a filesystem failure.
    pub states_detail: Vec<StateInfo>,
}

/// The states of a bootstrap cell by the stage recovery left the root at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BootstrapStates {
    /// By the names of [`bootstrap::STAGES`]: states whose recovered root was entirely (or,
    /// with a violation, nearest) at that stage. The states before the second stage's journal
    /// are at an earlier stage; the ones after it, at the second stage.
    pub states_by_stage: BTreeMap<&'static str, usize>,
    /// States on whose recovered root the bootstrap ran again (its database listed no package).
    pub states_redone: usize,
}

/// The states of an apt cell by what recovery left of the packages and what repairing took.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AptStates {
    /// States with a violation after `unpack --recover` alone (`repair-failed` left out).
    pub states_with_violations_after_recovery: usize,
    /// States with a package whose status said `reinstreq` or `half-installed` after recovery,
    /// and such packages summed over the states.
    pub states_needing_reinstall: usize,
    pub packages_needing_reinstall: usize,
    /// Of those packages, the ones whose files were at neither version (neither 1's nor 2's
    /// as unpacked): what `half-installed` hid. Not a violation: dpkg says so.
    pub packages_needing_reinstall_mixed: usize,
    /// States the repair (`dpkg --configure -a`, then `apt-get -f install` if needed) left
    /// whole, the ones of them that needed `apt-get -f install`, and the ones it failed on.
    pub states_repaired: usize,
    pub states_apt_fix: usize,
    pub states_repair_failed: usize,
    /// Packages summed over the states by what dpkg's status said of them after recovery
    /// (`VERSION WANT FLAG STATE`).
    pub packages_by_status: BTreeMap<String, usize>,
}

/// The whole matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    /// None for a run of the `apt` scenario alone.
    pub package: Option<PathBuf>,
    pub seed: u64,
    pub states_per_cell: usize,
    /// False when a disk server ran without `PR_SET_IO_FLUSHER` (see `VDisk::is_io_flusher`).
    pub io_flusher: bool,
    pub cells: Vec<CellResult>,
}

impl Matrix {
    /// The cells that could not be run (a mount option the filesystem refuses, a tool missing, a
    /// recording that left no crash state): the matrix says nothing about them, so a run with
    /// any is incomplete (`unpack-crashtest` exits 3).
    pub fn unfinished(&self) -> Vec<&CellResult> {
        self.cells.iter().filter(|c| c.error.is_some()).collect()
    }

    /// Crash states checked over the whole matrix.
    pub fn states_checked(&self) -> usize {
        self.cells.iter().map(|c| c.states).sum()
    }
}

/// What the scenarios of a run need, made once before the first cell: the package's tree, the
/// older version, the upgrade-db pair, the bootstrap's packages, each when a scenario asks.
struct Prepared {
    package: Option<PathBuf>,
    new: Tree,
    empty: Tree,
    older: Option<(PathBuf, Tree)>,
    /// The pair, the older and newer package, and the pair's old and new trees.
    db: Option<(database::Db, PathBuf, PathBuf, Tree, Tree)>,
    bootstrap: Option<bootstrap::Bootstrap>,
    /// The apt scenario's prepared root and packages, and the bytes of the root.
    apt: Option<(apt::Apt, u64)>,
}

/// One scenario's part in a cell: the call under test, what the root holds before it, the old
/// and new trees and the scenario's own checks.
struct Cast<'p> {
    packages: Vec<PathBuf>,
    flags: &'static [&'static str],
    older: Option<&'p Path>,
    old: &'p Tree,
    new: &'p Tree,
    /// The database the root keeps (`upgrade-db`, `bootstrap`).
    database: bool,
    deeper: Option<&'p dyn Deeper>,
    apt: Option<&'p apt::Apt>,
}

impl Prepared {
    fn new(config: &Config, work: &Path) -> Result<Prepared, CrashError> {
        let asks = |scenario| config.scenarios.contains(&scenario);
        let apt = match (asks(Scenario::Apt), &config.minbase) {
            (true, Some(minbase)) => {
                let apt = apt::Apt::prepare(minbase, &config.unpack, work)?;
                let bytes = apt.bytes()?;
                Some((apt, bytes))
            }
            _ => None,
        };
        let Some(package) = &config.package else {
            let empty = Tree::default();
            return Ok(Prepared {
                package: None,
                new: empty.clone(),
                empty,
                older: None,
                db: None,
                bootstrap: None,
                apt,
            });
        };
        let new = Tree::of_deb(package)?;
        let older = if asks(Scenario::Upgrade) {
            let deb = work.join("older.deb");
            older::write(package, &deb)?;
            let tree = Tree::of_deb(&deb)?;
            Some((deb, tree))
        } else {
            None
        };
        let db = if asks(Scenario::UpgradeDb) {
            let (older, newer) = database::write_pair(package, work)?;
            let db = database::Db::of_debs(&older, &newer)?;
            let (old, new) = (db.old_tree(), db.new_tree());
            Some((db, older, newer, old, new))
        } else {
            None
        };
        let bootstrap = if asks(Scenario::Bootstrap) {
            Some(bootstrap::Bootstrap::write(package, &work.join("bootstrap"))?)
        } else {
            None
        };
        Ok(Prepared {
            package: Some(package.clone()),
            new,
            empty: Tree::default(),
            older,
            db,
            bootstrap,
            apt,
        })
    }

    /// The bytes of every file of every tree, for the size of the disk.
    fn bytes(&self) -> u64 {
        let db = self.db.iter().flat_map(|(_, _, _, old, new)| [old, new]);
        let trees = [&self.new]
            .into_iter()
            .chain(self.older.iter().map(|(_, t)| t))
            .chain(db)
            .chain(self.bootstrap.as_ref().map(|b| b.last()));
        let files: u64 = trees
            .flat_map(|t| t.0.values())
            .map(|c| if let Content::File { len, .. } = c { *len } else { 0 })
            .sum();
        files + self.apt.as_ref().map_or(0, |(_, bytes)| *bytes)
    }

    /// The package alone, over nothing or over `older` (the older version and its tree).
    fn plain<'p>(&'p self, older: Option<&'p (PathBuf, Tree)>) -> Cast<'p> {
        Cast {
            packages: self.package.iter().cloned().collect(),
            flags: &[],
            older: older.map(|(deb, _)| deb.as_path()),
            old: older.map_or(&self.empty, |(_, tree)| tree),
            new: &self.new,
            database: false,
            deeper: None,
            apt: None,
        }
    }

    /// The cast of `scenario`; `None` for a scenario this run did not prepare (validate()
    /// refuses the bench's).
    fn cast(&self, scenario: Scenario) -> Option<Cast<'_>> {
        let plain = |older| self.plain(older);
        match scenario {
            Scenario::Install => Some(plain(None)),
            Scenario::Upgrade => self.older.as_ref().map(|older| plain(Some(older))),
            Scenario::UpgradeDb => self.db.as_ref().map(|(db, older, newer, old, new)| Cast {
                packages: vec![newer.clone()],
                older: Some(older.as_path()),
                old,
                new,
                database: true,
                deeper: Some(db),
                ..plain(None)
            }),
            Scenario::Bootstrap => self.bootstrap.as_ref().map(|b| Cast {
                packages: b.packages.to_vec(),
                flags: &bootstrap::FLAGS,
                old: b.first(),
                new: b.last(),
                deeper: Some(b),
                ..plain(None)
            }),
            Scenario::Apt => self.apt.as_ref().map(|(apt, _)| Cast {
                packages: Vec::new(),
                old: &self.empty,
                new: &self.empty,
                deeper: Some(apt),
                apt: Some(apt),
                ..plain(None)
            }),
            Scenario::Busy
            | Scenario::BusyElsewhere
            | Scenario::Minbase
            | Scenario::AptLocal
            | Scenario::AptInstall
            | Scenario::DistUpgrade => None,
        }
    }
}

/// Runs every cell of `config`; `on_cell` sees each result as it is made. A cell that cannot
/// be run (a mount option the filesystem refuses, an unpack that fails) is reported as such and
/// the matrix goes on ([`Matrix::unfinished`]).
pub fn run(config: &Config, on_cell: &mut dyn FnMut(&CellResult)) -> Result<Matrix, CrashError> {
    validate(config)?;
    let work = new_workdir()?;
    let prepared = Prepared::new(config, work.path())?;
    let disk_bytes = record::disk_bytes(prepared.bytes());
    let mut matrix = Matrix {
        package: config.package.clone(),
        seed: config.seed,
        states_per_cell: config.states,
        io_flusher: true,
        cells: Vec::new(),
    };
    for fs in &config.filesystems {
        let sets = if config.option_sets.is_empty() {
            default_option_sets(fs)
        } else {
            config.option_sets.clone()
        };
        for options in &sets {
            for &scenario in &config.scenarios {
                let cast = prepared.cast(scenario).ok_or_else(|| {
                    CrashError::Usage(format!("scenario '{}' was not prepared", scenario.name()))
                })?;
                for strategy in &config.strategies {
                    let index = matrix.cells.len();
                    let settle =
                        config.settle.unwrap_or_else(|| record::default_settle(fs, options));
                    let mut cell =
                        CellResult::new(fs, options, scenario, strategy, settle, disk_bytes);
                    let dir = work.path().join(format!("cell-{index}"));
                    let setup = record::Setup {
                        fstype: fs,
                        options,
                        strategy,
                        packages: &cast.packages,
                        flags: cast.flags,
                        older: cast.older,
                        database: cast.database,
                        unpack: &config.unpack,
                        apt: cast.apt,
                        settle,
                        disk_bytes,
                        dir: &dir,
                    };
                    let expected = Expected {
                        old: cast.old,
                        new: cast.new,
                        root: Path::new(record::ROOT_DIR),
                        fstype: fs,
                        unpack: &config.unpack,
                        strategy: if strategy == apt::DPKG {
                            apt::RECOVER_STRATEGY
                        } else {
                            strategy
                        },
                        deeper: cast.deeper,
                    };
                    let ran = run_cell(config, index, &setup, &expected, &mut cell);
                    let _ = std::fs::remove_dir_all(&dir);
                    check_interrupt()?;
                    match ran {
                        Ok(io_flusher) => matrix.io_flusher &= io_flusher,
                        Err(e) => cell.error = Some(unpack::error::one_line(&e)),
                    }
                    on_cell(&cell);
                    matrix.cells.push(cell);
                }
            }
        }
    }
    Ok(matrix)
}

impl CellResult {
    pub(super) fn new(
        fs: &str,
        options: &str,
        scenario: Scenario,
        strategy: &str,
        settle: Duration,
        disk_bytes: u64,
    ) -> CellResult {
        CellResult {
            id: format!("{fs}/{options}/{}/{strategy}", scenario.name()),
            fs: fs.to_string(),
            options: options.to_string(),
            scenario,
            strategy: strategy.to_string(),
            settle_s: settle.as_secs_f64(),
            disk_bytes,
            log: None,
            error: None,
            log_entries: 0,
            flushes: 0,
            foreign_flushes: 0,
            epochs: 0,
            candidates: 0,
            duplicates: 0,
            states: 0,
            states_after_returned: 0,
            states_with_violations: 0,
            kinds: BTreeMap::new(),
            states_by_kind: BTreeMap::new(),
            states_recovered: 0,
            states_with_journal: 0,
            states_with_intent: 0,
            bootstrap: (scenario == Scenario::Bootstrap).then(BootstrapStates::default),
            apt: (scenario == Scenario::Apt).then(AptStates::default),
            violations: Vec::new(),
            fs_failures: Vec::new(),
            states_detail: Vec::new(),
        }
    }
}

impl BootstrapStates {
    /// Counts one checked state.
    fn count(&mut self, outcome: &check::Outcome) {
        if let Some(stage) = outcome.stage.side.and_then(|s| bootstrap::STAGES.get(s)) {
            *self.states_by_stage.entry(stage).or_default() += 1;
        }
        self.states_redone += usize::from(outcome.stage.redone);
    }
}

impl AptStates {
    /// Counts one checked state.
    fn count(&mut self, outcome: &check::Outcome) {
        let after_recovery = outcome.violations.iter().any(|v| v.kind != Kind::RepairFailed);
        self.states_with_violations_after_recovery += usize::from(after_recovery);
        let Some(repair) = &outcome.repair else { return };
        self.states_needing_reinstall += usize::from(repair.needs_reinstall > 0);
        self.packages_needing_reinstall += repair.needs_reinstall;
        self.packages_needing_reinstall_mixed += repair.reinstall_mixed;
        self.states_repaired += usize::from(!repair.failed);
        self.states_apt_fix += usize::from(repair.apt_fix);
        self.states_repair_failed += usize::from(repair.failed);
        for said in &repair.states {
            let status: Vec<&str> = said.split_whitespace().take(4).collect();
            *self.packages_by_status.entry(status.join(" ")).or_default() += 1;
        }
    }
}

/// Records one cell, chooses its states, builds and checks each. Returns whether the disk ran
/// as an IO flusher.
fn run_cell(
    config: &Config,
    index: usize,
    setup: &record::Setup<'_>,
    expected: &Expected<'_>,
    cell: &mut CellResult,
) -> Result<bool, CrashError> {
    std::fs::create_dir(setup.dir).map_err(|source| CrashError::Io {
        path: setup.dir.to_path_buf(),
        what: "creating",
        source,
    })?;
    let recording = record::record(setup)?;
    if let Some(keep) = &config.keep_logs {
        let name = PathBuf::from("logs").join(format!("cell-{index}.log"));
        let dest = keep.join(&name);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|source| CrashError::Io {
                path: parent.to_path_buf(),
                what: "creating",
                source,
            })?;
        }
        image::copy_sparse(&recording.log, &dest)?;
        cell.log = Some(name);
    }
    let timeline = Timeline::read(&recording.log, setup.disk_bytes)?;
    let selection = timeline.select(config.states, config.seed);
    if selection.states.is_empty() {
        // A cell that checked nothing has no verdict: it is a cell that could not be run.
        return Err(CrashError::BadLog {
            path: recording.log.clone(),
            reason: "no crash state to check between the start and the end of the settle time"
                .into(),
        });
    }
    cell.log_entries = timeline.entries;
    cell.flushes = timeline.flushes;
    cell.foreign_flushes = timeline.idle_flushes_after_returned;
    cell.epochs = timeline.epochs.len();
    cell.candidates = selection.candidates;
    cell.duplicates = selection.duplicates;
    cell.states = selection.states.len();
    cell.states_after_returned =
        selection.states.iter().filter(|s| timeline.after_returned(s)).count();
    let chosen: Vec<(usize, &State)> = selection.states.iter().enumerate().collect();
    let mnt = setup.dir.join("check");
    image::build_states(
        &recording.log,
        &timeline,
        &chosen,
        setup.disk_bytes,
        setup.dir,
        &mut |id, state, image| {
            check_interrupt()?;
            let outcome = check::check_state(
                image.path(),
                &mnt,
                expected,
                id,
                timeline.after_returned(state),
            )?;
            if !outcome.violations.is_empty() || !outcome.fs_failures.is_empty() {
                cell.states_detail.push(timeline.describe(id, state));
            }
            if !outcome.violations.is_empty() {
                cell.states_with_violations += 1;
            }
            cell.states_recovered += usize::from(outcome.recovered);
            cell.states_with_journal += usize::from(outcome.left.journal);
            cell.states_with_intent += usize::from(outcome.left.intent && !outcome.left.journal);
            if let Some(counts) = cell.bootstrap.as_mut() {
                counts.count(&outcome);
            }
            if let Some(counts) = cell.apt.as_mut() {
                counts.count(&outcome);
            }
            for v in &outcome.violations {
                *cell.kinds.entry(v.kind).or_default() += 1;
            }
            let seen: std::collections::BTreeSet<Kind> =
                outcome.violations.iter().map(|v| v.kind).collect();
            for kind in seen {
                *cell.states_by_kind.entry(kind).or_default() += 1;
            }
            cell.violations.extend(outcome.violations);
            cell.fs_failures.extend(outcome.fs_failures);
            Ok(())
        },
    )?;
    cell.states_detail.sort_by_key(|s| s.id);
    cell.violations.sort_by(|a, b| (a.state, &a.path).cmp(&(b.state, &b.path)));
    cell.fs_failures.sort_by_key(|f| f.state);
    Ok(recording.io_flusher)
}

/// What can be known to fail fails before the first cell (a matrix runs for hours): unknown
/// names are usage errors, a missing mkfs is the test's own failure, with the package to install.
fn validate(config: &Config) -> Result<(), CrashError> {
    for fs in &config.filesystems {
        if !crate::scratchfs::FILESYSTEMS.contains(&fs.as_str()) {
            let known = crate::scratchfs::FILESYSTEMS.join(", ");
            return Err(CrashError::Usage(format!("unknown filesystem '{fs}' (known: {known})")));
        }
        require_mkfs(fs)?;
    }
    let apt_alone = config.scenarios.iter().all(|&s| s == Scenario::Apt);
    for s in config.strategies.iter().filter(|s| !(apt_alone && *s == apt::DPKG)) {
        unpack::durability::by_name(s, 1).map_err(|e| CrashError::Usage(e.to_string()))?;
    }
    if config.package.is_none() && !apt_alone {
        return Err(CrashError::Usage(
            "a PACKAGE is needed (only --scenario apt has its own)".into(),
        ));
    }
    if config.minbase.is_none() && config.scenarios.contains(&Scenario::Apt) {
        return Err(CrashError::Usage(
            "--scenario apt needs --minbase DIR (made by fixtures/fetch-minbase.sh DIR)".into(),
        ));
    }
    if let Some(s) = config.scenarios.iter().find(|s| s.is_bench_only()) {
        let ours: Vec<&str> =
            Scenario::ALL.iter().filter(|s| !s.is_bench_only()).map(|s| s.name()).collect();
        return Err(CrashError::Usage(format!(
            "scenario '{}' is unpack-bench's; the crash test runs {}",
            s.name(),
            ours.join(", ")
        )));
    }
    let empty = |what: &str| Err(CrashError::Usage(format!("no {what} to test")));
    if config.strategies.is_empty() {
        return empty("strategies");
    }
    if config.filesystems.is_empty() {
        return empty("filesystems");
    }
    if config.scenarios.is_empty() {
        return empty("scenarios");
    }
    Ok(())
}

/// Fails unless `mkfs.FS` is in `PATH`, where the cells will look for it (and for the fsck of
/// the same package).
fn require_mkfs(fs: &str) -> Result<(), CrashError> {
    let tool = format!("mkfs.{fs}");
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(&tool).is_file()) {
        return Ok(());
    }
    let package = crate::scratchfs::mkfs_package(fs);
    Err(CrashError::Tool {
        path: tool.into(),
        reason: format!("not found in PATH: install the Debian package {package}"),
    })
}
