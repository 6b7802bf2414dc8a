//! The matrix as people read it (`matrix.md`) and as programs read it (`matrix.csv`,
//! `matrix.json`), plus the chart ([`super::chart`]).
//!
//! Why three text forms: the markdown is for the release notes, one table per workload,
//! filesystem and scenario with the durability tax (ratio to `none`; to the `dpkg` peer, apt
//! with today's dpkg, in the apt-local scenario) in every cell; the CSV has
//! one line per run for spreadsheets; the JSON has the same runs nested under their rows, with
//! the environment. A failed cell is printed as failed, never as a time, and the markdown never
//! shows a ratio against a `none` that failed.

use super::busy;
use super::chart;
use super::counts::{Counts, Source};
use super::matrix::{Cell, Matrix, RowResult};
use super::nfs;
use super::scenario::WriterSite;
use super::stats::{ratio, Spread};
use super::{Error, Result};
use std::fmt::Write as _;
use std::path::Path;

/// Writes `matrix.md`, `matrix.csv`, `matrix.json` and `matrix.svg` into `dir` (created if
/// needed), and `counts.csv` when the matrix has counting runs.
pub fn write_all(matrix: &Matrix, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    if has_counts(matrix) {
        let path = dir.join("counts.csv");
        std::fs::write(&path, counts_csv(matrix)).map_err(Error::io(&path))?;
    }
    let json = serde_json::to_string_pretty(matrix)
        .map_err(|e| Error::Output { path: dir.join("matrix.json"), message: e.to_string() })?;
    for (name, text) in
        [("matrix.md", markdown(matrix)), ("matrix.csv", csv(matrix)), ("matrix.json", json + "\n")]
    {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(Error::io(&path))?;
    }
    chart::write_svg(matrix, &dir.join("matrix.svg"))
}

/// Seconds with three significant digits.
fn secs(x: f64) -> String {
    let decimals = if x > 0.0 { (2 - x.log10().floor() as i64).clamp(0, 6) as usize } else { 3 };
    format!("{x:.decimals$}")
}

fn times(s: &Spread) -> String {
    format!("{}–{}", secs(s.min), secs(s.max))
}

/// Groups of consecutive rows that share a workload, filesystem and scenario: one table each.
fn tables(matrix: &Matrix) -> Vec<&[RowResult]> {
    let same = |a: &RowResult, b: &RowResult| {
        a.row.workload == b.row.workload
            && a.row.filesystem == b.row.filesystem
            && a.row.scenario == b.row.scenario
            && a.row.nfs == b.row.nfs
    };
    matrix.rows.chunk_by(|a, b| same(a, b)).collect()
}

/// The cell the row's ratios are to, when it has a clean time: `none`, or in the apt
/// scenarios the `dpkg` peer (what an apt run costs today).
fn baseline(row: &RowResult) -> Option<&Cell> {
    let name = baseline_name(row);
    row.cells.iter().find(|c| c.tool == name && c.is_clean())
}

fn baseline_name(row: &RowResult) -> &'static str {
    if row.row.scenario.runs_apt() {
        "dpkg"
    } else {
        "none"
    }
}

/// The markdown report.
pub fn markdown(matrix: &Matrix) -> String {
    let mut md = String::from("# unpack-bench\n\n");
    md += &environment_lines(matrix);
    for rows in tables(matrix) {
        md += &table_section(matrix, rows);
    }
    md
}

/// The list of what the matrix ran on: kernel, CPUs, device, filesystems, runs, workloads.
fn environment_lines(matrix: &Matrix) -> String {
    let env = &matrix.environment;
    let mut md = String::new();
    let _ = writeln!(md, "- kernel: {}", env.kernel);
    let _ = writeln!(md, "- CPUs: {}", env.cpus);
    let _ = writeln!(md, "- device: {}", env.device);
    if let Some(host) = &env.host_filesystem {
        let _ = writeln!(
            md,
            "- host filesystem: {} on {} ({})",
            host.fstype, host.source, host.options
        );
    }
    if let Some(nfs) = &env.nfs {
        let _ = writeln!(md, "- NFS: {nfs}");
    }
    let _ = writeln!(
        md,
        "- runs: {} counted per cell, after one warm-up round; tools alternate within each round",
        matrix.runs_per_cell
    );
    for w in &env.workloads {
        let list: Vec<String> = w
            .packages
            .iter()
            .map(|p| format!("{} {} ({}), {} bytes", p.name, p.version, p.architecture, p.bytes))
            .collect();
        // The real apt workloads have no packages of their own: apt chooses them.
        match list.is_empty() {
            true => writeln!(md, "- workload {}", w.label),
            false => writeln!(md, "- workload {}: {}", w.label, list.join("; ")),
        }
        .ok();
    }
    md
}

