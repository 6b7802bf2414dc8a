//! The shape of a matrix: workloads, rows (filesystem x scenario x mount options x cache),
//! columns (our strategies, then peers), and the order runs happen in.
//!
//! Why the order is a module of its own: it is the fairness rule. Within a row, runs go round
//! by round and every tool runs once per round (A B C A B C …), after one warm-up round whose
//! times are thrown away. A tool never gets a block of its own, so drift on a shared machine
//! (another tenant's I/O, thermal throttling, writeback of somebody else's data) lands on all
//! tools alike. Nothing here measures or touches the system.

use super::cache::Cache;
use super::counts::Source;
use super::nfs::NfsRow;
use super::package::Package;
use super::peers::Peer;
use super::scenario::Scenario;
use serde::Serialize;
use std::path::PathBuf;

/// The ext4 mount option sets benched when none are given: the ones that change how and when
/// data reaches the disk.
pub const EXT4_OPTION_SETS: &[&str] = &[
    "defaults",
    "nodelalloc",
    "noauto_da_alloc",
    "data=journal",
    "data=writeback",
    "commit=60",
    "nobarrier",
    // ext4 refuses an asynchronous commit in its default data=ordered mode (the kernel logs
    // "can't mount with journal_async_commit in data=ordered mode").
    "data=writeback,journal_async_commit",
];

/// The sets ext3's mount refuses: it has no delayed allocation, and no asynchronous commit.
const NOT_ON_EXT3: &[&str] =
    &["nodelalloc", "noauto_da_alloc", "data=writeback,journal_async_commit"];

/// The option sets benched on `fstype` when the user gives none: the ext4 matrix on ext4, the
/// same without the sets ext3 refuses on ext3, `defaults` elsewhere, where ext4's
/// options would not mount.
pub fn default_option_sets(fstype: &str) -> Vec<String> {
    let sets = EXT4_OPTION_SETS.iter().map(|s| s.to_string());
    match fstype {
        "ext4" => sets.collect(),
        "ext3" => sets.filter(|s| !NOT_ON_EXT3.contains(&s.as_str())).collect(),
        _ => vec!["defaults".to_string()],
    }
}

/// A column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// Our `unpack` with this strategy.
    Strategy(String),
    /// Another unpacker.
    Peer(Peer),
}

impl Tool {
    /// The column name.
    pub fn name(&self) -> &str {
        match self {
            Tool::Strategy(s) => s,
            Tool::Peer(p) => p.name(),
        }
    }

    /// `strategy` or `peer`.
    pub fn kind(&self) -> &'static str {
        match self {
            Tool::Strategy(_) => "strategy",
            Tool::Peer(_) => "peer",
        }
    }
}

/// mkfs.ext4's default bytes-per-inode ratio.
const BYTES_PER_INODE: u64 = 16 << 10;

/// What one run unpacks: the packages given on the command line (all in one invocation), or
/// one synthetic package.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub label: String,
    /// Number of files, for synthetic packages (the x axis of the scaling plot).
    pub synthetic_files: Option<u64>,
    pub packages: Vec<Package>,
    /// The rewritten "old version" packages of the upgrade scenario, when it is benched.
    #[serde(skip)]
    pub old_packages: Vec<PathBuf>,
    /// The packages debootstrap's first stage extracts, for the minbase scenario's dpkg peers:
    /// empty unless the workload is a directory of `fixtures/fetch-minbase.sh`.
    #[serde(skip)]
    pub first_stage: Vec<PathBuf>,
}

impl Workload {
    /// The package paths, in command-line order.
    pub fn package_paths(&self) -> Vec<PathBuf> {
        self.packages.iter().map(|p| p.path.clone()).collect()
    }

    /// A generous estimate of the space one run needs (the old version and the new one side by
    /// side, as an upgrade has them for a moment).
    pub fn space_needed(&self) -> u64 {
        let bytes = self
            .packages
            .iter()
            .map(Package::unpacked_estimate)
            .fold(0u64, u64::saturating_add)
            .saturating_mul(3);
        // Inodes run out before blocks on many small files: mkfs.ext4 makes one per 16 KiB, and
        // an upgrade holds two versions of each file at once.
        let inodes = self.synthetic_files.unwrap_or(0).saturating_mul(2 * BYTES_PER_INODE);
        bytes.max(inodes)
    }
}

/// A row of the matrix: everything about a run except the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// Index into the plan's workloads.
    #[serde(skip)]
    pub workload: usize,
    pub filesystem: String,
    pub scenario: Scenario,
    /// The option set as requested (`defaults`, `data=journal,commit=30`), or `as mounted` for
    /// `--dir`.
    pub mount_options: String,
    pub cache: Cache,
    /// For NFS rows (`filesystem` is `nfs`, `mount_options` the client's): the backing
    /// filesystem and the export mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsRow>,
}

impl Row {
    /// The filesystem as table headings name it.
    pub fn filesystem_label(&self) -> String {
        self.nfs.as_ref().map_or_else(|| self.filesystem.clone(), NfsRow::label)
    }
}

