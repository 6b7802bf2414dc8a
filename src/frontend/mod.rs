//! `unpack-dpkg`: a dpkg front end that apt can run as `Dir::Bin::dpkg`. Its `--unpack` and
//! `-i`/`--install` calls run in the engine, one transaction per archive
//! ([`crate::call::unpack_each`]); every other call is handed unchanged to the real dpkg
//! ([`REAL_DPKG`], by absolute path), so configure, remove, purge, queries and selections
//! behave as they always did.
//!
//! An engine call fails as dpkg's does: an archive that fails fails alone (its error on
//! status-fd and standard error), the ones before it stay unpacked, the later ones are still
//! processed until `--abort-after` errors; exit 0, 1 when an archive failed, 2 for usage and
//! fatal errors ([`args`] reads the command line and configuration, [`report`] writes
//! status-fd and dpkg.log). `--install` then runs the real dpkg's `--configure` of the
//! packages that unpacked, with the same options; an `--unpack` without `--no-triggers` its
//! `--triggers-only` of the packages the call made triggers-pending, as dpkg runs their
//! triggers at its end.

pub mod args;
pub mod report;

use crate::call::unpack_each;
use crate::dpkg::configure_guard::Guard;
use crate::durability;
use crate::error::{escape, one_line};
use crate::events::Event;
use crate::options::{Force, Options, PathFilter};
use args::{Action, Invocation, Sources};
use report::{say, Reporter};
use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;

/// The real dpkg, which every call but the engine's goes to.
pub const REAL_DPKG: &str = "/usr/bin/dpkg";

/// The program: the exit code of the call.
pub fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os().skip(1).map(|a| a.into_string()).collect() {
        Ok(args) => args,
        // Not UTF-8: not a call the engine takes (its archives' names are), so dpkg's.
        Err(_) => return exec_real_dpkg(),
    };
    let env = |name: &str| std::env::var(name).ok();
    let sources = Sources {
        config_dir: Path::new("/etc/dpkg"),
        home: std::env::var_os("HOME").map(PathBuf::from),
        env: &env,
    };
    let Some(action) = args::engine_action(&args) else {
        return match args::configure_call(&args, &sources) {
            Some(call) => ExitCode::from(configure(&call, &args)),
            None => exec_real_dpkg(),
        };
    };
    let code = match Invocation::read(&args, action, &sources) {
        Ok(inv) => run(&inv),
        Err(e) => fatal(&e),
    };
    ExitCode::from(code)
}

/// Replaces this process with the real dpkg, given the same arguments; exit 2 when it cannot.
fn exec_real_dpkg() -> ExitCode {
    let e = Command::new(REAL_DPKG).arg0("dpkg").args(std::env::args_os().skip(1)).exec();
    ExitCode::from(fatal(&format!("cannot run {REAL_DPKG}: {e}")))
}

fn fatal(message: &str) -> u8 {
    say(&format!("unpack-dpkg: error: {message}"));
    2
}

