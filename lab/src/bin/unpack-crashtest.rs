//! `unpack-crashtest [OPTIONS] PACKAGE`: parse, call [`unpack_lab::crash`], print or write the
//! matrix. Exit status (the lab's table, the same in `unpack-bench`): 0 every cell ran and
//! checked crash states (violations are results, not failures), 3 the matrix was made but some
//! cells could not be run, 1 the test itself failed, 2 usage (including not being root),
//! 128 + signal when stopped by one. It must never exit 0 over a cell that checked nothing.

use anyhow::Context as _;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use unpack::cli::Invocation;
use unpack_lab::crash::matrix::Scenario;
use unpack_lab::crash::{self, report};

const AFTER_HELP: &str = "\
A crash state is what the disk holds after a power cut at some moment of the run: everything up
to a flush, plus any subset of the writes after it (a device may persist unflushed writes in
any order), from the moment the old version was synced to the end of the settle time. Each
state is rebuilt from the log of the virtual disk, mounted (the journal replays), checked and
fsck'ed. Invariants, per path of the package:
  1. old complete content or new complete content (zero-length, torn, lost-old otherwise);
  2. in a state a crash after the unpacker's exit can leave: new content (not-durable);
  3. after `unpack --recover ROOT` on the state: each package entirely old or entirely new
     (mixed, recover-failed);
  4. with dpkg's database (upgrade-db), after recovery: the package registered entirely as
     one version, the tree that version's as dpkg leaves it (conffiles as NAME.dpkg-new), and
     `dpkg --audit` listing it as unpacked or nothing (half-registered, db-tree, db-audit);
     for bootstrap, after recovery: the root entirely at one of its stages in order (nothing,
     layout, first stage, second stage: mixed otherwise), the status listing no package or
     both as unpacked with their info files (half-registered), and where it lists none,
     `unpack --bootstrap` again finishing the system (redo-failed);
     for apt, after recovery, per package: dpkg's status (dpkg-query in the chroot) at a
     place an upgrade passes through, version 1 or 2, configured or unpacked, the files and
     info files that place's (half-registered, db-tree; a conffile dpkg --configure recorded
     as installed whose rename from NAME.dpkg-new was lost: conffile-lost, configure being
     the real dpkg's in every cell); a package dpkg marks reinstreq or
     half-installed counted as needing a reinstall, not as a violation; after apt's exit
     every package version 2 configured (not-durable); then `dpkg --configure -a` and, if
     dpkg or apt still see something to do, `apt-get -f install`, after which `dpkg --audit`
     says nothing, `apt-get check` passes and every package is configured with its files
     (repair-failed);
  5. the state mounts and fsck is clean (reported apart: it points at the filesystem).
The apt scenario (--scenario apt --minbase DIR, no PACKAGE): a minbase bootstrapped from DIR
(fixtures/fetch-minbase.sh DIR), the lab's apt-local set (24 packages with scripts,
conffiles, Pre-Depends, a file trigger) installed at version 1 from a file: repository in the
root, apt pointed at version 2; the recorded call is `apt-get upgrade` through unpack-dpkg
with each strategy, or with `-s dpkg`, apt with the real dpkg --refuse-unsafe-io. Each state
runs dpkg and apt in the chroot: seconds per state.
Needs root (loop devices, FUSE, mounts).";

/// The data-safety matrix: strategies x filesystems x mount options x scenario -> crash states
/// checked, files torn or lost.
#[derive(Parser, Debug)]
#[command(name = "unpack-crashtest", version, after_help = AFTER_HELP)]
struct Args {
    /// The package to unpack (none for --scenario apt alone).
    package: Option<PathBuf>,

    /// Strategies to test (comma-separated) [default: all six]; with --scenario apt alone
    /// also `dpkg`: apt with the real dpkg in its safe mode.
    #[arg(short = 's', long, value_name = "LIST", value_delimiter = ',')]
    strategies: Vec<String>,

    /// Filesystems to make: ext4, ext3, xfs, btrfs.
    #[arg(long = "fs", value_name = "LIST", value_delimiter = ',', default_value = "ext4")]
    filesystems: Vec<String>,

    /// A mount option set, one row per set; repeatable [default on ext4: defaults,
    /// noauto_da_alloc, nodelalloc, data=writeback; ext3: defaults, data=writeback; others:
    /// defaults].
    #[arg(short = 'o', long = "mount-options", value_name = "SET")]
    option_sets: Vec<String>,

    /// install (into an empty root), upgrade (over an older version the tool makes),
    /// upgrade-db (the same with a conffile and a dropped file, in a root with dpkg's database
    /// where dpkg installed and configured the older version), bootstrap (unpack --bootstrap
    /// --no-scripts of an Essential copy of the package and a package of the tool's own into an
    /// empty root), apt (apt-get upgrade of the lab's apt-local set in a minbase, through
    /// unpack-dpkg or, with -s dpkg, the real dpkg; needs --minbase).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "install,upgrade")]
    scenario: Vec<Scenario>,

    /// A minbase directory made by fixtures/fetch-minbase.sh DIR (--scenario apt).
    #[arg(long, value_name = "DIR")]
    minbase: Option<PathBuf>,

