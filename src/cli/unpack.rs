//! The `unpack` program: `unpack [OPTIONS] PACKAGE... ROOT`, `unpack --bootstrap ...`,
//! `unpack --recover ROOT`, `unpack --list-strategies`. It parses its command line, calls the
//! engine's API ([`crate::unpack()`], [`crate::bootstrap()`], [`recover_root()`]) and
//! prints the report; src/bin/unpack.rs only calls [`main`]. It must never reach below the
//! API: what it does, an embedder can do.

use crate::bootstrap::stages::bootstrap;
use crate::call::{discard_root, recover_root, unpack};
use crate::cli::Invocation;
use crate::durability;
use crate::error::{escape, Error, Exit};
use crate::options::{Force, Options, Phase, ScriptOutput};
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
  1  any other failure, including a package that conflicts with what ROOT holds (in database
     mode also an architecture ROOT has not enabled, a diversion's divert-to name, a package
     not co-installable, Conflicts, Breaks or Pre-Depends that nothing resolves), and an
     internal error (a bug to report)
  2  usage error
  3  bad, truncated or hostile package, or one dpkg refuses (a tar header type, a name, a
     control field, the conffiles or triggers member); ROOT is left unchanged
  4  I/O error in ROOT: no space left, read-only, no permission (a device node in a package
     unpacked by a user other than root included); or an interrupted transaction that the
     root changed under since the crash (see --discard)
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
    override_usage = "unpack [OPTIONS] PACKAGE... ROOT\n       unpack --bootstrap [OPTIONS] PACKAGE... ROOT\n       unpack --recover [--discard] ROOT\n       unpack --list-strategies"
)]
struct Cli {
    /// The packages (.deb), then the root directory to unpack them into. Several packages are
    /// one transaction with one barrier.
    #[arg(value_name = "PACKAGE... ROOT", required_unless_present = "list_strategies", num_args = 1..)]
    paths: Vec<PathBuf>,

    /// Only recover ROOT: finish or roll back a transaction a crash interrupted, then exit.
    #[arg(long)]
    recover: bool,

    /// With --recover: drop an interrupted transaction whose renames recovery refuses to finish
    /// because the root changed since (exit 4 says so): its temporary files are removed, what it
    /// renamed stays, and its packages are recorded reinstreq half-installed for dpkg to repair.
    #[arg(long, requires = "recover")]
    discard: bool,

    /// Durability strategy (--list-strategies says what each guarantees).
    #[arg(short, long, default_value = durability::DEFAULT, value_name = "NAME", value_parser = StrategyName)]
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

    /// Database mode: let through what dpkg's --force-WHAT lets through, a comma-separated list
    /// (or the option again): depends (an unsatisfied Pre-Depends), conflicts, breaks,
    /// remove-essential, remove-protected, hold, remove-reinstreq (a conflicting package of
    /// that kind may be removed), architecture (one the root has not enabled),
    /// overwrite-diverted (a diversion's divert-to name). Each problem let through is a warning.
    #[arg(long, value_name = "WHAT,...", value_delimiter = ',')]
    force: Vec<String>,

    /// Database mode: deconfigure a package the unpack breaks (Breaks), or one the removal of a
    /// conflicting package leaves without a dependency, instead of refusing, as dpkg's
    /// --auto-deconfigure (apt passes it).
    #[arg(long)]
    auto_deconfigure: bool,

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

/// A strategy's name on the command line: what completion scripts offer (the built-in names;
/// the aliases are accepted, not offered), while any text is taken and checked by
/// [`durability::by_name`], whose message names the known ones. A plain list of possible values
/// would make clap refuse an unknown name with a message of its own, and refuse the aliases.
#[derive(Debug, Clone, Copy)]
struct StrategyName;

impl clap::builder::TypedValueParser for StrategyName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        // Names alone: a description would spread fish's one line per option over several.
        let names = durability::ALL.iter().map(|s| clap::builder::PossibleValue::new(s.name));
        Some(Box::new(names))
    }
}

