//! Counting runs (`unpack-bench --counts`): for every cell, apart from its timed runs, one run
//! under strace that tallies the system calls of the tool and all its children by kind, and one
//! run that counts the instructions they retire; both are divided by the entries the workload's
//! archives hold.
//!
//! Why counts: the times of a shared machine drift, the numbers of instructions and of system
//! calls do not, and they explain a time (on NFS every call that reaches the server is a round
//! trip). Why runs of their own: strace and valgrind slow a run many times over, so a counting
//! run is never timed and a timed run is never traced.
//!
//! The source of the instruction count is chosen once per matrix: `perf stat` where
//! perf_event_open offers a hardware instructions counter (user and kernel instructions apart),
//! else valgrind's cachegrind with `--cache-sim=no` (user-space instructions only: what the
//! kernel executes for the tool is not in that figure). The tables name the source. This module
//! never counts the bench's own work: only the programs a tool starts, each from its exec on,
//! with every process they fork or exec.

use super::{command, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the instruction counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `perf stat -e instructions:u,instructions:k`: the CPU's own counter, kernel included.
    Perf,
    /// valgrind's cachegrind, `--cache-sim=no`: user-space instructions only.
    Valgrind,
}

impl Source {
    /// The source this machine offers, checked once: perf when its hardware instructions
    /// counter counts (`perf stat` says `<not supported>` on machines without one, as in most
    /// virtual machines), else valgrind. strace is needed either way.
    pub fn detect() -> Result<Source> {
        command::require("strace", "strace")?;
        if hardware_counter() {
            return Ok(Source::Perf);
        }
        command::require("valgrind", "valgrind")?;
        Ok(Source::Valgrind)
    }

    /// Its name in `counts.csv`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Perf => "perf",
            Source::Valgrind => "valgrind",
        }
    }

    /// What the instruction figures are, for the tables.
    pub fn describe(self) -> &'static str {
        match self {
            Source::Perf => "instructions retired, user + kernel (perf stat, the CPU's hardware counter)",
            Source::Valgrind => {
                "user-space instructions retired (valgrind's cachegrind, --cache-sim=no; kernel instructions are not in \
                 this figure: this machine offers no hardware instructions counter)"
            }
        }
    }
}

/// True when `perf stat` counts user-space instructions of a child here.
fn hardware_counter() -> bool {
    if command::find_in_path("perf").is_none() {
        return false;
    }
    let out =
        Command::new("perf").args(["stat", "-x,", "-e", "instructions:u", "--", "true"]).output();
    out.is_ok_and(|o| {
        o.status.success()
            && perf_instructions(&String::from_utf8_lossy(&o.stderr)).0.is_some_and(|n| n > 0)
    })
}

/// What one counting run counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Syscalls,
    Instructions(Source),
}

impl Count {
    pub fn name(self) -> &'static str {
        match self {
            Count::Syscalls => "the system call count",
            Count::Instructions(_) => "the instruction count",
        }
    }
}

/// Starts every program of one counting run under its counter, each writing its tally into a
/// file of its own in `dir` (a tool may start several: `tar` is dpkg-deb and tar).
#[derive(Debug)]
pub struct Launcher {
    count: Count,
    dir: PathBuf,
    started: AtomicUsize,
}

impl Launcher {
    /// A launcher writing into `dir`, which must exist and be empty.
    pub fn new(count: Count, dir: &Path) -> Launcher {
        Launcher { count, dir: dir.to_path_buf(), started: AtomicUsize::new(0) }
    }