    /// Crash states checked per cell, at most.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    states: u64,

    /// Seed for the choice of states [default: random, printed].
    #[arg(long, value_name = "S")]
    seed: Option<u64>,

    /// Seconds the filesystem runs on after the unpacker returns [default: its commit interval
    /// + 2: 7 on ext3/ext4, 32 on btrfs and XFS].
    #[arg(long, value_name = "S", value_parser = seconds)]
    settle: Option<Duration>,

    /// Write crash.md, crash.csv, crash.json, violations.txt and the write logs here instead of
    /// printing the markdown table.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Rebuild state STATE of cell CELL (an id from DIR/crash.json) of the run in --out DIR into
    /// an image, and keep it.
    #[arg(long, value_name = "CELL:STATE", requires = "out")]
    replay: Option<String>,
}

fn seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|v| Duration::try_from_secs_f64(v).ok())
        .ok_or_else(|| format!("'{s}' is not a number of seconds"))
}

fn main() -> ExitCode {
    let Invocation::Run(args) = unpack::cli::parse::<Args>() else { return ExitCode::SUCCESS };
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            unpack::stderr!("unpack-crashtest: {}", unpack::error::one_line(e.as_ref()));
            ExitCode::from(
                e.downcast_ref::<crash::CrashError>().map_or(1, crash::CrashError::exit_code),
            )
        }
    }
}

/// Runs what `args` ask for; returns the exit status.
fn run(args: Args) -> anyhow::Result<u8> {
    if let Some(spec) = &args.replay {
        let out = args.out.as_deref().context("--replay needs --out")?;
        let (cell, state) = spec
            .rsplit_once(':')
            .and_then(|(c, s)| Some((c, s.parse::<usize>().ok()?)))
            .ok_or_else(|| {
                crash::CrashError::Usage(format!("--replay {spec}: expected CELL:STATE"))
            })?;
        let (image, fs) = crash::replay::replay(out, cell, state)?;
        let mount = if fs == "xfs" { " -o nouuid" } else { "" };
        let text = format!(
            "{}\nlook at it with: mount{mount} -o loop {} /mnt\n",
            image.display(),
            image.display()
        );
        unpack::cli::print(&text).context("printing the image's path on stdout")?;
        return Ok(0);
    }
    if !rustix::process::geteuid().is_root() {
        return Err(crash::CrashError::Usage(
            "must run as root (it makes loop devices, FUSE and filesystem mounts)".into(),
        )
        .into());
    }
    // Ctrl-C and SIGTERM stop the matrix with everything taken down (exit 128 + signal).
    unpack::interrupt::install();
    let unpack = unpack_lab::bench::engine::Engine::find()?.path().to_path_buf();
    let strategies = if args.strategies.is_empty() {
        unpack::durability::names().into_iter().map(String::from).collect()
    } else {
        args.strategies
    };
    let seed = args.seed.unwrap_or_else(random_seed);
    let config = crash::matrix::Config {
        package: args.package,
        minbase: args.minbase,
        unpack,
        strategies,
        filesystems: args.filesystems,
        option_sets: args.option_sets,
        scenarios: args.scenario,
        states: usize::try_from(args.states).unwrap_or(usize::MAX),
        seed,
        settle: args.settle,
        keep_logs: args.out.clone(),
    };
    unpack::stderr!("unpack-crashtest: seed {seed}");
    let matrix = crash::matrix::run(&config, &mut |cell| {
        let status = match &cell.error {
            Some(e) => format!("error: {e}"),
            None => format!(
                "{} / {} states with violations, {} filesystem failures",
                cell.states_with_violations,
                cell.states,
                cell.fs_failures.len()
            ),
        };
        let disturbed = match cell.foreign_flushes {
            0 => String::new(),
            n => {
                format!(" (disturbed: {n} flushes after the exit came from another process's sync)")
            }
        };
        unpack::stderr!("unpack-crashtest: {}: {status}{disturbed}", cell.id);
    })?;
    if !matrix.io_flusher {
        unpack::stderr!("unpack-crashtest: warning: the virtual disk ran without PR_SET_IO_FLUSHER (no CAP_SYS_RESOURCE): avoid memory pressure");
    }
    match &args.out {
        Some(dir) => {
            report::write_all(&matrix, dir)?;
            unpack::stderr!(
                "unpack-crashtest: wrote {} in {}",
                [report::MARKDOWN, report::CSV, report::JSON, report::VIOLATIONS].join(", "),
                dir.display()
            );
        }
        None => unpack::cli::print(&report::markdown(&matrix))
            .context("printing the matrix on stdout")?,
    }
    let unfinished = matrix.unfinished();
    if unfinished.is_empty() {
        return Ok(0);
    }
    let ids: Vec<&str> = unfinished.iter().map(|c| c.id.as_str()).collect();
    unpack::stderr!(
        "unpack-crashtest: {} of {} cells could not be run, the matrix is incomplete: {}",
        ids.len(),
        matrix.cells.len(),
        ids.join(", ")
    );
    Ok(unpack_lab::bench::EXIT_INCOMPLETE)
}

fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}
