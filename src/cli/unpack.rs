//! The `unpack` program: `unpack [OPTIONS] PACKAGE... ROOT`, `unpack --bootstrap ...`,
//! `unpack --recover ROOT`, `unpack --list-strategies`. It parses its command line, calls the
//! engine's API ([`crate::unpack()`], [`crate::bootstrap()`], [`recover_root()`]) and
//! prints the report; src/bin/unpack.rs only calls [`main`]. It must never reach below the
//! API: what it does, an embedder can do.

use crate::bootstrap::stages::bootstrap;
use crate::call::{recover_root, unpack};
use crate::cli::Invocation;
use crate::durability;
use crate::error::{escape, Error, Exit};
use crate::options::{Options, ScriptOutput};
use clap::Parser;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `--help`'s end: the exit codes, recovery, and the strategies (from [`durability::ALL`]).
fn after_help() -> String {
    format!(
        "\
Exit codes:
  0  ok: unpacked, and (for every strategy but none) on stable storage
  1  any other failure, including a package that conflicts with what ROOT holds, and an
     internal error (a bug to report)
  2  usage error
  3  bad, truncated or hostile package (ROOT is left unchanged)
  4  I/O error in ROOT: no space left, read-only, no permission (a device node in a package
     unpacked by a user other than root included)
  5  ROOT is locked by another unpack (see --wait)
  130, 143  stopped by SIGINT / SIGTERM before any rename (ROOT is left as it was); a signal
     during the renames lets them finish first

Every unpack first recovers an interrupted transaction in ROOT (finishing its renames if it
was in its rename phase, removing its temporary files if not); --recover does only that.

Strategies (--list-strategies for their guarantees): {}; the default is {}.",
        strategy_names(),
        durability::DEFAULT
    )
}

/// The strategies' names with their aliases: `none, fsync, batch (alias sync), ...`.
fn strategy_names() -> String {
    let name = |s: &durability::Info| match s.aliases {
        [] => s.name.to_string(),
        aliases => format!("{} (alias {})", s.name, aliases.join(", ")),
    };
    durability::ALL.iter().map(name).collect::<Vec<_>>().join(", ")
}

/// Unpack Debian packages into a root directory through temporary files and renames, with a
/// chosen durability strategy.
#[derive(Parser, Debug)]
#[command(
    name = "unpack",
    version,
    after_help = after_help(),
    override_usage = "unpack [OPTIONS] PACKAGE... ROOT\n       unpack --bootstrap [OPTIONS] PACKAGE... ROOT\n       unpack --recover ROOT\n       unpack --list-strategies"
)]
struct Cli {
    /// The packages (.deb), then the root directory to unpack them into. Several packages are
    /// one transaction with one barrier.
    #[arg(value_name = "PACKAGE... ROOT", required_unless_present = "list_strategies", num_args = 1..)]
    paths: Vec<PathBuf>,

    /// Only recover ROOT: finish or roll back a transaction a crash interrupted, then exit.
    #[arg(long)]
    recover: bool,

    /// Durability strategy (--list-strategies says what each guarantees).
    #[arg(short, long, default_value = durability::DEFAULT, value_name = "NAME")]
    strategy: String,

    /// Threads for the parallel strategy's fsyncs, 1 to 256 [default: number of CPUs].
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,

    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,

    /// No progress bar and no human report (errors are still printed; --json still prints).
    #[arg(short, long)]
    quiet: bool,

    /// Wait for another unpack's lock on ROOT (and, in database mode, dpkg's) instead of exiting
    /// with 5.
    #[arg(long)]
    wait: bool,

    /// dpkg's admin directory (inside ROOT): record the packages in dpkg's database as
    /// `dpkg --unpack` does. Without it, ROOT/var/lib/dpkg is used when it has a status file.
    #[arg(long, value_name = "DIR")]
    admindir: Option<PathBuf>,

    /// Database mode: do not run the maintainer scripts of the unpack phase (image builders
    /// that configure later); packages are still recorded `install ok unpacked`.
    #[arg(long)]
    no_scripts: bool,