/// One table's section: the times, then what the rows have of the other figures, the mount
/// options read back and the failures.
fn table_section(matrix: &Matrix, rows: &[RowResult]) -> String {
    let first = &rows[0];
    let mut md = format!(
        "\n## {} on {}, {}\n\n",
        first.workload,
        first.row.filesystem_label(),
        first.row.scenario.name()
    );
    let head = header(matrix);
    md += &time_tables(rows, &head);
    if rows.iter().any(|r| r.cells.iter().any(|c| c.flush_p99_s.is_some())) {
        let _ = writeln!(md, "\nThe 99th percentile of our flush calls' latency in a run (the engine's `flush_latency`), median ms:\n\n{head}");
        for row in rows {
            md += &table_line(
                row,
                |c| c.exit,
                |c| c.flush_p99_s.map_or("–".to_string(), |s| secs(s * 1000.0)),
            );
        }
    }
    if rows.iter().any(|r| r.cells.iter().any(|c| c.writer_mib_s.is_some())) {
        md += &writer_table(rows, &head);
    }
    if rows.iter().any(|r| r.cells.iter().any(|c| c.unpack_share.is_some())) {
        let _ = writeln!(md, "\nWhere apt's time went: the share of the time until apt exited in its dpkg's unpack calls / in its configure calls, and the peak RSS of the run's processes, medians:\n\n{head}");
        for row in rows {
            md += &table_line(row, |c| c.exit, apt_shares);
        }
    }
    if rows.iter().any(|r| r.cells.iter().any(|c| c.counts.is_some())) {
        md += &counts_tables(rows, &head);
    }
    for row in rows.iter().filter(|r| r.cells.iter().any(|c| c.rpcs.is_some())) {
        md += &rpc_table(matrix, row);
    }
    md += "\nMount options as /proc/self/mountinfo read them back:\n\n";
    let mut seen: Vec<&str> = Vec::new();
    for row in rows {
        if seen.contains(&row.row.mount_options.as_str()) {
            continue;
        }
        seen.push(&row.row.mount_options);
        let applied = row.applied_options.as_deref().unwrap_or("(not mounted)");
        let _ = writeln!(md, "- `{}` → `{applied}`", row.row.mount_options);
    }
    let failures = failure_lines(rows);
    if !failures.is_empty() {
        let _ = writeln!(
            md,
            "\nFailures (the first reason of each failed cell):\n\n{}",
            failures.join("\n")
        );
    }
    md
}

/// The time tables of one table's rows: until exited, until stable, until configured (where
/// measured), and their spread.
fn time_tables(rows: &[RowResult], head: &str) -> String {
    let mut md = String::new();
    let ratios = rows.iter().any(|r| baseline(r).is_some());
    let ratio_note = if ratios {
        format!(" (in brackets: ratio to `{}` of the same row)", baseline_name(&rows[0]))
    } else {
        String::new()
    };
    let mut base_note = ratio_note.clone();
    if rows.iter().any(|r| r.cells.iter().any(|c| c.device_flushes.is_some())) {
        base_note += "; `fl`: device cache flushes per run (median)";
    }
    let _ = writeln!(md, "Until the unpacker exited, median seconds{base_note}:\n\n{head}");
    for row in rows {
        let base = baseline(row).and_then(|b| b.exit);
        md += &table_line(
            row,
            |c| c.exit,
            |c| with_ratio(c, |c| c.exit, base, c.device_flushes_at_exit),
        );
    }
    let _ = writeln!(md, "\nUntil the data was stable (exit + syncfs of the filesystem), median seconds{base_note}:\n\n{head}");
    for row in rows {
        let base = baseline(row).and_then(|b| b.stable);
        md +=
            &table_line(row, |c| c.stable, |c| with_ratio(c, |c| c.stable, base, c.device_flushes));
    }
    if rows.iter().any(|r| r.cells.iter().any(|c| c.configured.is_some())) {
        let _ = writeln!(
            md,
            "\nUntil the system was configured and stable (until stable as above, then `chroot ROOT dpkg --configure -a` \
             and a syncfs), median seconds, min–max{}:\n\n{head}",
            ratio_note
        );
        for row in rows {
            let base = baseline(row).and_then(|b| b.configured);
            md += &table_line(
                row,
                |c| c.configured,
                |c| match c.configured {
                    Some(s) => {
                        format!("{} · {}", with_ratio(c, |c| c.configured, base, None), times(&s))
                    }
                    None => "–".to_string(),
                },
            );
        }
    }
    let _ = writeln!(md, "\nSpread, min–max seconds (until exited / until stable):\n\n{head}");
    for row in rows {
        md += &table_line(
            row,
            |c| c.exit,
            |c| match (c.exit, c.stable) {
                (Some(e), Some(s)) => format!("{} / {}", times(&e), times(&s)),
                _ => "–".to_string(),
            },
        );
    }
    md
}