    /// `program` under the counter; arguments added to the command go to `program`.
    pub fn command(&self, program: &OsStr) -> Command {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let mut cmd;
        match self.count {
            Count::Syscalls => {
                cmd = Command::new("strace");
                cmd.args(["-f", "-qq", "-c", "-U", "name,calls", "-o"])
                    .arg(self.dir.join(format!("strace.{n}")))
                    .arg("--");
            }
            Count::Instructions(Source::Perf) => {
                cmd = Command::new("perf");
                cmd.args(["stat", "-x,", "-e", "instructions:u,instructions:k", "-o"])
                    .arg(self.dir.join(format!("perf.{n}")))
                    .arg("--");
            }
            Count::Instructions(Source::Valgrind) => {
                // One output file per process (%p): forks and execs of the tool each write
                // their own, and valgrind's messages stay out of the tool's stderr.
                let mut out = std::ffi::OsString::from("--cachegrind-out-file=");
                out.push(self.dir.join("cachegrind.%p"));
                let mut log = std::ffi::OsString::from("--log-file=");
                log.push(self.dir.join("valgrind.%p"));
                cmd = Command::new("valgrind");
                cmd.args(["--tool=cachegrind", "--cache-sim=no", "--trace-children=yes"])
                    .arg(out)
                    .arg(log);
            }
        }
        cmd.arg(program);
        cmd
    }

    /// Adds what the counters wrote to `counts`.
    pub fn read_into(&self, counts: &mut Counts) -> std::result::Result<(), String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("{}: {e}", self.dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        let prefix = match self.count {
            Count::Syscalls => "strace.",
            Count::Instructions(Source::Perf) => "perf.",
            Count::Instructions(Source::Valgrind) => "cachegrind.",
        };
        let mine: Vec<&PathBuf> = files
            .iter()
            .filter(|p| {
                p.file_name().and_then(OsStr::to_str).is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        if mine.is_empty() {
            return Err(format!(
                "{}: no {prefix}* file: the counter wrote nothing",
                self.dir.display()
            ));
        }
        for path in mine {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let unreadable = || {
                format!(
                    "{}: not the counter's output: {}",
                    path.display(),
                    text.lines().next().unwrap_or("")
                )
            };
            match self.count {
                Count::Syscalls => {
                    let calls = counts.syscalls.get_or_insert_with(BTreeMap::new);
                    for (name, n) in strace_summary(&text).ok_or_else(unreadable)? {
                        *calls.entry(name).or_default() += n;
                    }
                }
                Count::Instructions(Source::Perf) => {
                    let (user, kernel) = perf_instructions(&text);
                    let user = user.ok_or_else(unreadable)?;
                    *counts.user_instructions.get_or_insert(0) += user;
                    if let Some(kernel) = kernel {
                        *counts.kernel_instructions.get_or_insert(0) += kernel;
                    }
                }
                Count::Instructions(Source::Valgrind) => {
                    *counts.user_instructions.get_or_insert(0) +=
                        cachegrind_summary(&text).ok_or_else(unreadable)?;
                }
            }
        }
        Ok(())
    }
}

/// A cell's counting runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counts {
    /// Entries the workload's archives hold (lines of `dpkg-deb --contents`, `./` included):
    /// the divisor of every per-entry figure.
    pub entries: u64,
    pub source: Source,
    /// Instructions the tool's processes retired in user space.
    pub user_instructions: Option<u64>,
    /// Instructions they retired in the kernel, where the source counts them (perf).
    pub kernel_instructions: Option<u64>,
    /// System calls of all the tool's processes and threads, by name, as strace names them.
    pub syscalls: Option<BTreeMap<String, u64>>,
    /// Why a counting run failed; its figures are then absent, never partial.
    pub errors: Vec<String>,
}

impl Counts {
    pub fn new(entries: u64, source: Source) -> Counts {
        Counts {
            entries,
            source,
            user_instructions: None,
            kernel_instructions: None,
            syscalls: None,
            errors: Vec::new(),
        }
    }

    /// Instructions (user, and kernel where counted) per entry.
    pub fn instructions_per_entry(&self) -> Option<(f64, Option<f64>)> {
        let user = self.per_entry(self.user_instructions?)?;
        Some((user, self.kernel_instructions.and_then(|k| self.per_entry(k))))
    }

    /// All system calls per entry.
    pub fn syscalls_per_entry(&self) -> Option<f64> {
        self.per_entry(self.syscalls.as_ref()?.values().sum())
    }