/// The program: parse, run, and turn the result into an exit code.
pub fn main() -> ExitCode {
    let cli = match crate::cli::try_parse::<Cli>() {
        Ok(Invocation::Run(cli)) => cli,
        Ok(Invocation::Completions) => return ExitCode::SUCCESS,
        Err(e) => return clap_exit(&e),
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

/// What clap stopped at: `--help` and `--version` print on stdout and exit 0; a usage error
/// prints on stderr with the prefix of every error of the program (clap's own is `error: `)
/// and exits 2.
fn clap_exit(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    crate::stderr!("unpack: error: {}", text.trim_end());
    ExitCode::from(Exit::Usage as u8)
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
    // Database mode's dpkg.log is the root's own, as dpkg's would be inside it.
    options.log = Some(PathBuf::from("var/log/dpkg.log"));
    options.auto_deconfigure = cli.auto_deconfigure;
    for what in &cli.force {
        if !options.force.set(what) {
            let known = Force::NAMES.join(", ");
            let what = escape(what);
            return Err(Error::Usage(format!("--force: unknown '{what}' (known: {known})")).into());
        }
    }
    if cli.json {
        options.script_output = ScriptOutput::Stderr;
    }
    // dpkg's notices (a conflicting package removed, a package deconfigured) go where its
    // own do: standard error.
    options.events = Some(Arc::new(|event: &crate::events::Event| {
        if let crate::events::Event::Notice { message } = event {
            // A notice of several lines (dpkg's "regarding ...:" and its reasons) is printed
            // as lines, each escaped.
            for line in message.lines() {
                eprintln!("unpack: {}", escape(line));
            }
        }
    }));
    crate::interrupt::install();
    options.stop = Some(Arc::new(crate::interrupt::pending));
    if cli.recover {
        let [root] = cli.paths.as_slice() else {
            return Err(Error::Usage("--recover takes ROOT only".into()).into());
        };
        let what = if cli.discard {
            discard_root(root, &options)?.describe(root)
        } else {
            recover_root(root, &options)?.describe(root)
        };
        if !cli.quiet {
            print_or_warn(&format!("{}\n", escape(&what)));
        }
        return Ok(());
    }
    let (root, packages) = match cli.paths.split_last() {
        Some((root, packages)) if !packages.is_empty() => (root, packages),
        _ => return Err(Error::Usage("need PACKAGE... ROOT".into()).into()),
    };
    let bar = (!cli.quiet && std::io::stderr().is_terminal()).then(|| progress_bar(&mut options));
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

/// A progress bar on stderr, fed by the call's callbacks: the bytes of the packages read, and
/// the package being written or the phase after the writing ([`bar_message`]). Only work that
/// lasts gets one: a quick unpack prints nothing but its report.
fn progress_bar(options: &mut Options) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed}] {msg} {wide_bar} {bytes}/{total_bytes} ({eta})",
    ) {
        bar.set_style(style);
    }
    let started = Instant::now();
    let reveal = move |bar: &indicatif::ProgressBar| {
        if bar.is_hidden() && started.elapsed() > Duration::from_millis(500) {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            // The spinner and the clock go on during a barrier, which reads nothing.
            bar.enable_steady_tick(Duration::from_millis(200));
        }
    };
    let mine = bar.clone();
    options.progress = Some(Arc::new(move |done, total| {
        reveal(&mine);
        mine.set_length(total);
        mine.set_position(done);
    }));
    let mine = bar.clone();
    options.phase = Some(Arc::new(move |phase| {
        reveal(&mine);
        mine.set_message(bar_message(phase));
    }));
    bar
}

/// What the bar says of a phase: the package being written (its file's name), or the step
/// after the writing.
fn bar_message(phase: Phase<'_>) -> String {
    match phase {
        Phase::Package(path) => {
            format!("writing {}", escape(path.file_name().unwrap_or(path.as_os_str())))
        }
        Phase::Barrier => "barrier: flushing before the renames".to_string(),
        Phase::Renames => "renaming into place".to_string(),
    }
}

/// The width `--list-strategies` wraps its second column to fit in.
const TABLE_WIDTH: usize = 100;

/// `--list-strategies`: each strategy's name (with its aliases) in a column as wide as the
/// widest, beside what it does and, below that, its guarantee, both wrapped to fit
/// [`TABLE_WIDTH`] under the second column's heading.
fn strategy_table() -> String {
    let names: Vec<String> = durability::ALL
        .iter()
        .map(|s| match s.aliases {
            [] => s.name.to_string(),
            aliases => format!("{} ({})", s.name, aliases.join(", ")),
        })
        .collect();
    let heading = "STRATEGY";
    let width =
        names.iter().map(|n| n.chars().count()).chain([heading.len()]).max().unwrap_or(0) + 2;
    let mut out = format!("{heading:<width$}WHAT IT DOES, THEN WHAT IT GUARANTEES\n");
    for (s, name) in durability::ALL.iter().zip(&names) {
        let text = TABLE_WIDTH.saturating_sub(width).max(20);
        let lines = wrap(s.idea, text)
            .into_iter()
            .chain(wrap(&format!("guarantee: {}", s.guarantee), text));
        for (i, line) in lines.enumerate() {
            let first = if i == 0 { name.as_str() } else { "" };
            out += &format!("{first:<width$}{line}\n");
        }
    }
    out += &format!("\ndefault: {}\n", durability::DEFAULT);
    out
}

/// `text` in lines of at most `width` characters, broken between words (a longer word has a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    #[test]
    fn the_bar_names_the_package_file_escaped_and_the_phases_after_the_writing() {
        let package = Path::new("/srv/debs/hello_2.10-3_amd64.deb");
        assert_eq!(bar_message(Phase::Package(package)), "writing hello_2.10-3_amd64.deb");
        let hostile = Path::new(OsStr::from_bytes(b"/tmp/a\x1b[2Jb.deb"));
        assert_eq!(bar_message(Phase::Package(hostile)), "writing a\\033[2Jb.deb");
        assert_eq!(bar_message(Phase::Barrier), "barrier: flushing before the renames");
        assert_eq!(bar_message(Phase::Renames), "renaming into place");
    }

    #[test]
    fn wrap_breaks_between_words_and_gives_a_long_word_its_own_line() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefgh ij", 4), ["abcdefgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
    }
}