/// An engine call: the unpack of each archive, then with `--install` the configure.
fn run(inv: &Invocation) -> u8 {
    let reporter = match Reporter::new(&inv.status_fds, inv.log.clone(), &native_arch()) {
        Ok(r) => Arc::new(r),
        Err(e) => return fatal(&e),
    };
    reporter.startup(inv.action.name());
    // dpkg checks the archives once it holds its locks, which the engine takes in the call
    // below: an archive found missing here is logged after the `startup` line, as dpkg's.
    let archives = match archives(inv) {
        Ok(a) => a,
        Err(e) => {
            reporter.started();
            return fatal(&e);
        }
    };
    let options = match options(inv, &reporter) {
        Ok(o) => o,
        Err(e) => return fatal(&e),
    };
    let paths: Vec<PathBuf> = archives.iter().map(PathBuf::from).collect();
    let mut failed: Vec<String> = Vec::new();
    let mut unpacked: Vec<String> = Vec::new();
    let mut aborted = false;
    let mut broken = None;
    if let Some(first) = archives.first() {
        reporter.begin(first);
    }
    let mut next = 1;
    let outcome = unpack_each(&paths, &inv.instdir, &options, &mut |_, result| {
        reporter.started();
        let archive = archives.get(next - 1).cloned().unwrap_or_default();
        let result_failed = result.is_err();
        match result {
            Ok(_) => unpacked.extend(reporter.package()),
            Err(e) => {
                reporter.failed(inv.action.name(), &one_line(&e));
                failed.push(archive);
            }
        }
        broken = reporter.broken();
        if broken.is_some() {
            return ControlFlow::Break(());
        }
        if result_failed && failed.len() >= inv.abort_after as usize {
            say("unpack-dpkg: too many errors, stopping");
            aborted = true;
            return ControlFlow::Break(());
        }
        if let Some(a) = archives.get(next) {
            reporter.begin(a);
        }
        next += 1;
        ControlFlow::Continue(())
    });
    if let Err(e) = outcome {
        return fatal(&one_line(&e));
    }
    if let Some(e) = broken {
        return fatal(&e);
    }
    let mut code = 0;
    if inv.action == Action::Install && !unpacked.is_empty() && !aborted {
        let durable = options.strategy.is_durable();
        code = guarded(&inv.instdir, &inv.admindir, durable, || {
            real_dpkg(inv, &reporter, "--configure", &unpacked)
        });
    }
    let pending = reporter.pending();
    if inv.action == Action::Unpack && !inv.no_triggers && !pending.is_empty() {
        code = real_dpkg(inv, &reporter, "--triggers-only", &pending);
    }
    if !failed.is_empty() {
        say("Errors were encountered while processing:");
        for archive in &failed {
            say(&format!(" {}", escape(archive)));
        }
        if aborted {
            say("Processing was halted because there were too many errors.");
        }
        code = code.max(1);
    }
    code
}

/// A `--configure` call: the real dpkg's, given `args` unchanged, under the configure guard
/// when the strategy the front end would use is durable (`none`, or `--force-unsafe-io` without
/// one chosen, promises nothing, so dpkg runs as it would alone).
fn configure(call: &args::Configure, args: &[String]) -> u8 {
    let chosen = std::env::var("UNPACK_DPKG_STRATEGY").ok();
    let durable = args::strategy(chosen, Path::new(args::CONFIG), call.unsafe_io)
        .and_then(|(name, _)| durability::by_name(&name, 1).map_err(|e| one_line(&e)))
        .map_or(true, |s| s.is_durable());
    guarded(&call.instdir, &call.admindir, durable, || {
        exit_code(Command::new(REAL_DPKG).arg0("dpkg").args(args).status())
    })
}

/// The exit code of a run of the real dpkg (2 when it could not be run, or was killed).
fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> u8 {
    match status {
        Ok(s) => s.code().map_or(2, |c| u8::try_from(c).unwrap_or(2)),
        Err(e) => fatal(&format!("cannot run {REAL_DPKG}: {e}")),
    }
}

/// `configure`, a run of the real dpkg that may configure packages, between the halves of the
/// configure guard ([`crate::dpkg::configure_guard`]) when `durable`: a power cut during it cannot lose a
/// conffile dpkg moved into place. Its exit code; 2 when the guard fails (before: dpkg is not
/// run; after: its conffiles may not be on disk yet).
fn guarded(instdir: &Path, admindir: &Path, durable: bool, configure: impl FnOnce() -> u8) -> u8 {
    if !durable {
        return configure();
    }
    let guard = match Guard::prepare(instdir, admindir) {
        Ok((guard, finished)) => {
            if let Some(what) = finished.describe() {
                say(&format!("unpack-dpkg: recovered first: {}", escape(&what)));
            }
            guard
        }
        Err(e) => return fatal(&one_line(&e)),
    };
    let code = configure();
    match guard.map(Guard::finish) {
        Some(Err(e)) => fatal(&one_line(&e)),
        _ => code,
    }
}

