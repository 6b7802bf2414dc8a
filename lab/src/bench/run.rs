//! One measured run: a fresh filesystem, the scenario's starting state, the cache state, the
//! unpacker as a child process, and its two times.
//!
//! Why so much ceremony for one number: each step removes a way for runs to see each other
//! (fresh filesystem), for preparation to be billed to the run (sync before the clock starts),
//! or for an unflushed unpacker to look fast (the stable time includes a syncfs of the
//! filesystem after it exits). A run that goes wrong becomes a failed record with the reason;
//! only problems that would corrupt every following run (a filesystem that does not come down,
//! a cache that cannot be dropped) stop the matrix. It never measures anything but the child.

use super::apt_scenario::{self, AptFigures, AptWorkload, Prepared};
use super::busy::{Writer, WriterUsage};
use super::counts::Launcher;
use super::device::{Device, DeviceFs, DeviceUsage};
use super::engine::{self, Engine};
use super::minbase;
use super::nfs::{NfsMount, RpcCounts, Server};
use super::plan::{Row, Tool, Workload};
use super::scenario::{Scenario, WriterSite};
use super::{Error, Result};
use crate::vdisk::Counters;
use rustix::fs::{Mode, OFlags};
use serde::Serialize;
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;
use unpack::fs::mountinfo;

/// Where runs happen.
#[derive(Clone)]
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
    /// Where the `busy-elsewhere` writer's filesystems live (the run's device kind, also with
    /// `--dir`).
    pub writer_device: &'a dyn Device,
    /// The NFS server of the NFS rows.
    pub nfs_server: Option<&'a Server>,
    /// Starts the tool's programs under a counter, for the counting runs of `--counts`
    /// ([`super::counts`]); `None` for timed runs, whose programs start as they are.
    pub launcher: Option<&'a Launcher>,
    /// The apt scenarios' chroots, one per apt scenario benched, prepared once per bench run.
    pub apt: &'a [Prepared],
}

impl<'a> Context<'a> {
    /// The same context, its runs' programs started by `launcher`.
    pub fn with_launcher<'b>(&'b self, launcher: &'b Launcher) -> Context<'b> {
        Context {
            engine: self.engine,
            site: self.site.clone(),
            scratch: self.scratch,
            writer_device: self.writer_device,
            nfs_server: self.nfs_server,
            launcher: Some(launcher),
            apt: self.apt,
        }
    }

    /// The prepared chroot of the apt scenario `scenario`, or why there is none.
    fn prepared(&self, scenario: Scenario) -> std::result::Result<&'a Prepared, String> {
        let workload = AptWorkload::of(scenario);
        self.apt
            .iter()
            .find(|p| Some(p.workload()) == workload)
            .ok_or_else(|| format!("the {} chroot was not prepared", scenario.name()))
    }

    /// A command for `program`, under the counter when there is one.
    fn command(&self, program: &OsStr) -> Command {
        match self.launcher {
            Some(launcher) => launcher.command(program),
            None => Command::new(program),
        }
    }
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
    /// The minbase scenario's second figure: `stable_s`, then `chroot ROOT dpkg --configure -a`
    /// and a syncfs: until the configured system was stable.
    pub configured_s: Option<f64>,
    /// The mount options `/proc/self/mountinfo` reported after mounting.
    pub applied_options: Option<String>,
    /// Our engine's own report (syscalls, phases, peak RSS); empty for peers.
    pub engine: Option<engine::Report>,
    /// What reached the device until the data was stable, when the device counts.
    pub device: Option<DeviceUsage>,
    /// What reached the device until the unpacker exited.
    pub device_at_exit: Option<DeviceUsage>,
    /// The busy scenarios' background writer while the unpacker ran.
    pub writer: Option<WriterUsage>,
    /// NFS rows: the client's RPCs per operation until the data was stable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs: Option<RpcCounts>,
    /// The apt-local scenario: apt's dpkg calls, their time by kind, the peak RSS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apt: Option<AptFigures>,
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