/// A cell's apt figures: `65% / 22% · 18 MiB`.
fn apt_shares(cell: &Cell) -> String {
    let percent = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{:.0}%", x * 100.0));
    let rss = cell.peak_rss_bytes.map_or("–".to_string(), |b| format!("{} MiB", b >> 20));
    format!("{} / {} · {rss}", percent(cell.unpack_share), percent(cell.configure_share))
}

/// The busy scenarios' writer's throughput beside each tool's runs: what the unpack cost the
/// machine's other work.
fn writer_table(rows: &[RowResult], head: &str) -> String {
    let asked = busy::RATE >> 20;
    let where_ = match rows[0].row.scenario.writer() {
        Some(WriterSite::OtherFilesystem) => "on a filesystem of its own",
        _ => "on the same filesystem",
    };
    let mut md = format!(
        "\nThe background writer's throughput while the unpacker ran ({where_}, asking for {asked} MiB/s in 1 MiB \
         writes, never flushing), median MiB/s:\n\n{head}\n"
    );
    for row in rows {
        md += &table_line(
            row,
            |c| c.exit,
            |c| c.writer_mib_s.map_or("–".to_string(), |m| format!("{m:.0}")),
        );
    }
    md
}

/// True when some cell has counting runs (`--counts`).
pub fn has_counts(matrix: &Matrix) -> bool {
    matrix.rows.iter().flat_map(|r| &r.cells).any(|c| c.counts.is_some())
}

/// A count per entry with three significant digits, thousands as `k`.
fn per_entry(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{}k", secs(x / 1000.0))
    } else {
        secs(x)
    }
}

