//! The crash matrix as people and programs read it: `crash.md` (one table per filesystem and
//! scenario, rows = mount option sets, columns = strategies), `crash.csv` (one row per cell),
//! `crash.json` (everything, every violation with its state, path, expected and found content)
//! and `violations.txt` (one line per violation); with apt cells, their chart `crash-apt.svg`
//! ([`super::chart`]).
//!
//! A cell reads `V / S (kind N, ...)`: V states with at least one violation out of S states
//! checked, and for each kind seen the number of states that show it. Mount and fsck failures
//! point at the filesystem, not at the unpacker, so they are listed apart, under the tables;
//! so are the cells that could not be run. It never prints a clean verdict over zero states.
//! This module only formats and writes.

use super::check::Kind;
use super::matrix::{CellResult, Matrix, Scenario};
use super::CrashError;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const MARKDOWN: &str = "crash.md";
pub const CSV: &str = "crash.csv";
pub const JSON: &str = "crash.json";
pub const VIOLATIONS: &str = "violations.txt";

/// The markdown report.
pub fn markdown(m: &Matrix) -> String {
    let mut out = String::new();
    let subject =
        m.package.as_ref().map_or("the apt-local upgrade".into(), |p| p.display().to_string());
    let _ = writeln!(out, "# Crash states of {subject}\n");
    let _ = writeln!(
        out,
        "Each cell: states with a violation / crash states checked (at most {} per cell, seed {}), and for \
         each kind of violation seen, the number of states showing it. Kinds: zero-length, torn, lost-old \
         (invariant 1: old or new), not-durable (2: new after exit 0), leftover-dirs, mixed, recover-failed (3: \
         entirely old or entirely new after `unpack --recover`), half-registered, db-tree, db-audit (4, with \
         dpkg's database: the database and the tree agree on one version after recovery), conffile-lost (apt: \
         `dpkg --configure` recorded a conffile as done, its rename from NAME.dpkg-new or its removal lost), redo-failed (the \
         bootstrap: where its second stage is absent after recovery, `unpack --bootstrap` again finishes the \
         system), repair-failed (apt: after `dpkg --configure -a` and `apt-get -f install`, the system is not \
         whole).\n",
        m.states_per_cell, m.seed
    );
    let mut filesystems: Vec<&str> = Vec::new();
    let mut strategies: Vec<&str> = Vec::new();
    for c in &m.cells {
        push_unique(&mut filesystems, &c.fs);
        push_unique(&mut strategies, &c.strategy);
    }
    for fs in &filesystems {
        for scenario in Scenario::ALL {
            let cells: Vec<&CellResult> =
                m.cells.iter().filter(|c| c.fs == *fs && c.scenario == scenario).collect();
            if cells.is_empty() {
                continue;
            }
            let mut rows: Vec<&str> = Vec::new();
            for c in &cells {
                push_unique(&mut rows, &c.options);
            }
            let settle: Vec<String> = cells
                .iter()
                .map(|c| format!("{}", c.settle_s))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let _ =
                writeln!(out, "## {fs}, {} (settle {} s)\n", scenario.name(), settle.join(", "));
            table(&mut out, &rows, &strategies, &cells, cell_text);
            if scenario == Scenario::Bootstrap {
                let names = super::bootstrap::STAGES.join(" / ");
                let _ = writeln!(
                    out,
                    "Where recovery left each state's root, states at {names} (before the second stage's journal, an \
                     earlier stage), and on how many the bootstrap ran again:\n"
                );
                table(&mut out, &rows, &strategies, &cells, stages_text);
            }
            if scenario == Scenario::Apt {
                let _ = writeln!(
                    out,
                    "States with a violation after `unpack --recover` alone, states with a package dpkg marks for \
                     reinstalling (reinstreq, half-installed; not a violation; those packages, and how many of them had files at \
                     neither version), states the repair left whole (of \
                     them, the ones `apt-get -f install` was needed on) and states it failed on:\n"
                );
                table(&mut out, &rows, &strategies, &cells, apt_text);
            }
        }
    }
    out += &disturbed_and_filesystem(m);
    let errors = m.unfinished();
    if !errors.is_empty() {
        let _ = writeln!(
            out,
            "\n## Cells that could not be run\n\n{} of {} cells could not be run: the matrix is incomplete and says \
             nothing about them.\n",
            errors.len(),
            m.cells.len()
        );
        for c in errors {
            let _ = writeln!(out, "- {}: {}", c.id, c.error.as_deref().unwrap_or_default());
        }
    }
    out
}