/// The real dpkg's `action` of `packages`, with the call's options: the `--configure` of what
/// `--install` unpacked, or the `--triggers-only` of what an `--unpack` without
/// `--no-triggers` made triggers-pending, which dpkg runs at its end. Its exit code (2 when
/// it cannot be run).
fn real_dpkg(inv: &Invocation, reporter: &Reporter, action: &str, packages: &[String]) -> u8 {
    let status = reporter.inheriting(|| {
        Command::new(REAL_DPKG)
            .arg0("dpkg")
            .args(&inv.forwarded)
            .arg(action)
            .args(packages)
            .status()
    });
    exit_code(status)
}

/// The native architecture, as the real dpkg prints it; empty when it cannot say (every
/// package of an architecture is then named with it on status-fd).
fn native_arch() -> String {
    Command::new(REAL_DPKG)
        .arg("--print-architecture")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The archives of the call, each checked as dpkg checks them all before the first: an
/// archive that is missing or not a regular file is a fatal error. With `--recursive`, the
/// `.deb` files under each argument, symlinks followed, each directory's names sorted by
/// byte, in pre-order.
fn archives(inv: &Invocation) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    if inv.recursive {
        for arg in &inv.args {
            walk(Path::new(arg), &mut out)?;
        }
        if out.is_empty() {
            return Err("searched, but found no packages (files matching *.deb)".into());
        }
        return Ok(out);
    }
    for arg in &inv.args {
        let meta = std::fs::metadata(arg)
            .map_err(|e| format!("cannot access archive '{}': {e}", escape(arg)))?;
        if !meta.is_file() {
            return Err(format!("archive '{}' is not a regular file", escape(arg)));
        }
        out.push(arg.clone());
    }
    Ok(out)
}

fn walk(path: &Path, out: &mut Vec<String>) -> Result<(), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("unable to stat '{}': {e}", escape(path)))?;
    if meta.is_dir() {
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(path)
            .map_err(|e| format!("unable to open directory '{}': {e}", escape(path)))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("unable to read directory '{}': {e}", escape(path)))?;
        names.sort_by(|a, b| {
            use std::os::unix::ffi::OsStrExt;
            a.as_bytes().cmp(b.as_bytes())
        });
        for name in names {
            walk(&path.join(name), out)?;
        }
    } else if meta.is_file() {
        let text = path.to_str().ok_or(format!("{}: not a UTF-8 name", escape(path)))?;
        if text.ends_with(".deb") {
            out.push(text.to_string());
        }
    }
    Ok(())
}

/// The engine's options for the call: the strategy, the root's admin directory, the forces,
/// the filters, and the events to `reporter`.
fn options(inv: &Invocation, reporter: &Arc<Reporter>) -> Result<Options, String> {
    let jobs =
        std::thread::available_parallelism().map_or(2, |n| n.get()).min(durability::MAX_JOBS);
    let chosen = std::env::var("UNPACK_DPKG_STRATEGY").ok();
    let (name, why) =
        args::strategy(chosen, Path::new(args::CONFIG), inv.force.contains("unsafe-io"))?;
    let strategy =
        durability::by_name(&name, jobs).map_err(|e| format!("{} ({why})", one_line(&e)))?;
    reporter.strategy(strategy.name(), &why);
    let mut options = Options::new(strategy);
    options.admindir = Some(inv.admindir.clone());
    options.auto_deconfigure = inv.auto_deconfigure;
    options.force = force(&inv.force)?;
    options.path_filters =
        inv.filters.iter().map(|(g, include)| PathFilter::new(g, *include)).collect();
    let reporter = reporter.clone();
    options.events = Some(Arc::new(move |e: &Event| reporter.event(e)));
    Ok(options)
}

/// The engine's [`Force`] from dpkg's force names; a name the engine cannot honour is an error.
fn force(names: &BTreeSet<String>) -> Result<Force, String> {
    let mut force = Force::default();
    for name in names {
        if force.set(name) {
            continue;
        }
        if name == "script-chrootless" {
            return Err("--force-script-chrootless is not supported by unpack-dpkg: the engine runs maintainer scripts inside the root".into());
        }
        // The rest: dpkg's defaults (the engine neither sets SELinux contexts nor refuses a
        // downgrade); what matters at configure only (the real dpkg's, which gets them);
        // checks the engine does not make; the durability, which the strategy decides.
    }
    Ok(force)
}