/// Runs `tool` once on `row`, numbered `run` within its cell; for `busy-elsewhere`, on a fresh
/// filesystem of the writer's own beside the run's, taken down afterwards whatever happened.
pub fn run_once(
    ctx: &Context,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    run: u64,
) -> Result<RunRecord> {
    if row.scenario.writer() != Some(WriterSite::OtherFilesystem) {
        return run_on_site(ctx, workload, row, tool, run, None);
    }
    let dir = ctx.scratch.join("busy-elsewhere");
    let made = std::fs::create_dir_all(&dir).and_then(|()| {
        let size = super::busy::SPAN.saturating_add(FS_SLACK_BYTES).max(MIN_FS_BYTES);
        ctx.writer_device.fresh_filesystem("ext4", "defaults", size, &dir)
    });
    let other = match made {
        Ok(fs) => fs,
        Err(e) => {
            return Ok(RunRecord::failed(run, None, format!("making the busy writer's ext4: {e}")))
        }
    };
    let record = run_on_site(ctx, workload, row, tool, run, Some(&other));
    let mount = other.path().to_path_buf();
    other.teardown().map_err(|source| Error::Teardown { path: mount, source })?;
    record
}

/// [`run_once`] on the run's own filesystem or directory; `other` is the busy writer's.
fn run_on_site(
    ctx: &Context,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    run: u64,
    other: Option<&DeviceFs>,
) -> Result<RunRecord> {
    match &ctx.site {
        Site::Device(device) => {
            let same = if row.scenario.writer() == Some(WriterSite::SameFilesystem) {
                super::busy::SPAN
            } else {
                0
            };
            let apt_space = ctx.prepared(row.scenario).ok().and_then(Prepared::space_needed);
            let size = apt_space
                .unwrap_or_else(|| workload.space_needed())
                .saturating_add(same)
                .saturating_add(FS_SLACK_BYTES)
                .max(MIN_FS_BYTES);
            let (fstype, options) = match &row.nfs {
                Some(nfs) => (&nfs.backing.filesystem, &nfs.backing.options),
                None => (&row.filesystem, &row.mount_options),
            };
            let fs = match device.fresh_filesystem(fstype, options, size, ctx.scratch) {
                Ok(fs) => fs,
                Err(e) => {
                    let why = format!("making {fstype} mounted with '{options}': {e}");
                    return Ok(RunRecord::failed(run, None, why));
                }
            };
            let counters = || fs.counters();
            let record = match &row.nfs {
                None => measure(
                    ctx,
                    &Place { base: fs.path(), counters: &counters, other, nfs: None },
                    workload,
                    row,
                    tool,
                    run,
                ),
                Some(nfs) => match NfsMount::mount(
                    fs.path(),
                    nfs.export,
                    &row.mount_options,
                    &ctx.scratch.join("nfs"),
                ) {
                    Ok(client) => {
                        let place = Place {
                            base: client.path(),
                            counters: &counters,
                            other,
                            nfs: Some(&client),
                        };
                        let record = measure(ctx, &place, workload, row, tool, run);
                        let mount = client.path().to_path_buf();
                        client
                            .teardown(ctx.nfs_server, fs.path())
                            .map_err(|source| Error::Teardown { path: mount, source })?;
                        record
                    }
                    Err(e) => {
                        // The failed mount withdrew its export; nfsd may still hold it.
                        ctx.nfs_server
                            .map(|s| s.unmount_backing(fs.path()))
                            .transpose()
                            .map_err(Error::io(fs.path()))?;
                        let why = format!(
                            "mounting {fstype} over NFS ({}) with '{}': {e}",
                            nfs.export.name(),
                            row.mount_options
                        );
                        Ok(RunRecord::failed(run, None, why))
                    }
                },
            };
            let mount = fs.path().to_path_buf();
            fs.teardown().map_err(|source| Error::Teardown { path: mount, source })?;
            record
        }
        Site::Dir(dir) => {
            let base = dir.join(format!("unpack-bench.{}.run", std::process::id()));
            std::fs::create_dir(&base).map_err(Error::io(&base))?;
            let record = measure(
                ctx,
                &Place { base: &base, counters: &|| None, other, nfs: None },
                workload,
                row,
                tool,
                run,
            );
            std::fs::remove_dir_all(&base).map_err(Error::io(&base))?;
            record
        }
    }
}

type CounterRead<'a> = &'a dyn Fn() -> Option<Counters>;

/// Where one run happens.
struct Place<'a> {
    /// A fresh mount or directory.
    base: &'a Path,
    /// Its device's counters, if it counts.
    counters: CounterRead<'a>,
    /// The `busy-elsewhere` writer's filesystem.
    other: Option<&'a DeviceFs>,
    /// The NFS client's mount, when `base` is one: its RPCs are counted.
    nfs: Option<&'a NfsMount>,
}