/// The cells another process's sync disturbed, and what mount and fsck said of the states.
fn disturbed_and_filesystem(m: &Matrix) -> String {
    let mut out = String::new();
    let disturbed: Vec<String> = m
        .cells
        .iter()
        .filter(|c| c.foreign_flushes > 0)
        .map(|c| format!("{} ({})", c.id, c.foreign_flushes))
        .collect();
    if !disturbed.is_empty() {
        let _ = writeln!(
            out,
            "Disturbed: flushes after the exit that came from another process's sync(2), which also writes delayed \
             data and can close the window an unsafe strategy loses data in: {}.\n",
            disturbed.join(", ")
        );
    }
    let failing: Vec<&CellResult> = m.cells.iter().filter(|c| !c.fs_failures.is_empty()).collect();
    let checked = m.states_checked();
    if checked == 0 {
        let _ = writeln!(out, "No crash state was checked: this matrix has no verdict.");
    } else if failing.is_empty() {
        let _ = writeln!(
            out,
            "Filesystem: each of the {checked} states checked mounted and fsck found nothing."
        );
    } else {
        let _ = writeln!(out, "## Filesystem failures (mount or fsck)\n\n| cell | state | stage | what the tool said |\n| --- | --- | --- | --- |");
        for c in failing {
            for f in &c.fs_failures {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    c.id,
                    f.state,
                    f.stage,
                    f.detail.replace('|', "\\|")
                );
            }
        }
    }
    out
}

fn cell_text(c: &CellResult) -> String {
    if c.error.is_some() {
        return "error".to_string();
    }
    let kinds: Vec<String> = Kind::ALL
        .iter()
        .filter_map(|k| c.states_by_kind.get(k).map(|n| format!("{} {n}", k.name())))
        .collect();
    let mut text = format!("{} / {}", c.states_with_violations, c.states);
    if !kinds.is_empty() {
        let _ = write!(text, " ({})", kinds.join(", "));
    }
    text
}

/// A markdown table, rows by mount option set, columns by strategy, each cell `text` of its
/// result (empty where the matrix has none), then a blank line.
fn table(
    out: &mut String,
    rows: &[&str],
    strategies: &[&str],
    cells: &[&CellResult],
    text: fn(&CellResult) -> String,
) {
    let _ = writeln!(out, "| mount options | {} |", strategies.join(" | "));
    let _ = writeln!(out, "| --- |{}", " --- |".repeat(strategies.len()));
    for row in rows {
        let texts: Vec<String> = strategies
            .iter()
            .map(|s| {
                cells
                    .iter()
                    .find(|c| c.options == *row && c.strategy == *s)
                    .map_or(String::new(), |c| text(c))
            })
            .collect();
        let _ = writeln!(out, "| {row} | {} |", texts.join(" | "));
    }
    out.push('\n');
}

/// `N / N / N / N (redone N)`: a bootstrap cell's states by stage, and its redos.
fn stages_text(c: &CellResult) -> String {
    let Some(counts) = c.bootstrap.as_ref().filter(|_| c.error.is_none()) else {
        return cell_text(c);
    };
    let stages: Vec<String> = super::bootstrap::STAGES
        .iter()
        .map(|s| counts.states_by_stage.get(s).copied().unwrap_or(0).to_string())
        .collect();
    format!("{} (redone {})", stages.join(" / "), counts.states_redone)
}

/// `violations V, reinstall R, repaired P (apt -f A), repair-failed F`: an apt cell's counts.
fn apt_text(c: &CellResult) -> String {
    let Some(a) = c.apt.as_ref().filter(|_| c.error.is_none()) else {
        return cell_text(c);
    };
    format!(
        "violations {}, reinstall {} ({} packages, {} of them mixed), repaired {} (apt -f {}), repair-failed {}",
        a.states_with_violations_after_recovery,
        a.states_needing_reinstall,
        a.packages_needing_reinstall,
        a.packages_needing_reinstall_mixed,
        a.states_repaired,
        a.states_apt_fix,
        a.states_repair_failed
    )
}

