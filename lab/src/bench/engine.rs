//! Our own unpacker, driven as a child process: the `unpack` binary next to `unpack-bench`.
//!
//! Why a child and not a library call: the bench compares it with dpkg and tar, which are
//! processes, so ours must pay the same exec and exit, and its peak RSS must be its own. This
//! module knows the engine's command line and the part of its `--json` report the matrix keeps;
//! it never reimplements anything the engine does. (The list of strategies comes from the
//! library's [`unpack::durability::ALL`], which the binary is built from.)

use super::{command, Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use unpack::fs::syscalls::{FlushLatencies, SyscallCounts};
use unpack::report::Phases;

/// The `unpack` binary.
#[derive(Debug, Clone)]
pub struct Engine {
    path: PathBuf,
}

/// The part of `unpack --json` the matrix keeps, in the engine's own types.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub phases: Phases,
    pub syscalls: SyscallCounts,
    /// Absent from an engine older than the latency record.
    #[serde(default)]
    pub flush_latency: FlushLatencies,
    pub peak_rss_bytes: u64,
}

impl Report {
    /// Parses the engine's `--json` stdout.
    pub fn parse(stdout: &[u8]) -> std::result::Result<Report, String> {
        serde_json::from_slice(stdout)
            .map_err(|e| format!("unreadable --json report from unpack: {e}"))
    }
}

impl Engine {
    /// The `unpack` binary: the one in the directory of the running executable (a build tree,
    /// or /usr/bin of the Debian package), else the first on PATH (the lab installed apart from
    /// the engine).
    pub fn find() -> Result<Engine> {
        let exe = std::env::current_exe().map_err(Error::io("/proc/self/exe"))?;
        let beside = exe.with_file_name("unpack");
        let on_path = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
        match std::iter::once(beside.clone())
            .chain(on_path.map(|dir| dir.join("unpack")))
            .find(|p| p.is_file())
        {
            Some(path) => Ok(Engine { path }),
            None => Err(Error::MissingEngine { path: beside }),
        }
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The measured command: unpack `packages` into `root` with `strategy`, reporting JSON; the
    /// binary started by `launch` (`Command::new`, or under a counter).
    pub fn unpack_command(
        &self,
        launch: &dyn Fn(&OsStr) -> Command,
        strategy: &str,
        packages: &[PathBuf],
        root: &Path,
    ) -> Command {
        self.measured(launch, &[], strategy, packages, root)
    }

    /// The measured command of the minbase scenario: `unpack --bootstrap` of `packages` into
    /// the empty `root` (both of its stages), reporting JSON, started by `launch`.
    pub fn bootstrap_command(
        &self,
        launch: &dyn Fn(&OsStr) -> Command,
        strategy: &str,
        packages: &[PathBuf],
        root: &Path,
    ) -> Command {
        self.measured(launch, &["--bootstrap"], strategy, packages, root)
    }

    fn measured(
        &self,
        launch: &dyn Fn(&OsStr) -> Command,
        mode: &[&str],
        strategy: &str,
        packages: &[PathBuf],
        root: &Path,
    ) -> Command {
        let mut cmd = launch(self.path.as_os_str());
        cmd.arg("--json")
            .arg("--quiet")
            .args(mode)
            .arg("--strategy")
            .arg(strategy)
            .args(packages)
            .arg(root);
        cmd
    }

    /// Installs `packages` into `root` without any flushing: the untimed preparation of the
    /// upgrade scenario (the caller makes it durable with one syncfs).
    pub fn install_unsafely(&self, packages: &[PathBuf], root: &Path) -> Result<()> {
        let mut cmd = Command::new(&self.path);
        cmd.arg("--quiet").arg("--strategy").arg("none").args(packages).arg(root);
        command::output(&mut cmd, root).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_engine_writes() {
        let theirs = unpack::report::Report {
            packages: Vec::new(),
            strategy: "fsync".into(),
            root: "/r".into(),
            filesystem: None,
            phases: unpack::report::Phases {
                extract_s: 0.5,
                barrier_s: 0.25,
                rename_s: 0.125,
                dirsync_s: 0.0625,
                total_s: 1.0,
            },
            syscalls: unpack::fs::syscalls::SyscallCounts {
                fsync: 2,
                fdatasync: 3,
                sync: 4,
                syncfs: 5,
                syncfs_early: 8,
                sync_file_range: 6,
                rename: 7,
            },
            flush_latency: unpack::fs::syscalls::FlushLatencies {
                all: unpack::fs::syscalls::LatencySummary {
                    count: 3,
                    total_s: 0.03,
                    p50_s: Some(0.01),
                    p99_s: Some(0.0125),
                    max_s: Some(0.0125),
                },
                ..Default::default()
            },
            peak_rss_bytes: 4096,
            recovered: None,
            first_stage: None,
        };
        let ours = Report::parse(serde_json::to_string(&theirs).unwrap().as_bytes()).unwrap();
        let s = &ours.syscalls;
        assert_eq!(
            [s.fsync, s.fdatasync, s.sync, s.syncfs, s.syncfs_early, s.sync_file_range, s.rename],
            [2, 3, 4, 5, 8, 6, 7]
        );
        assert_eq!(ours.phases.barrier_s, 0.25);
        assert_eq!(ours.phases.total_s, 1.0);
        assert_eq!(ours.peak_rss_bytes, 4096);
        assert_eq!(ours.flush_latency.all.p99_s, Some(0.0125));
    }

    #[test]
    fn a_truncated_report_is_an_error_not_a_panic() {
        assert!(Report::parse(br#"{"phases":{"#).is_err());
        assert!(Report::parse(b"").is_err());
    }
}