/// One filesystem of the matrix with its mount option sets (an NFS export with its client
/// option sets): the rows of one table per workload and scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRows {
    pub filesystem: String,
    pub option_sets: Vec<String>,
    pub nfs: Option<NfsRow>,
}

/// The counting runs of a cell with `--counts`: one for system calls, one for instructions.
pub const COUNTING_RUNS: u64 = 2;

/// A whole matrix, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workloads: Vec<Workload>,
    pub rows: Vec<Row>,
    pub tools: Vec<Tool>,
    /// Counted runs per cell (after one warm-up round).
    pub runs: u64,
    /// With `--counts`: the instruction counter, for two counting runs per cell after the
    /// row's timed runs (one under strace, one counting instructions).
    pub counts: Option<Source>,
}

/// One step of a row's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// 0 is the warm-up round; counted rounds are 1..=runs.
    pub round: u64,
    /// Index into the plan's tools.
    pub tool: usize,
}

impl Step {
    /// True for the warm-up round, whose times are not kept.
    pub fn is_warm_up(self) -> bool {
        self.round == 0
    }
}

impl Plan {
    /// Rows for every workload x filesystem x scenario x option set x cache, in table order.
    pub fn rows_for(
        workloads: usize,
        filesystems: &[FsRows],
        scenarios: &[Scenario],
        caches: &[Cache],
    ) -> Vec<Row> {
        let mut rows = Vec::new();
        for workload in 0..workloads {
            for fs in filesystems {
                for &scenario in scenarios {
                    for options in &fs.option_sets {
                        for &cache in caches {
                            rows.push(Row {
                                workload,
                                filesystem: fs.filesystem.clone(),
                                scenario,
                                mount_options: options.clone(),
                                cache,
                                nfs: fs.nfs.clone(),
                            });
                        }
                    }
                }
            }
        }
        rows
    }

    /// The order of runs within one row: warm-up round, then counted rounds, each running every
    /// tool once, in column order.
    pub fn schedule(&self) -> impl Iterator<Item = Step> + '_ {
        (0..=self.runs)
            .flat_map(move |round| (0..self.tools.len()).map(move |tool| Step { round, tool }))
    }

    /// Every run the matrix will make, warm-ups and counting runs included (for the progress
    /// bar).
    pub fn total_runs(&self) -> u64 {
        let counting = if self.counts.is_some() { COUNTING_RUNS } else { 0 };
        self.rows.len() as u64 * self.tools.len() as u64 * (self.runs + 1 + counting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(runs: u64, tools: usize) -> Plan {
        Plan {
            workloads: Vec::new(),
            rows: Vec::new(),
            tools: (0..tools).map(|i| Tool::Strategy(format!("s{i}"))).collect(),
            runs,
            counts: None,
        }
    }

    #[test]
    fn tools_alternate_within_rounds_after_one_warm_up() {
        let p = plan(2, 3);
        let order: Vec<(u64, usize)> = p.schedule().map(|s| (s.round, s.tool)).collect();
        assert_eq!(order, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]);
        assert_eq!(p.schedule().filter(|s| s.is_warm_up()).count(), 3);
    }

    #[test]
    fn counting_runs_are_two_more_runs_per_cell_in_the_progress() {
        let mut p = plan(2, 3);
        let fs = [FsRows {
            filesystem: "ext4".to_string(),
            option_sets: vec!["defaults".to_string()],
            nfs: None,
        }];
        p.rows = Plan::rows_for(1, &fs, &[Scenario::Install], &[Cache::Warm]);
        assert_eq!(p.total_runs(), 9, "a warm-up and two counted rounds of three tools");
        p.counts = Some(Source::Valgrind);
        assert_eq!(p.total_runs(), 15);
    }

    #[test]
    fn rows_cover_every_combination_in_table_order() {
        let options = vec!["defaults".to_string(), "nodelalloc".to_string()];
        let fs = vec![FsRows { filesystem: "ext4".to_string(), option_sets: options, nfs: None }];
        let rows = Plan::rows_for(
            1,
            &fs,
            &[Scenario::Install, Scenario::Upgrade],
            &[Cache::Warm, Cache::Cold],
        );
        assert_eq!(rows.len(), 8);
        assert_eq!(
            (rows[0].scenario, rows[0].mount_options.as_str(), rows[0].cache),
            (Scenario::Install, "defaults", Cache::Warm)
        );
        assert_eq!((rows[1].scenario, rows[1].cache), (Scenario::Install, Cache::Cold));
        assert_eq!(rows[2].mount_options, "nodelalloc");
        assert_eq!(rows[4].scenario, Scenario::Upgrade);
    }

    #[test]
    fn default_option_sets_never_put_ext4_options_on_xfs() {
        assert_eq!(default_option_sets("ext4").len(), 8);
        assert_eq!(default_option_sets("ext3").len(), 5);
        assert!(!default_option_sets("ext3").contains(&"nodelalloc".to_string()));
        assert_eq!(default_option_sets("xfs"), ["defaults"]);
        assert_eq!(default_option_sets("btrfs"), ["defaults"]);
    }
}