fn push_unique<'a>(list: &mut Vec<&'a str>, item: &'a str) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// One row per cell.
pub fn csv(m: &Matrix) -> String {
    // The kinds' columns come from the kinds themselves, so that they cannot drift apart.
    let kinds: Vec<String> = Kind::ALL.iter().map(|k| k.name().replace('-', "_")).collect();
    let mut out = format!(
        "fs,options,scenario,strategy,settle_s,states,states_after_returned,states_with_violations,{},\
         states_recovered,states_with_journal,states_with_intent,fs_failures,foreign_flushes,error\n",
        kinds.join(",")
    );
    for c in &m.cells {
        let kinds: Vec<String> =
            Kind::ALL.iter().map(|k| c.kinds.get(k).copied().unwrap_or(0).to_string()).collect();
        let fields = [
            c.fs.clone(),
            c.options.clone(),
            c.scenario.name().to_string(),
            c.strategy.clone(),
            c.settle_s.to_string(),
            c.states.to_string(),
            c.states_after_returned.to_string(),
            c.states_with_violations.to_string(),
            kinds.join(","),
            c.states_recovered.to_string(),
            c.states_with_journal.to_string(),
            c.states_with_intent.to_string(),
            c.fs_failures.len().to_string(),
            c.foreign_flushes.to_string(),
            c.error.clone().unwrap_or_default(),
        ];
        let quoted: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| if i == 8 { f.clone() } else { csv_field(f) })
            .collect();
        let _ = writeln!(out, "{}", quoted.join(","));
    }
    out
}

fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// One line per violation: `CELL:STATE PATH KIND: expected old X or new Y, found Z`.
pub fn violation_lines(m: &Matrix) -> String {
    let mut out = String::new();
    for c in &m.cells {
        for v in &c.violations {
            let _ = writeln!(
                out,
                "{}:{} /{} {}: expected old {} or new {}, found {}",
                c.id,
                v.state,
                v.path.display(),
                v.kind.name(),
                v.expected_old,
                v.expected_new,
                v.found
            );
        }
    }
    out
}

/// Writes the four files, and the apt cells' chart, into `dir` (created if needed).
pub fn write_all(m: &Matrix, dir: &Path) -> Result<(), CrashError> {
    let io = |path: PathBuf| move |source| CrashError::Io { path, what: "writing", source };
    std::fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
    let json = serde_json::to_string_pretty(m).map_err(|e| io(dir.join(JSON))(e.into()))?;
    for (name, text) in [
        (MARKDOWN, markdown(m)),
        (CSV, csv(m)),
        (JSON, json + "\n"),
        (VIOLATIONS, violation_lines(m)),
    ] {
        std::fs::write(dir.join(name), text).map_err(io(dir.join(name)))?;
    }
    super::chart::write_apt_svg(m, &dir.join(super::chart::APT_SVG))
}

/// What `--replay` needs from an earlier run's `crash.json`.
#[derive(Debug, Deserialize)]
pub struct Saved {
    pub seed: u64,
    pub states_per_cell: usize,
    pub cells: Vec<SavedCell>,
}

/// One cell of [`Saved`].
#[derive(Debug, Deserialize)]
pub struct SavedCell {
    pub id: String,
    pub fs: String,
    pub disk_bytes: u64,
    pub log: Option<PathBuf>,
}

impl Saved {
    pub fn read(path: &Path) -> Result<Saved, CrashError> {
        let text = std::fs::read_to_string(path).map_err(|source| CrashError::Io {
            path: path.to_path_buf(),
            what: "reading",
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| CrashError::Replay {
            path: path.to_path_buf(),
            reason: format!("not a crash.json: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_csv_row_has_a_field_per_column() {
        let cell = CellResult::new(
            "ext4",
            "defaults",
            Scenario::Install,
            "none",
            std::time::Duration::from_secs(7),
            1 << 29,
        );
        let m = Matrix {
            package: Some("p.deb".into()),
            seed: 1,
            states_per_cell: 1,
            io_flusher: true,
            cells: vec![cell],
        };
        let text = csv(&m);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count(), "{text}");
        assert!(lines[0].contains(",db_audit,"), "{text}");
    }
}
