//! `unpack-compare [--ignore FILE]... [--json] ROOT_A ROOT_B`: every difference between two
//! roots' trees and dpkg databases, one a line, sorted (the library's `compare` module says
//! what is compared and why). Exit 0 when there is none, 1 when there are, 2 on a usage error or
//! a file that cannot be read.

use anyhow::Result;
use clap::Parser;
use std::path::PathBuf;
use unpack::cli::Invocation;
use unpack_lab::compare::{self, ignore::Ignore};

/// List every difference between two roots: tree (type, mode, owner, size, content, link
/// target, device numbers, the mtime of package files) and dpkg database (status field by field,
/// info/, triggers/, updates/, diversions, statoverride, arch).
#[derive(Parser)]
#[command(name = "unpack-compare", version, after_help = EXIT_CODES)]
struct Args {
    /// Leave out the differences this file's patterns cover (one glob a line, # comments); may
    /// be given more than once
    #[arg(long, value_name = "FILE")]
    ignore: Vec<PathBuf>,
    /// Print one JSON object (the differences, how many were ignored) instead of lines
    #[arg(long)]
    json: bool,
    /// The first root (A in the report)
    root_a: PathBuf,
    /// The second root (B in the report)
    root_b: PathBuf,
}

const EXIT_CODES: &str = "Exit codes:\n  0  no difference (beyond the ignored ones)\n  1  differences, listed on stdout\n  2  usage error, or a root or ignore file that cannot be read (named on stderr)";

fn main() {
    let Invocation::Run(args) = unpack::cli::parse::<Args>() else { return };
    match run(&args) {
        Ok(same) => std::process::exit(if same { 0 } else { 1 }),
        Err(e) => {
            unpack::stderr!("unpack-compare: error: {}", unpack::error::one_line(e.as_ref()));
            std::process::exit(2);
        }
    }
}

/// Compares and prints; true when nothing differs.
fn run(args: &Args) -> Result<bool> {
    let mut ignore = Ignore::default();
    for file in &args.ignore {
        ignore.load(file)?;
    }
    let found = compare::compare(&args.root_a, &args.root_b, &ignore)?;
    let text = if args.json {
        let json = serde_json::json!({
            "a": args.root_a,
            "b": args.root_b,
            "differences": found.differences,
            "ignored": found.ignored,
        });
        format!("{json}\n")
    } else {
        found.differences.iter().map(|d| d.line() + "\n").collect()
    };
    // A closed stdout (`| head`) loses the list, never the verdict.
    let _ = unpack::cli::print(&text);
    Ok(found.differences.is_empty())
}