/// Makes the run's `root` as its scenario and tool start from; the packages to give the tool,
/// or why the run failed before it started.
fn prepare(
    ctx: &Context,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    root: &Path,
) -> std::result::Result<Vec<PathBuf>, String> {
    std::fs::create_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    row.scenario
        .prepare(ctx.engine, &workload.old_packages, root)
        .map_err(|e| format!("preparing the {} scenario: {e}", row.scenario.name()))?;
    if let Tool::Peer(peer) = tool {
        peer.prepare_root(root)
            .map_err(|e| format!("preparing {} for {}: {e}", root.display(), peer.name()))?;
    }
    if row.scenario == Scenario::Minbase {
        return minbase::prepare(tool, workload, root)
            .map_err(|e| format!("preparing the minbase root for {}: {e}", tool.name()));
    }
    if row.scenario.runs_apt() {
        let prepared = ctx.prepared(row.scenario)?;
        prepared.copy_to(root).map_err(|e| format!("{}: {e}", root.display()))?;
        return Ok(Vec::new());
    }
    Ok(workload.package_paths())
}

/// The run proper, in `place.base`.
fn measure(
    ctx: &Context,
    place: &Place,
    workload: &Workload,
    row: &Row,
    tool: &Tool,
    run: u64,
) -> Result<RunRecord> {
    let (base, counters) = (place.base, place.counters);
    let applied = mountinfo::for_path(base).map(|m| m.options).ok();
    let fail = |why: String| Ok(RunRecord::failed(run, applied.clone(), why));
    let root = base.join("root");
    let packages = match prepare(ctx, workload, row, tool, &root) {
        Ok(packages) => packages,
        Err(why) => return fail(why),
    };
    let is_minbase = row.scenario == Scenario::Minbase;
    let fs_fd =
        rustix::fs::open(base, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::io(base)(e.into()))?;
    row.cache.settle()?;
    let writer_dir = match row.scenario.writer() {
        Some(WriterSite::SameFilesystem) => Some(base),
        Some(WriterSite::OtherFilesystem) => place.other.map(DeviceFs::path),
        None => None,
    };
    let background = match writer_dir.map(|dir| Background::start(dir, place.other)) {
        Some(Err(e)) => return fail(format!("starting the busy writer: {e}")),
        started => started.and_then(|b| b.ok()),
    };
    let before = counters();
    let rpcs_before = place.nfs.map(NfsMount::rpc_counts);

    let start = Instant::now();
    let rss = ctx.scratch.join("apt.rss");
    let output = match tool {
        _ if is_minbase => minbase::run(ctx.engine, &|p| ctx.command(p), tool, &packages, &root),
        _ if row.scenario.runs_apt() => match ctx.prepared(row.scenario) {
            Ok(prepared) => prepared.run(&|p| ctx.command(p), tool, &root, &rss),
            Err(why) => Err(std::io::Error::other(why)),
        },
        Tool::Strategy(strategy) => ctx
            .engine
            .unpack_command(&|p| ctx.command(p), strategy, &packages, &root)
            .stdin(Stdio::null())
            .output(),
        Tool::Peer(peer) => peer.run(&|p| ctx.command(p), &packages, &root),
    };
    let exit_s = start.elapsed().as_secs_f64();
    let at_exit = counters();
    let writer = background.map(|b| b.finish(exit_s));
    let synced = rustix::fs::syncfs(&fs_fd);
    let stable_s = start.elapsed().as_secs_f64();
    let after = counters();
    let rpcs = match (rpcs_before, place.nfs.map(NfsMount::rpc_counts)) {
        (Some(Ok(b)), Some(Ok(a))) => Some(Ok(a.since(&b))),
        (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
        _ => None,
    };

    let output = match output {
        Ok(output) => output,
        Err(e) => return fail(format!("cannot run {}: {e}", tool.name())),
    };
    let configured =
        (is_minbase && output.status.success() && synced.is_ok()).then(|| configure(&root, &fs_fd));
    let mut record = RunRecord {
        run,
        exit_code: output.status.code(),
        exit_s: Some(exit_s),
        stable_s: Some(stable_s),
        configured_s: configured.as_ref().and_then(|c| c.as_ref().ok()).map(|s| stable_s + s),
        applied_options: applied.clone(),
        device: before.zip(after).map(|(b, a)| a.since(&b).into()),
        device_at_exit: before.zip(at_exit).map(|(b, a)| a.since(&b).into()),
        writer: writer.as_ref().and_then(|w| w.as_ref().ok()).copied(),
        rpcs: rpcs.as_ref().and_then(|r| r.as_ref().ok()).cloned(),
        ..RunRecord::default()
    };
    record.error = if !output.status.success() {
        Some(failure_text(&output))
    } else if let Some(Err(e)) = writer {
        Some(format!("the busy writer: {e}"))
    } else if let Err(e) = synced {
        Some(format!("syncfs of {} after the run: {e}", base.display()))
    } else if let Some(Err(e)) = rpcs {
        Some(format!("counting the NFS client's RPCs: {e}"))
    } else if let Some(Err(e)) = configured {
        Some(e)
    } else if row.scenario.runs_apt() {
        apt_figures(ctx, row.scenario, tool, &root, &rss, &mut record).err()
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

/// An apt scenario's figures of a run that succeeded, into `record`: its dpkg calls
/// from the timer's log in `root`, its peak RSS from `rss`; then (untimed, after the data was
/// stable) the strategy of the front end's calls held to `tool`'s, and its tree and database
/// to the reference's.
fn apt_figures(
    ctx: &Context,
    scenario: Scenario,
    tool: &Tool,
    root: &Path,
    rss: &Path,
    record: &mut RunRecord,
) -> std::result::Result<(), String> {
    let log = root.join(apt_scenario::CALL_LOG.trim_start_matches('/'));
    record.apt = Some(AptFigures::read(&log, rss)?);
    let dpkg_log = root.join(apt_scenario::DPKG_LOG.trim_start_matches('/'));
    let text =
        std::fs::read_to_string(&dpkg_log).map_err(|e| format!("{}: {e}", dpkg_log.display()))?;
    apt_scenario::check_strategy(tool, &text)?;
    ctx.prepared(scenario)?.check(root)
}

/// The minbase scenario's second step, timed: `chroot ROOT dpkg --configure -a`, which must exit
/// 0, and a syncfs of the filesystem `fs_fd`; the seconds it took, or why it failed.
fn configure(root: &Path, fs_fd: &rustix::fd::OwnedFd) -> std::result::Result<f64, String> {
    let start = Instant::now();
    let output = minbase::configure(root);
    let synced = rustix::fs::syncfs(fs_fd);
    let seconds = start.elapsed().as_secs_f64();
    match output {
        Err(e) => Err(format!("cannot run chroot ROOT dpkg --configure -a: {e}")),
        Ok(out) if !out.status.success() => {
            Err(format!("chroot ROOT dpkg --configure -a: {}", failure_text(&out)))
        }
        Ok(_) => {
            synced.map(|()| seconds).map_err(|e| format!("syncfs after dpkg --configure -a: {e}"))
        }
    }
}

/// The busy scenarios' writer during one run, from just before the unpacker's spawn.
struct Background<'a> {
    writer: Writer,
    /// The writer's own filesystem (`busy-elsewhere`), whose device may count.
    other: Option<&'a DeviceFs>,
    written: u64,
    counters: Option<Counters>,
}

impl<'a> Background<'a> {
    /// Starts the writer in `dir` and returns once it has its lead.
    fn start(dir: &Path, other: Option<&'a DeviceFs>) -> std::io::Result<Background<'a>> {
        let writer = Writer::start(dir)?;
        Ok(Background {
            written: writer.written(),
            counters: other.and_then(DeviceFs::counters),
            writer,
            other,
        })
    }

    /// What it did since [`Background::start`], over the unpacker's `seconds`; stops it.
    fn finish(self, seconds: f64) -> std::io::Result<WriterUsage> {
        let bytes = self.writer.written() - self.written;
        let device = self
            .counters
            .zip(self.other.and_then(DeviceFs::counters))
            .map(|(b, a)| a.since(&b).into());
        self.writer.stop()?;
        Ok(WriterUsage::new(bytes, seconds, device))
    }
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
        let out = Command::new("sh")
            .args(["-c", "echo one >&2; echo two >&2; echo three >&2; echo four >&2; exit 3"])
            .output()
            .unwrap();
        assert_eq!(failure_text(&out), "exit status 3: two | three | four");
        let out = Command::new("sh").args(["-c", "kill -9 $$"]).output().unwrap();
        assert_eq!(failure_text(&out), "killed by signal 9");
    }
}
