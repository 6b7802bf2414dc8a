//! What an unpack did and what it cost: per package counts, per phase times, counted flush
//! calls, the filesystem and its mount options, peak memory. Printed for people, or as JSON
//! for scripts and for `unpack-bench`; the JSON field names are an interface and stay stable.

use crate::error::escape;
use crate::fs::mountinfo::MountInfo;
use crate::fs::syscalls::{FlushLatencies, SyscallCounts};
use crate::read::control::Control;
use crate::read::entry::{Entry, Kind};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::PathBuf;

/// One package of the transaction.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PackageReport {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// Every tar entry (directories, links, files, ...), the root entry `./` included.
    pub entries: u64,
    /// Regular files.
    pub files: u64,
    /// Bytes of regular file data.
    pub bytes: u64,
    /// What happened in dpkg's database (database mode only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseReport>,
}

/// A package's change to dpkg's database.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DatabaseReport {
    /// "installed" or "upgraded".
    pub action: String,
    /// The version upgraded from.
    pub previous_version: Option<String>,
    /// Paths the old version had and the new one does not, removed.
    pub removed: u64,
    /// Conffiles written as `NAME.dpkg-new`, for `dpkg --configure` to settle.
    pub conffiles_new: Vec<String>,
    /// Installed packages some of whose files this one took over (Replaces).
    pub replaced: Vec<String>,
    /// Of those, the ones left with no file, gone from the database as dpkg makes them go.
    pub disappeared: Vec<String>,
    /// The unpack phase's maintainer scripts ran (false with `--no-scripts`).
    pub scripts_run: bool,
}

impl PackageReport {
    /// Counts one entry of the package.
    pub(crate) fn count(&mut self, entry: &Entry) {
        self.entries += 1;
        if let Kind::File { size } = entry.kind {
            self.files += 1;
            self.bytes += size;
        }
    }

    pub(crate) fn new(control: Control) -> PackageReport {
        PackageReport {
            name: control.name,
            version: control.version,
            architecture: control.architecture,
            ..Default::default()
        }
    }
}

/// Seconds per phase; `total_s` is the wall time of the whole call, lock and reading included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub extract_s: f64,
    pub barrier_s: f64,
    pub rename_s: f64,
    pub dirsync_s: f64,
    pub total_s: f64,
}

/// The report of one `unpack` call.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub packages: Vec<PackageReport>,
    pub strategy: String,
    pub root: PathBuf,
    /// `None` when /proc is not mounted.
    pub filesystem: Option<MountInfo>,
    pub phases: Phases,
    pub syscalls: SyscallCounts,
    /// How long the flush calls of `syscalls` took: count, total, p50, p99 and max per kind.
    pub flush_latency: FlushLatencies,
    pub peak_rss_bytes: u64,
    /// What recovery of an earlier, interrupted transaction did first, if anything.
    pub recovered: Option<String>,
    /// `--bootstrap`: its first stage, before the transaction `packages` reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_stage: Option<FirstStage>,
}

/// The bootstrap's first stage: packages whose files it wrote with no script and no database
/// record (`seconds` is within the report's `total_s`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FirstStage {
    pub packages: Vec<String>,
    pub seconds: f64,
    /// The packages whose files the second stage took as the first stage left them, without
    /// writing them again (the others it read again from their archives).
    pub adopted: Vec<String>,
}

impl Report {
    /// The human report: a line per package and a total line, the control fields and the root
    /// escaped ([`escape`]): a package's Version can hold a terminal's escape sequences.
    pub fn human(&self) -> String {
        let mut out = String::new();
        for p in &self.packages {
            let (name, version, arch) =
                (escape(&p.name), escape(&p.version), escape(&p.architecture));
            let _ = writeln!(
                out,
                "{name} {version} ({arch}): {} entries, {} files, {} bytes",
                p.entries, p.files, p.bytes
            );
            if let Some(db) = &p.database {
                let _ = writeln!(out, "  {}", db.human());
            }
        }
        if let Some(first) = &self.first_stage {
            let _ = writeln!(
                out,
                "bootstrap: first stage (files only, no script, no database record) of {} packages in {:.3} s; the second stage adopted {} of them as written",
                first.packages.len(),
                first.seconds,
                first.adopted.len()
            );
        }
        let fs = match &self.filesystem {
            Some(fs) => format!("{} on {} ({})", fs.fstype, fs.source, fs.options),
            None => "unknown filesystem".into(),
        };
        let _ = writeln!(
            out,
            "unpacked {} package{} into {} with strategy {} in {:.3} s; {}",
            self.packages.len(),
            if self.packages.len() == 1 { "" } else { "s" },
            escape(&self.root),
            self.strategy,
            self.phases.total_s,
            fs
        );
        out
    }
}

impl DatabaseReport {
    /// One line: "upgraded from 1.0; removed 3 paths; conffiles left as .dpkg-new: /etc/a".
    fn human(&self) -> String {
        let mut parts = vec![match &self.previous_version {
            Some(v) => format!("{} from {}, now unpacked", self.action, escape(v)),
            None => format!("{}, now unpacked", self.action),
        }];
        if self.removed > 0 {
            parts.push(format!(
                "removed {} path{} the old version had",
                self.removed,
                if self.removed == 1 { "" } else { "s" }
            ));
        }
        if !self.conffiles_new.is_empty() {
            let names: Vec<String> =
                self.conffiles_new.iter().map(|c| format!("{}.dpkg-new", escape(c))).collect();
            parts.push(format!("conffiles for dpkg --configure: {}", names.join(" ")));
        }
        if !self.replaced.is_empty() {
            parts.push(format!(
                "took files of {}",
                self.replaced.iter().map(|n| escape(n).to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
        if !self.scripts_run {
            parts.push("its unpack-phase maintainer scripts did not run (--no-scripts)".into());
        }
        if !self.disappeared.is_empty() {
            parts.push(format!(
                "{} disappeared",
                self.disappeared
                    .iter()
                    .map(|n| escape(n).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        parts.join("; ")
    }
}

/// The process's peak resident set size so far (VmHWM), in bytes; 0 if /proc cannot tell.
pub(crate) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