/// The counting runs' tables: instructions and system calls per entry, then every system call
/// kind per entry, one table per row.
fn counts_tables(rows: &[RowResult], head: &str) -> String {
    let text = |c: &Cell, f: &dyn Fn(&Counts) -> Option<String>| match &c.counts {
        Some(k) if !k.errors.is_empty() => "failed".to_string(),
        Some(k) => f(k).unwrap_or_else(|| "–".to_string()),
        None => "–".to_string(),
    };
    let source = rows
        .iter()
        .flat_map(|r| &r.cells)
        .find_map(|c| c.counts.as_ref().map(|k| k.source))
        .unwrap_or(Source::Valgrind);
    let entries = rows
        .iter()
        .flat_map(|r| &r.cells)
        .find_map(|c| c.counts.as_ref().map(|k| k.entries))
        .unwrap_or(0);
    let mut md = format!(
        "\nCounting runs, apart from the timed ones (one run per cell under strace -f, one counting instructions), \
         per entry of the archives ({entries} entries), the tool's programs and all their children together.\n\n\
         Instructions per entry: {}{}:\n\n{head}\n",
        source.describe(),
        if source == Source::Perf { "; user + kernel" } else { "" },
    );
    for row in rows {
        md += &counts_line(row, |c| {
            text(c, &|k| {
                k.instructions_per_entry().map(|(user, kernel)| match kernel {
                    Some(kernel) => format!("{} + {}", per_entry(user), per_entry(kernel)),
                    None => per_entry(user),
                })
            })
        });
    }
    let _ = write!(md, "\nSystem calls per entry (strace -f -c, every kind):\n\n{head}\n");
    for row in rows {
        md += &counts_line(row, |c| text(c, &|k| k.syscalls_per_entry().map(per_entry)));
    }
    for row in rows {
        let names: std::collections::BTreeSet<&str> = row
            .cells
            .iter()
            .filter_map(counted)
            .filter_map(|k| k.syscalls.as_ref())
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        if names.is_empty() {
            continue;
        }
        let total = |name: &str| -> u64 {
            row.cells
                .iter()
                .filter_map(counted)
                .filter_map(|k| k.syscalls.as_ref()?.get(name))
                .sum()
        };
        let mut names: Vec<&str> = names.into_iter().collect();
        names.sort_by_key(|n| (std::cmp::Reverse(total(n)), *n));
        let tools: Vec<&str> = row.cells.iter().map(|c| c.tool.as_str()).collect();
        let _ = write!(
            md,
            "\nSystem calls per entry by kind, `{}` {} (most frequent first):\n\n| system call | {} |\n| --- | {} |\n",
            row.row.mount_options,
            row.row.cache.name(),
            tools.join(" | "),
            vec!["---:"; tools.len()].join(" | ")
        );
        for name in names {
            let cells: Vec<String> = row
                .cells
                .iter()
                .map(|c| {
                    text(c, &|k| {
                        k.syscalls.as_ref().map(|m| {
                            m.get(name)
                                .and_then(|n| k.per_entry(*n))
                                .map_or("0".to_string(), |x| format!("{x:.3}"))
                        })
                    })
                })
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
    }
    md
}

/// A cell's counts when both its counting runs succeeded.
fn counted(cell: &Cell) -> Option<&Counts> {
    cell.counts.as_ref().filter(|k| k.errors.is_empty())
}

/// One line of a counting table: the counting runs are apart from the timed ones, so a failed
/// timed run does not hide them.
fn counts_line(row: &RowResult, text: impl Fn(&Cell) -> String) -> String {
    let cells: Vec<String> = row.cells.iter().map(text).collect();
    format!("| `{}` | {} | {} |\n", row.row.mount_options, row.row.cache.name(), cells.join(" | "))
}

/// The columns of `counts.csv`: one line per cell and counter (instructions by kind of
/// instruction, system calls by name and in all).
pub const COUNTS_CSV_COLUMNS: &[&str] = &[
    "workload",
    "filesystem",
    "scenario",
    "mount_options",
    "cache",
    "tool",
    "kind",
    "source",
    "entries",
    "counter",
    "name",
    "count",
    "per_entry",
    "error",
];

/// The counting runs of every cell, one line per figure, so that any line stands on its own.
pub fn counts_csv(matrix: &Matrix) -> String {
    let mut out = COUNTS_CSV_COLUMNS.join(",") + "\n";
    for row in &matrix.rows {
        for cell in &row.cells {
            let Some(k) = &cell.counts else { continue };
            let mut figures: Vec<(&str, String, Option<u64>)> = Vec::new();
            figures.push(("instructions", "user".to_string(), k.user_instructions));
            if k.source == Source::Perf {
                figures.push(("instructions", "kernel".to_string(), k.kernel_instructions));
            }
            figures.push((
                "syscalls",
                "all".to_string(),
                k.syscalls.as_ref().map(|m| m.values().sum()),
            ));
            figures.extend(
                k.syscalls.iter().flatten().map(|(name, n)| ("syscalls", name.clone(), Some(*n))),
            );
            let source = k.source.name();
            for (counter, name, count) in figures {
                let fields = [
                    row.workload.clone(),
                    row.row.filesystem.clone(),
                    row.row.scenario.name().to_string(),
                    row.row.mount_options.clone(),
                    row.row.cache.name().to_string(),
                    cell.tool.clone(),
                    cell.kind.to_string(),
                    source.to_string(),
                    k.entries.to_string(),
                    counter.to_string(),
                    name,
                    count.map(|n| n.to_string()).unwrap_or_default(),
                    count
                        .and_then(|n| k.per_entry(n))
                        .map(|x| format!("{x:.4}"))
                        .unwrap_or_default(),
                    k.errors.join("; "),
                ];
                out += &fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",");
                out.push('\n');
            }
        }
    }
    out
}