    /// A base system in one call, into a ROOT whose dpkg database is empty or absent: first the
    /// merged-/usr layout, an empty database and the files of the Essential packages and their
    /// dependencies (no scripts, as debootstrap's first stage), then every PACKAGE in database
    /// mode with its maintainer scripts. Then `chroot ROOT dpkg --configure -a`.
    #[arg(long, conflicts_with_all = ["recover", "admindir"])]
    bootstrap: bool,

    /// Print the strategies with what each guarantees, and exit.
    #[arg(long)]
    list_strategies: bool,
}

/// The program: parse, run, and turn the result into an exit code.
pub fn main() -> ExitCode {
    let cli = match crate::cli::try_parse::<Cli>() {
        Ok(Invocation::Run(cli)) => cli,
        Ok(Invocation::Completions) => return ExitCode::SUCCESS,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::stderr!("unpack: error: {}", crate::error::one_line(e.as_ref()));
            let code = e.downcast_ref::<Error>().map_or(Exit::Failure, Error::exit_code);
            ExitCode::from(code as u8)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.list_strategies {
        print_or_warn(&strategy_table());
        return Ok(());
    }
    let cpus =
        || std::thread::available_parallelism().map_or(2, |n| n.get()).min(durability::MAX_JOBS);
    let jobs = cli.jobs.unwrap_or_else(cpus);
    let mut options = Options::new(durability::by_name(&cli.strategy, jobs)?);
    options.wait = cli.wait;
    options.admindir = cli.admindir.clone();
    options.scripts = !cli.no_scripts;
    if cli.json {
        options.script_output = ScriptOutput::Stderr;
    }
    crate::interrupt::install();
    options.stop = Some(Arc::new(crate::interrupt::pending));
    if cli.recover {
        let [root] = cli.paths.as_slice() else {
            return Err(Error::Usage("--recover takes ROOT only".into()).into());
        };
        let recovery = recover_root(root, &options)?;
        if !cli.quiet {
            print_or_warn(&format!("{}\n", escape(&recovery.describe(root))));
        }
        return Ok(());
    }
    let (root, packages) = match cli.paths.split_last() {
        Some((root, packages)) if !packages.is_empty() => (root, packages),
        _ => return Err(Error::Usage("need PACKAGE... ROOT".into()).into()),
    };
    let bar = (!cli.quiet && std::io::stderr().is_terminal()).then(progress_bar);
    if let Some(bar) = &bar {
        let bar = bar.clone();
        let started = Instant::now();
        options.progress = Some(Arc::new(move |done, total| {
            // Only work that lasts gets a bar: a quick unpack prints nothing but its report.
            if bar.is_hidden() && started.elapsed() > Duration::from_millis(500) {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_length(total);
            bar.set_position(done);
        }));
    }
    let report = if cli.bootstrap {
        bootstrap(packages, root, &options)
    } else {
        unpack(packages, root, &options)
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    if let Some(recovered) = &report.recovered {
        crate::stderr!("unpack: recovered first: {}", escape(recovered));
    }
    if let Some(signal) = crate::interrupt::pending() {
        crate::stderr!(
            "unpack: signal {signal} came during the rename phase; finished the transaction first"
        );
    }
    if cli.json {
        print_or_warn(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    } else if !cli.quiet {
        print_or_warn(&report.human());
    }
    Ok(())
}

/// Prints the report (or the table, or what recovery did); one that cannot be printed (a
/// closed pipe) is a warning, not a failure: the exit status says what the unpack did to the
/// root, which is done either way.
fn print_or_warn(text: &str) {
    if let Err(e) = crate::cli::print(text) {
        crate::stderr!("unpack: warning: the report could not be printed: {e}");
    }
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed}] {wide_bar} {bytes}/{total_bytes} ({eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

fn strategy_table() -> String {
    let mut out = format!("{:<10} {:<55} {}\n", "STRATEGY", "WHAT IT DOES", "GUARANTEE");
    for s in durability::ALL {
        let name = if s.aliases.is_empty() {
            s.name.to_string()
        } else {
            format!("{} ({})", s.name, s.aliases.join(", "))
        };
        out += &format!("{:<10} {:<55} {}\n", name, s.idea, s.guarantee);
    }
    out += &format!("\ndefault: {}\n", durability::DEFAULT);
    out
}
