//! One measured run: a fresh filesystem, the scenario's starting state, the cache state, the
//! unpacker as a child process, and its two times.
//!
//! Why so much ceremony for one number: each step removes a way for runs to see each other
//! (fresh filesystem), for preparation to be billed to the run (sync before the clock starts),
//! or for an unflushed unpacker to look fast (the stable time includes a syncfs of the
//! filesystem after it exits). A run that goes wrong becomes a failed record with the reason;
//! only problems that would corrupt every following run (a filesystem that does not come down,
//! a cache that cannot be dropped) stop the matrix. It never measures anything but the child.

use super::device::{Device, DeviceUsage};
use crate::vdisk::Counters;
use super::engine::{self, Engine};
use super::plan::{Row, Tool, Workload};
use super::{Error, Result};
use unpack::mountinfo;
use rustix::fs::{Mode, OFlags};
use serde::Serialize;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Instant;

/// Where runs happen.
pub enum Site<'a> {
    /// A fresh filesystem on a fresh device for every run.
    Device(&'a dyn Device),
    /// A fresh directory on an existing filesystem (`--dir`): no mkfs, options as they are.
    Dir(PathBuf),
}

/// What every run of a matrix shares.
pub struct Context<'a> {
    pub engine: &'a Engine,
    pub site: Site<'a>,
    /// The bench's scratch directory (backing files, mount points).
    pub scratch: &'a Path,
}

/// The record of one counted run, as the CSV and JSON keep it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunRecord {
    /// 1-based number of the counted run within its cell.
    pub run: u64,
    /// The unpacker exited 0 (and, for ours, reported what it did).
    pub ok: bool,
    pub exit_code: Option<i32>,
    /// Seconds from spawning the unpacker until it exited.
    pub exit_s: Option<f64>,
    /// `exit_s` plus a syncfs of the filesystem: until the data was stable.
    pub stable_s: Option<f64>,
    /// The mount options `/proc/self/mountinfo` reported after mounting.
    pub applied_options: Option<String>,
    /// Our engine's own report (syscalls, phases, peak RSS); empty for peers.
    pub engine: Option<engine::Report>,
    /// What reached the device until the data was stable, when the device counts.
    pub device: Option<DeviceUsage>,
    /// What reached the device until the unpacker exited.
    pub device_at_exit: Option<DeviceUsage>,
    /// Why the run failed.
    pub error: Option<String>,
}

impl RunRecord {
    fn failed(run: u64, applied_options: Option<String>, error: String) -> RunRecord {
        RunRecord { run, applied_options, error: Some(one_line(&error)), ..RunRecord::default() }
    }
}

/// Smallest scratch filesystem: mkfs.xfs refuses anything under 300 MiB.
const MIN_FS_BYTES: u64 = 512 << 20;
/// Room for the journal, metadata and the bench's own directories.
const FS_SLACK_BYTES: u64 = 256 << 20;

/// Runs `tool` once on `row`, numbered `run` within its cell.
pub fn run_once(ctx: &Context, workload: &Workload, row: &Row, tool: &Tool, run: u64) -> Result<RunRecord> {
    match &ctx.site {
        Site::Device(device) => {
            let size = workload.space_needed().saturating_add(FS_SLACK_BYTES).max(MIN_FS_BYTES);
            let fs = match device.fresh_filesystem(&row.filesystem, &row.mount_options, size, ctx.scratch) {
                Ok(fs) => fs,
                Err(e) => {
                    let why = format!("making {} mounted with '{}': {e}", row.filesystem, row.mount_options);
                    return Ok(RunRecord::failed(run, None, why));
                }
            };
            let record = measure(ctx, fs.path(), workload, row, tool, run, &|| fs.counters());
            let mount = fs.path().to_path_buf();
            fs.teardown().map_err(|source| Error::Teardown { path: mount, source })?;
            record
        }
        Site::Dir(dir) => {
            let base = dir.join(format!("unpack-bench.{}.run", std::process::id()));
            std::fs::create_dir(&base).map_err(Error::io(&base))?;
            let record = measure(ctx, &base, workload, row, tool, run, &|| None);
            std::fs::remove_dir_all(&base).map_err(Error::io(&base))?;
            record
        }
    }
}

type CounterRead<'a> = &'a dyn Fn() -> Option<Counters>;

/// The run proper, in `base` (a fresh mount or directory).
fn measure(
    ctx: &Context,
    base: &Path,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    run: u64,
    counters: CounterRead,
) -> Result<RunRecord> {
    let applied = mountinfo::for_path(base).map(|m| m.options).ok();
    let fail = |why: String| Ok(RunRecord::failed(run, applied.clone(), why));
    let root = base.join("root");
    if let Err(e) = std::fs::create_dir(&root) {
        return fail(format!("{}: {e}", root.display()));
    }
    if let Err(e) = row.scenario.prepare(ctx.engine, &workload.old_packages, &root) {
        return fail(format!("preparing the {} scenario: {e}", row.scenario.name()));
    }
    if let Tool::Peer(peer) = tool {
        if let Err(e) = peer.prepare_root(&root) {
            return fail(format!("preparing {} for {}: {e}", root.display(), peer.name()));
        }
    }
    let fs_fd = rustix::fs::open(base, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Error::io(base)(e.into()))?;
    row.cache.settle()?;
    let before = counters();

    let packages = workload.package_paths();
    let start = Instant::now();
    let output = match tool {
        Tool::Strategy(strategy) => {
            ctx.engine.unpack_command(strategy, &packages, &root).stdin(Stdio::null()).output()
        }
        Tool::Peer(peer) => peer.run(&packages, &root),
    };
    let exit_s = start.elapsed().as_secs_f64();
    let at_exit = counters();
    let synced = rustix::fs::syncfs(&fs_fd);
    let stable_s = start.elapsed().as_secs_f64();
    let after = counters();

    let output = match output {
        Ok(output) => output,
        Err(e) => return fail(format!("cannot run {}: {e}", tool.name())),
    };
    let mut record = RunRecord {
        run,
        exit_code: output.status.code(),
        exit_s: Some(exit_s),
        stable_s: Some(stable_s),
        applied_options: applied.clone(),
        device: before.zip(after).map(|(b, a)| a.since(&b).into()),
        device_at_exit: before.zip(at_exit).map(|(b, a)| a.since(&b).into()),
        ..RunRecord::default()
    };
    record.error = if !output.status.success() {
        Some(failure_text(&output))
    } else if let Err(e) = synced {
        Some(format!("syncfs of {} after the run: {e}", base.display()))
    } else if let Tool::Strategy(_) = tool {
        match engine::Report::parse(&output.stdout) {
            Ok(report) => {
                record.engine = Some(report);
                None
            }
            Err(e) => Some(e),
        }
    } else {
        None
    };
    record.ok = record.error.is_none();
    Ok(record)
}

/// Tools' messages span lines; a table cell or CSV field reads better on one.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a child failed: its exit status and the end of its stderr.
fn failure_text(output: &Output) -> String {
    let status = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "failed".to_string(),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        status
    } else {
        one_line(&format!("{status}: {tail}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_failure_shows_the_status_and_the_last_lines_of_stderr() {
        let out = Command::new("sh").args(["-c", "echo one >&2; echo two >&2; echo three >&2; echo four >&2; exit 3"]).output().unwrap();
        assert_eq!(failure_text(&out), "exit status 3: two | three | four");
        let out = Command::new("sh").args(["-c", "kill -9 $$"]).output().unwrap();
        assert_eq!(failure_text(&out), "killed by signal 9");
    }
}