/// The NFS client's RPCs per run of one row: one line per operation (most first), one column
/// per tool, the total last.
fn rpc_table(matrix: &Matrix, row: &RowResult) -> String {
    let mut ops: Vec<(&str, u64)> = Vec::new();
    for rpcs in row.cells.iter().filter_map(|c| c.rpcs.as_ref()) {
        for (op, n) in rpcs.largest_first() {
            match ops.iter_mut().find(|(o, _)| *o == op) {
                Some((_, sum)) => *sum += n,
                None => ops.push((op, n)),
            }
        }
    }
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let names: Vec<&str> = matrix.columns.iter().map(|c| c.name.as_str()).collect();
    let mut md = format!(
        "\nNFS RPCs per run until the data was stable, `{}` {} (median per operation, from /proc/self/mountstats):\n\n\
         | RPC | {} |\n| --- | {} |\n",
        row.row.mount_options,
        row.row.cache.name(),
        names.join(" | "),
        vec!["---:"; names.len()].join(" | ")
    );
    let line = |label: &str, count: &dyn Fn(&nfs::RpcCounts) -> u64| {
        let cells: Vec<String> = row
            .cells
            .iter()
            .map(|c| c.rpcs.as_ref().map_or("–".to_string(), |r| count(r).to_string()))
            .collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    for (op, _) in &ops {
        md += &line(op, &|r| r.get(op));
    }
    md + &line("total", &|r| r.total())
}

/// One line per row and reason, naming the columns that failed for it (a mount that fails
/// fails every column alike, and one line says so).
fn failure_lines(rows: &[RowResult]) -> Vec<String> {
    let mut groups: Vec<(&RowResult, &str, Vec<&str>)> = Vec::new();
    for row in rows {
        for cell in &row.cells {
            let Some(error) = cell.runs.iter().find_map(|r| r.error.as_deref()) else { continue };
            match groups.iter_mut().find(|(r, e, _)| std::ptr::eq(*r, row) && *e == error) {
                Some((_, _, tools)) => tools.push(&cell.tool),
                None => groups.push((row, error, vec![&cell.tool])),
            }
        }
    }
    groups
        .iter()
        .map(|(row, error, tools)| {
            format!(
                "- `{}` {}, {}: {error}",
                row.row.mount_options,
                row.row.cache.name(),
                tools.join(", ")
            )
        })
        .collect()
}

fn header(matrix: &Matrix) -> String {
    let names: Vec<&str> = matrix.columns.iter().map(|c| c.name.as_str()).collect();
    let aligns = vec!["---:"; names.len()];
    format!(
        "| mount options | cache | {} |\n| --- | --- | {} |",
        names.join(" | "),
        aligns.join(" | ")
    )
}

/// One table line: a failed cell says so; a clean one shows `text`.
fn table_line(
    row: &RowResult,
    present: fn(&Cell) -> Option<Spread>,
    text: impl Fn(&Cell) -> String,
) -> String {
    let cells: Vec<String> = row
        .cells
        .iter()
        .map(|c| {
            if c.failed > 0 {
                format!("failed {}/{}", c.failed, c.runs.len())
            } else if present(c).is_none() {
                "–".to_string()
            } else {
                text(c)
            }
        })
        .collect();
    format!("| `{}` | {} | {} |\n", row.row.mount_options, row.row.cache.name(), cells.join(" | "))
}

/// The median, its ratio to the baseline, and the device flushes per run where the device
/// counts them.
fn with_ratio(
    cell: &Cell,
    pick: fn(&Cell) -> Option<Spread>,
    base: Option<Spread>,
    flushes: Option<u64>,
) -> String {
    let Some(s) = pick(cell) else { return "–".to_string() };
    let mut text = match base.and_then(|b| ratio(s.median, b.median)) {
        Some(r) => format!("{} ({r:.2}×)", secs(s.median)),
        None => secs(s.median),
    };
    if let Some(flushes) = flushes {
        let _ = write!(text, " · {flushes} fl");
    }
    text
}

/// The CSV columns, one line per counted run.
pub const CSV_COLUMNS: &[&str] = &[
    "workload",
    "filesystem",
    "scenario",
    "mount_options",
    "applied_options",
    "cache",
    "tool",
    "kind",
    "run",
    "ok",
    "exit_code",
    "exit_s",
    "stable_s",
    "configured_s",
    "extract_s",
    "barrier_s",
    "rename_s",
    "dirsync_s",
    "engine_total_s",
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "syncfs_early",
    "sync_file_range",
    "rename",
    "peak_rss_bytes",
    "device_flushes",
    "device_bytes",
    "device_flushes_at_exit",
    "nfs_rpcs",
    "nfs_rpc_ops",
    "flush_p99_s",
    "writer_bytes",
    "writer_mib_s",
    "writer_device_flushes",
    "writer_device_bytes",
    "apt_dpkg_calls",
    "apt_unpack_s",
    "apt_configure_s",
    "error",
    "kernel",
    "cpus",
    "packages",
];

/// Every run of every cell, with the environment repeated on each line so that any line stands
/// on its own.
pub fn csv(matrix: &Matrix) -> String {
    let env = &matrix.environment;
    let mut out = CSV_COLUMNS.join(",") + "\n";
    for row in &matrix.rows {
        let packages: Vec<String> = env.workloads[row.row.workload]
            .packages
            .iter()
            .map(|p| format!("{} {} {} bytes", p.name, p.version, p.bytes))
            .collect();
        for cell in &row.cells {
            for run in &cell.runs {
                let opt = |v: Option<String>| v.unwrap_or_default();
                let e = run.engine.as_ref();
                let w = run.writer;
                let a = run.apt;
                let fields = [
                    row.workload.clone(),
                    row.row.filesystem.clone(),
                    row.row.scenario.name().to_string(),
                    row.row.mount_options.clone(),
                    opt(run.applied_options.clone()),
                    row.row.cache.name().to_string(),
                    cell.tool.clone(),
                    cell.kind.to_string(),
                    run.run.to_string(),
                    run.ok.to_string(),
                    opt(run.exit_code.map(|c| c.to_string())),
                    opt(run.exit_s.map(|s| format!("{s:.6}"))),
                    opt(run.stable_s.map(|s| format!("{s:.6}"))),
                    opt(run.configured_s.map(|s| format!("{s:.6}"))),
                    opt(e.map(|e| format!("{:.6}", e.phases.extract_s))),
                    opt(e.map(|e| format!("{:.6}", e.phases.barrier_s))),
                    opt(e.map(|e| format!("{:.6}", e.phases.rename_s))),
                    opt(e.map(|e| format!("{:.6}", e.phases.dirsync_s))),
                    opt(e.map(|e| format!("{:.6}", e.phases.total_s))),
                    opt(e.map(|e| e.syscalls.fsync.to_string())),
                    opt(e.map(|e| e.syscalls.fdatasync.to_string())),
                    opt(e.map(|e| e.syscalls.sync.to_string())),
                    opt(e.map(|e| e.syscalls.syncfs.to_string())),
                    opt(e.map(|e| e.syscalls.syncfs_early.to_string())),
                    opt(e.map(|e| e.syscalls.sync_file_range.to_string())),
                    opt(e.map(|e| e.syscalls.rename.to_string())),
                    opt(e
                        .map(|e| e.peak_rss_bytes)
                        .or(a.map(|a| a.peak_rss_bytes))
                        .map(|b| b.to_string())),
                    opt(run.device.map(|d| d.flushes.to_string())),
                    opt(run.device.map(|d| d.bytes.to_string())),
                    opt(run.device_at_exit.map(|d| d.flushes.to_string())),
                    opt(run.rpcs.as_ref().map(|r| r.total().to_string())),
                    opt(run.rpcs.as_ref().map(nfs::RpcCounts::to_field)),
                    opt(e.and_then(|e| e.flush_latency.all.p99_s).map(|s| format!("{s:.6}"))),
                    opt(w.map(|w| w.bytes.to_string())),
                    opt(w.map(|w| format!("{:.1}", w.mib_s))),
                    opt(w.and_then(|w| w.device).map(|d| d.flushes.to_string())),
                    opt(w.and_then(|w| w.device).map(|d| d.bytes.to_string())),
                    opt(a.map(|a| a.dpkg_calls.to_string())),
                    opt(a.map(|a| format!("{:.6}", a.unpack_s))),
                    opt(a.map(|a| format!("{:.6}", a.configure_s))),
                    opt(run.error.clone()),
                    env.kernel.clone(),
                    env.cpus.to_string(),
                    packages.join("; "),
                ];
                out += &fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",");
                out.push('\n');
            }
        }
    }
    out
}

/// RFC 4180 quoting: fields with a comma, quote or line break are quoted, quotes doubled.
fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_three_significant_digits() {
        assert_eq!(secs(0.004213), "0.00421");
        assert_eq!(secs(0.1234), "0.123");
        assert_eq!(secs(1.5), "1.50");
        assert_eq!(secs(123.4), "123");
        assert_eq!(secs(0.0), "0.000");
    }

    #[test]
    fn csv_fields_with_commas_and_quotes_are_quoted() {
        assert_eq!(csv_field("rw,relatime"), "\"rw,relatime\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