    /// `count` divided by the entries.
    pub fn per_entry(&self, count: u64) -> Option<f64> {
        (self.entries > 0).then(|| count as f64 / self.entries as f64)
    }
}

/// strace's `-c -U name,calls` table: each system call and its count, the total line left out.
fn strace_summary(text: &str) -> Option<Vec<(String, u64)>> {
    let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with("syscall"));
    lines.next()?;
    let calls = lines
        .filter(|l| !l.starts_with('-'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (name, n) = (it.next()?, it.next()?.parse::<u64>().ok()?);
            (name != "total").then(|| (name.to_string(), n))
        })
        .collect();
    Some(calls)
}

/// The `summary:` line of a cachegrind output file (its only event is `Ir` with
/// `--cache-sim=no`).
fn cachegrind_summary(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
}

/// `perf stat -x,` lines of `instructions:u` and `instructions:k`: (user, kernel), each absent
/// when perf could not count it.
fn perf_instructions(text: &str) -> (Option<u64>, Option<u64>) {
    let value = |event: &str| {
        text.lines().find_map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            (fields.get(2).is_some_and(|e| *e == event || e.starts_with(&format!("{event}/"))))
                .then(|| fields[0].parse().ok())
                .flatten()
        })
    };
    (value("instructions:u"), value("instructions:k"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_tables_sum_by_name_without_the_total() {
        let text = "syscall            calls\n------------------ --------\nopenat                 120\nwrite                  7\nfsync                  3\n------------------ --------\ntotal                  130\n";
        assert_eq!(
            strace_summary(text).unwrap(),
            [("openat".to_string(), 120), ("write".to_string(), 7), ("fsync".to_string(), 3)]
        );
        assert_eq!(strace_summary("strace: exec: No such file or directory\n"), None);
    }

    #[test]
    fn cachegrind_and_perf_outputs_give_their_counts() {
        let cg = "desc: I1 cache: none\ncmd: /usr/bin/tar -x\nevents: Ir\nfl=x.c\n1 5\nsummary: 1234567\n";
        assert_eq!(cachegrind_summary(cg), Some(1234567));
        assert_eq!(cachegrind_summary("events: Ir\n"), None);
        let perf = "# started on Wed Dec  2 00:00:00 2026\n\n4100213,,instructions:u,2001,100.00,,\n915322,,instructions:k,2001,100.00,,\n";
        assert_eq!(perf_instructions(perf), (Some(4100213), Some(915322)));
        let unsupported = "<not supported>,,instructions:u,0,100.00,,\n<not supported>,,instructions:k,0,100.00,,\n";
        assert_eq!(perf_instructions(unsupported), (None, None));
    }

    #[test]
    fn per_entry_figures_divide_by_the_entries_and_never_by_zero() {
        let mut c = Counts::new(4, Source::Valgrind);
        c.user_instructions = Some(1000);
        c.syscalls = Some(BTreeMap::from([("openat".to_string(), 6), ("write".to_string(), 2)]));
        assert_eq!(c.instructions_per_entry(), Some((250.0, None)));
        assert_eq!(c.syscalls_per_entry(), Some(2.0));
        c.entries = 0;
        assert_eq!(c.syscalls_per_entry(), None);
    }

    #[test]
    fn every_program_of_a_tool_gets_its_own_tally_file() {
        let dir = Path::new("/counts");
        let strace = Launcher::new(Count::Syscalls, dir);
        let args = |c: &Command| {
            c.get_args().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>()
        };
        let (first, second) = (strace.command("dpkg-deb".as_ref()), strace.command("tar".as_ref()));
        assert_eq!(first.get_program(), "strace");
        assert!(
            args(&first).ends_with(&[
                "/counts/strace.0".to_string(),
                "--".to_string(),
                "dpkg-deb".to_string()
            ]),
            "{first:?}"
        );
        assert!(args(&second).contains(&"/counts/strace.1".to_string()), "{second:?}");
        let vg = Launcher::new(Count::Instructions(Source::Valgrind), dir).command("dpkg".as_ref());
        assert!(
            args(&vg).contains(&"--cachegrind-out-file=/counts/cachegrind.%p".to_string()),
            "{vg:?}"
        );
        assert_eq!(args(&vg).last().map(String::as_str), Some("dpkg"));
    }
}
