//! Our own unpacker, driven as a child process: the `unpack` binary next to `unpack-bench`.
//!
//! Why a child and not a library call: the bench compares it with dpkg and tar, which are
//! processes, so ours must pay the same exec and exit, and its peak RSS must be its own. This
//! module knows the engine's command line and the part of its `--json` report the matrix keeps;
//! it never reimplements anything the engine does (even the list of strategies is asked from
//! the engine).

use super::{command, Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `unpack` binary.
#[derive(Debug, Clone)]
pub struct Engine {
    path: PathBuf,
}

/// System calls the engine made, as it counts them itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Syscalls {
    pub fsync: u64,
    pub fdatasync: u64,
    pub sync: u64,
    pub syncfs: u64,
    pub sync_file_range: u64,
    pub rename: u64,
}

/// Where the engine's time went, as it measures it itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub extract_s: f64,
    pub barrier_s: f64,
    pub rename_s: f64,
    pub dirsync_s: f64,
    pub total_s: f64,
}

/// The part of `unpack --json` the matrix keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub phases: Phases,
    pub syscalls: Syscalls,
    pub peak_rss_bytes: u64,
}

impl Report {
    /// Parses the engine's `--json` stdout.
    pub fn parse(stdout: &[u8]) -> std::result::Result<Report, String> {
        serde_json::from_slice(stdout).map_err(|e| format!("unreadable --json report from unpack: {e}"))
    }
}

impl Engine {
    /// The `unpack` binary in the directory of the running executable.
    pub fn next_to_current_exe() -> Result<Engine> {
        let exe = std::env::current_exe().map_err(Error::io("/proc/self/exe"))?;
        let path = exe.with_file_name("unpack");
        if !path.is_file() {
            return Err(Error::MissingEngine { path });
        }
        Ok(Engine { path })
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The strategy names the engine accepts, in its order (`unpack --list-strategies`: the
    /// first word of every line).
    pub fn strategies(&self) -> Result<Vec<String>> {
        let out = command::output(Command::new(&self.path).arg("--list-strategies"), &self.path)?;
        Ok(parse_strategy_list(&out))
    }

    /// The measured command: unpack `packages` into `root` with `strategy`, reporting JSON.
    pub fn unpack_command(&self, strategy: &str, packages: &[PathBuf], root: &Path) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.arg("--json").arg("--quiet").arg("--strategy").arg(strategy).args(packages).arg(root);
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

fn parse_strategy_list(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(|word| word.trim_end_matches([':', ',']).to_string())
        .filter(|word| !word.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_report_and_ignores_what_it_does_not_keep() {
        let json = br#"{"packages":[{"name":"a","version":"1","architecture":"all","entries":3,"files":2,"bytes":10}],
            "strategy":"fsync","root":"/r","filesystem":{"type":"ext4","source":"/dev/loop0","options":"rw"},
            "phases":{"extract_s":0.5,"barrier_s":0.25,"rename_s":0.125,"dirsync_s":0.0625,"total_s":1.0},
            "syscalls":{"fsync":2,"fdatasync":0,"sync":0,"syncfs":0,"sync_file_range":0,"rename":2},
            "peak_rss_bytes":4096}"#;
        let r = Report::parse(json).unwrap();
        assert_eq!(r.syscalls.fsync, 2);
        assert_eq!(r.syscalls.rename, 2);
        assert_eq!(r.phases.barrier_s, 0.25);
        assert_eq!(r.peak_rss_bytes, 4096);
    }

    #[test]
    fn a_truncated_report_is_an_error_not_a_panic() {
        assert!(Report::parse(br#"{"phases":{"#).is_err());
        assert!(Report::parse(b"").is_err());
    }

    #[test]
    fn strategy_list_takes_the_first_word_of_each_line() {
        let out = "none       no flushing\nfsync:  fsync each file\n\nbatch (alias sync)\n";
        assert_eq!(parse_strategy_list(out), ["none", "fsync", "batch"]);
    }
}
