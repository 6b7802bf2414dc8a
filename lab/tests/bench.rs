//! `unpack-bench` end to end: the real bench binary driving the real `unpack`, dpkg and tar on
//! real filesystems on loop devices, checked through the files it writes.
//!
//! Every bench here gets its own `TMPDIR`, so that whatever it might leave behind (a mount, a
//! loop device, a backing file) is found by path and fails the test. Matrices are kept tiny
//! (one run after the warm-up, small synthetic packages): these tests pin behaviour, they never
//! assert a time.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{is_root, run, ForNobody, Run};
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use unpack_lab::scratchfs::{self, LoopDevice, Mounted};

/// One bench at a time: a bench calls sync(2), which flushes every filesystem of the machine,
/// so a bench running beside another would count the other's flushes on its devices.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn bench_bin() -> &'static str {
    env!("CARGO_BIN_EXE_unpack-bench")
}

/// `unpack-bench ARGS...` with `TMPDIR` set to `tmp`.
fn bench(tmp: &Path, args: &[&str]) -> Run {
    run(Command::new(bench_bin()).env("TMPDIR", tmp).args(args))
}

/// The same as the unprivileged user `nobody` (copies of the binaries it can reach).
fn bench_as_nobody(tmp: &Path, args: &[&str]) -> Run {
    let nobody = ForNobody::new(&[]);
    run(nobody.command("unpack-bench").env("TMPDIR", tmp).args(args))
}

/// The bench's `TMPDIR` for one test. What a bench leaves under it fails the test (see
/// [`leftovers`]) and is still taken down here, so a failing test leaks nothing either.
struct BenchTmp(tempfile::TempDir);

impl BenchTmp {
    fn new() -> BenchTmp {
        BenchTmp(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for BenchTmp {
    fn drop(&mut self) {
        for target in mounts_under(self.path()) {
            drop(Mounted::adopt(&target));
        }
        for (device, backing) in loops_under(self.path()) {
            drop(LoopDevice::adopt(&device, &backing));
        }
    }
}

/// Mount points under `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found
}

/// Loop devices whose backing file is under `dir`, with that file.
fn loops_under(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .map(|e| Path::new("/dev").join(e.file_name()))
        .filter_map(|dev| scratchfs::backing_file(&dev).map(|backing| (dev, backing)))
        .filter(|(_, backing)| backing.starts_with(dir))
        .collect()
}

/// Mounts and loop devices under `tmp`, and anything left in it.
fn leftovers(tmp: &Path) -> Vec<String> {
    let mut found: Vec<String> =
        mounts_under(tmp).iter().map(|m| format!("mount: {}", m.display())).collect();
    found.extend(
        loops_under(tmp).iter().map(|(d, b)| format!("loop: {} on {}", d.display(), b.display())),
    );
    found.extend(
        std::fs::read_dir(tmp).unwrap().map(|e| format!("file: {}", e.unwrap().path().display())),
    );
    found
}

/// Parses RFC 4180 CSV (quoted fields may hold commas and doubled quotes).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            let (mut fields, mut field, mut quoted, mut chars) =
                (Vec::new(), String::new(), false, line.chars().peekable());
            while let Some(c) = chars.next() {
                match (c, quoted) {
                    ('"', true) if chars.peek() == Some(&'"') => {
                        field.push('"');
                        chars.next();
                    }
                    ('"', _) => quoted = !quoted,
                    (',', false) => fields.push(std::mem::take(&mut field)),
                    _ => field.push(c),
                }
            }
            fields.push(field);
            fields
        })
        .collect()
}

/// CSV rows as maps from column name to field.
fn csv_records(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let rows = parse_csv(text);
    let header = &rows[0];
    rows[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.len(), header.len(), "every CSV line has every column: {r:?}");
            header.iter().cloned().zip(r.iter().cloned()).collect()
        })
        .collect()
}

/// The markdown table lines of a row (`| \`defaults\` | warm | ...`), split into cells.
fn table_lines<'a>(md: &'a str, options: &str, cache: &str) -> Vec<Vec<&'a str>> {
    let prefix = format!("| `{options}` | {cache} |");
    md.lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).skip(2).collect())
        .collect()
}

fn seconds(cell: &str) -> f64 {
    let number = cell.split_whitespace().next().unwrap_or_default();
    number.parse().unwrap_or_else(|_| panic!("not a time: {cell:?}"))
}

#[test]
fn a_small_matrix_writes_every_output_with_its_rows_and_columns_on_mounts_with_the_options_asked() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    let r = bench(
        tmp.path(),
        &[
            "--synthetic",
            "50:4k",
            "-o",
            "defaults",
            "-o",
            "nodelalloc",
            "-s",
            "none,fsync",
            "--peers",
            "dpkg,tar",
            "--runs",
            "1",
            "--out",
            out_dir,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new(), "the bench cleans up after itself");
    let tools = ["none", "fsync", "dpkg", "tar"];

    // matrix.md: one table per filesystem and scenario, four views of it: every cell a time,
    // then our strategies' flush latency.
    let md = std::fs::read_to_string(out.path().join("matrix.md")).unwrap();
    assert_eq!(md.matches("## synthetic 50:4k on ext4, install").count(), 1, "{md}");
    assert_eq!(
        md.matches("| mount options | cache | none | fsync | dpkg | tar |").count(),
        4,
        "{md}"
    );
    for options in ["defaults", "nodelalloc"] {
        let lines = table_lines(&md, options, "warm");
        assert_eq!(
            lines.len(),
            4,
            "exit, stable, spread and flush latency lines for {options}: {md}"
        );
        assert!(seconds(lines[3][1]) > 0.0, "fsync's p99 flush latency: {:?}", lines[3]);
        assert_eq!(
            [lines[3][0], lines[3][2], lines[3][3]],
            ["–"; 3],
            "none flushes nothing, the peers are not seen"
        );
        for line in &lines[..2] {
            assert_eq!(line.len(), tools.len());
            assert!(line[0].ends_with("(1.00×)"), "none is the baseline: {line:?}");
            for cell in line {
                assert!(seconds(cell) > 0.0);
            }
        }
        for cell in &lines[2] {
            let (exit, stable) = cell.split_once(" / ").unwrap_or_else(|| panic!("spread: {cell}"));
            assert!(exit.contains('–') && stable.contains('–'), "{cell}");
        }
    }
    assert!(md.contains("- `defaults` → `rw,"), "{md}");
    let applied = md.lines().find(|l| l.starts_with("- `nodelalloc` → ")).unwrap();
    assert!(applied.contains(",nodelalloc"), "nodelalloc was applied: {applied}");

    check_csv(out.path(), &tools);
    check_json(out.path(), &tools);
    // matrix.svg: grouped bars per option set, one per tool.
    let svg = std::fs::read_to_string(out.path().join("matrix.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    let texts: BTreeSet<&str> = svg.lines().map(str::trim).collect();
    for label in ["-o defaults", "-o nodelalloc", "none", "fsync", "dpkg", "tar"] {
        assert!(texts.contains(label), "the chart shows {label}");
    }
    assert!(svg.matches("<rect").count() > 2 * tools.len(), "a bar per cell");
}

/// The small matrix's matrix.csv, in `out`.
fn check_csv(out: &Path, tools: &[&str]) {
    // matrix.csv: every run of every cell, with the engine's counters where it is ours.
    let csv = std::fs::read_to_string(out.join("matrix.csv")).unwrap();
    let records = csv_records(&csv);
    assert_eq!(records.len(), 2 * tools.len(), "two option sets x four tools x one run");
    let cells: BTreeSet<(String, String)> =
        records.iter().map(|r| (r["mount_options"].clone(), r["tool"].clone())).collect();
    assert_eq!(cells.len(), records.len(), "one line per cell and run");
    for r in &records {
        assert_eq!(r["ok"], "true", "{r:?}");
        assert_eq!(r["exit_code"], "0");
        assert_eq!(r["filesystem"], "ext4");
        assert_eq!(r["scenario"], "install");
        let (exit, stable): (f64, f64) =
            (r["exit_s"].parse().unwrap(), r["stable_s"].parse().unwrap());
        assert!(exit > 0.0 && stable >= exit, "{r:?}");
        let nodelalloc = r["applied_options"].split(',').any(|o| o == "nodelalloc");
        assert_eq!(
            nodelalloc,
            r["mount_options"] == "nodelalloc",
            "applied options read back: {r:?}"
        );
        assert!(r["kernel"].starts_with("Linux") && r["cpus"].parse::<u32>().unwrap() >= 1);
        assert!(r["packages"].starts_with("synthetic-50-4k 1.0"), "{r:?}");
        let ours = r["kind"] == "strategy";
        assert_eq!(ours, ["none", "fsync"].contains(&r["tool"].as_str()));
        for counter in
            ["fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "rename", "peak_rss_bytes"]
        {
            assert_eq!(r[counter].is_empty(), !ours, "{counter} only for our engine: {r:?}");
        }
        let count = |c: &str| r[c].parse::<u64>().unwrap_or(0);
        match r["tool"].as_str() {
            "none" => assert_eq!(
                count("fsync")
                    + count("fdatasync")
                    + count("sync")
                    + count("syncfs")
                    + count("sync_file_range"),
                0,
                "none flushes nothing"
            ),
            "fsync" => assert!(count("fsync") >= 50, "fsync flushes each of the 50 files: {r:?}"),
            _ => {}
        }
        if ours {
            // Into an empty root the package is one new tree: renamed once (with the journal),
            // not once per file.
            assert!((1..50).contains(&count("rename")) && count("peak_rss_bytes") > 0, "{r:?}");
        }
        assert!(
            r["device_flushes"].is_empty() && r["device_bytes"].is_empty(),
            "the native device counts nothing"
        );
    }
}

/// The small matrix's matrix.json, in `out`.
fn check_json(out: &Path, tools: &[&str]) {
    // matrix.json: the same runs nested under rows, and the environment.
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    let env = &json["environment"];
    assert!(env["kernel"].as_str().unwrap().starts_with("Linux"));
    assert!(env["cpus"].as_u64().unwrap() >= 1);
    let package = &env["workloads"][0]["packages"][0];
    assert_eq!(
        (package["name"].as_str(), package["version"].as_str()),
        (Some("synthetic-50-4k"), Some("1.0"))
    );
    assert!(package["bytes"].as_u64().unwrap() > 50 * 4096 / 2);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let names: Vec<&str> =
            row["cells"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
        assert_eq!(names, tools);
        for cell in row["cells"].as_array().unwrap() {
            assert_eq!(cell["runs"].as_array().unwrap().len(), 1);
            assert_eq!(cell["failed"], 0);
            assert!(
                cell["stable"]["median"].as_f64().unwrap()
                    >= cell["exit"]["median"].as_f64().unwrap()
            );
        }
        let options = row["mount_options"].as_str().unwrap();
        let applied = row["applied_options"].as_str().unwrap();
        assert_eq!(applied.split(',').any(|o| o == "nodelalloc"), options == "nodelalloc", "{row}");
    }
}

#[test]
fn failed_runs_show_as_failed_never_as_times() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let deb = common::fixture("corrupt-data.deb");
    let r = bench(
        tmp.path(),
        &[deb.to_str().unwrap(), "-o", "defaults", "-s", "none", "--peers", "tar", "--runs", "1"],
    );
    assert_eq!(
        r.code, 3,
        "a matrix with failed runs is a matrix, but an incomplete one: {}",
        r.stderr
    );
    assert!(r.stderr.contains("2 counted run(s) failed, the matrix is incomplete"), "{}", r.stderr);
    for tool in ["none", "tar"] {
        assert!(
            r.stderr.contains(&format!("on ext4, install, -o defaults warm: {tool}")),
            "names {tool}: {}",
            r.stderr
        );
    }
    let lines = table_lines(&r.stdout, "defaults", "warm");
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    for line in &lines {
        assert_eq!(line, &["failed 1/1", "failed 1/1"], "{}", r.stdout);
    }
    assert!(
        r.stdout.contains("- `defaults` warm, none: exit status 3"),
        "the engine's reason: {}",
        r.stdout
    );
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// A row whose filesystem cannot be mounted (an option ext4 refuses) is a row of failed cells:
/// the matrix is printed, with the reason, and the exit status says it is incomplete.
#[test]
fn a_row_that_cannot_mount_prints_its_cells_as_failed_and_exits_3() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let r = bench(
        tmp.path(),
        &[
            "--synthetic",
            "10:1k",
            "-o",
            "defaults",
            "-o",
            "no_such_option",
            "-s",
            "none",
            "--peers",
            "",
            "--runs",
            "1",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("1 counted run(s) failed, the matrix is incomplete")
            && r.stderr.ends_with(
                "reasons: synthetic 10:1k on ext4, install, -o no_such_option warm: none\n"
            ),
        "only the cell that could not mount: {}",
        r.stderr
    );
    assert!(seconds(table_lines(&r.stdout, "defaults", "warm")[0][0]) > 0.0, "{}", r.stdout);
    assert_eq!(table_lines(&r.stdout, "no_such_option", "warm")[0], ["failed 1/1"], "{}", r.stdout);
    assert!(r.stdout.contains("- `no_such_option` warm, none: "), "the reason: {}", r.stdout);
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

#[test]
fn the_upgrade_scenario_with_a_cold_cache_runs_over_an_installed_copy() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        tmp.path(),
        &[
            "--synthetic",
            "30:1k",
            "-o",
            "defaults",
            "-s",
            "fsync",
            "--peers",
            "dpkg",
            "--scenario",
            "upgrade",
            "--cache",
            "cold",
            "--runs",
            "1",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let records = csv_records(&std::fs::read_to_string(out.path().join("matrix.csv")).unwrap());
    assert_eq!(records.len(), 2);
    for r in &records {
        assert_eq!(
            (r["scenario"].as_str(), r["cache"].as_str(), r["ok"].as_str()),
            ("upgrade", "cold", "true"),
            "{r:?}"
        );
    }
    let md = std::fs::read_to_string(out.path().join("matrix.md")).unwrap();
    assert!(md.contains("## synthetic 30:1k on ext4, upgrade"), "{md}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

#[test]
fn without_root_it_exits_2_and_points_at_dir() {
    let _serial = serial();
    let tmp = BenchTmp::new();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = bench_as_nobody(tmp.path(), &["--synthetic", "10:1k", "--runs", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("needs root") && r.stderr.contains("--dir"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    let r = bench_as_nobody(
        tmp.path(),
        &["--dir", tmp.path().to_str().unwrap(), "--cache", "cold", "--synthetic", "10:1k"],
    );
    assert_eq!(r.code, 2, "a cold cache needs root even with --dir: {r:?}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

#[test]
fn with_dir_it_benches_that_filesystem_as_mounted_without_root() {
    let _serial = serial();
    let tmp = BenchTmp::new();
    std::os::unix::fs::chown(tmp.path(), Some(65534), Some(65534)).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let r = bench_as_nobody(
        tmp.path(),
        &["--dir", dir, "--synthetic", "20:1k", "-s", "", "--peers", "tar", "--runs", "1"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let fstype = unpack::fs::mountinfo::for_path(tmp.path()).unwrap().fstype;
    assert!(r.stdout.contains(&format!("## synthetic 20:1k on {fstype}, install")), "{}", r.stdout);
    let lines = table_lines(&r.stdout, "as mounted", "warm");
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(seconds(lines[0][0]) > 0.0);
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new(), "the bench's directories are gone");
}

/// A default row that cannot mount is a failed row in every matrix anyone makes: ext4 refuses
/// journal_async_commit under data=ordered, ext3 refuses it outright.
#[test]
fn every_default_option_set_mounts_on_its_filesystem() {
    assert!(is_root(), "the integration tests run as root (loop devices)");
    for fs in scratchfs::FILESYSTEMS {
        let sets = [
            unpack_lab::bench::plan::default_option_sets(fs),
            unpack_lab::crash::matrix::default_option_sets(fs),
        ]
        .concat();
        for options in sets.iter().collect::<BTreeSet<_>>() {
            // Panics naming the filesystem and the options if mkfs or the mount fails; 512 MiB
            // is more than XFS's smallest.
            let scratch = common::scratch_sized(fs, options, 512 << 20);
            let mount = unpack::fs::mountinfo::for_path(scratch.path()).unwrap();
            assert_eq!(mount.fstype, *fs);
            for option in options.split(',').filter(|&o| o != "defaults") {
                assert!(
                    mount.has_option(option),
                    "{fs} -o {options}: {option} not in {}",
                    mount.options
                );
            }
        }
    }
}

#[test]
fn what_cannot_be_benched_is_a_usage_error_before_any_run() {
    let _serial = serial();
    let tmp = BenchTmp::new();
    for (args, says) in [
        (&["--synthetic", "10:1k", "-s", "nosuch"][..], "unknown strategy 'nosuch'"),
        (&["--synthetic", "10:1k", "--peers", "rpm"][..], "unknown peer 'rpm'"),
        (&["--synthetic", "10:1k", "--fs", "zfs"][..], "unknown filesystem 'zfs'"),
        (&["--synthetic", "10:none"][..], "SIZE is not a size"),
        // 1g for 1k: refused before a byte is written, not after the disk is full.
        (&["--synthetic", "100000000000:1g", "-o", "defaults"][..], "which has"),
        (&["--dir", "/", "-o", "nodelalloc", "--synthetic", "1:1"][..], "cannot be used with"),
        // The crash test's scenario: said whose it is.
        (
            &["--synthetic", "10:1k", "--scenario", "bootstrap"][..],
            "a scenario of unpack-crashtest",
        ),
        (&[][..], "required"),
    ] {
        let r = bench(tmp.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?} says {says}: {}", r.stderr);
    }
    // A package that is not there exits 1, its cause said once (not once per link of the chain).
    let r = bench(tmp.path(), &["/nonexistent/pkg.deb", "-o", "defaults"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "unpack-bench: /nonexistent/pkg.deb: No such file or directory (os error 2)"
    );
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_signal_stops_the_matrix_between_runs_and_takes_its_filesystem_down() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let mut child = Command::new(bench_bin())
        .env("TMPDIR", tmp.path())
        .args([
            "--synthetic",
            "100:4k",
            "-o",
            "defaults",
            "-s",
            "none",
            "--peers",
            "tar",
            "--runs",
            "1000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (without judging how long it takes) until a run's filesystem is mounted: by then the
    // bench is past its setup and inside the matrix.
    let tmp_name = tmp.path().to_string_lossy().into_owned();
    let mounted = || std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&tmp_name);
    for _ in 0..6000 {
        if mounted() || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(child.try_wait().unwrap().is_none(), "the matrix was still running");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(stderr.contains("stopped by signal 15"), "{stderr}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// `unpack-bench --device flush=1ms,bw=unlimited --synthetic 40:1k ARGS --out DIR`, which must
/// exit 0: the CSV's records and the markdown.
fn bench_on_vdisk(
    tmp: &Path,
    args: &[&str],
) -> (Vec<std::collections::BTreeMap<String, String>>, String) {
    let outdir = tempfile::tempdir().unwrap();
    let out = outdir.path().to_str().unwrap();
    let all =
        [&["--device", "flush=1ms,bw=unlimited", "--synthetic", "40:1k", "--out", out][..], args]
            .concat();
    let r = bench(tmp, &all);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let read = |name: &str| std::fs::read_to_string(outdir.path().join(name)).unwrap();
    (csv_records(&read("matrix.csv")), read("matrix.md"))
}

/// On a virtual disk every run counts the flushes that reached the device: per-file fsync pays
/// at least one per file, `none` none until it exits, and the markdown shows them beside the
/// times.
#[test]
fn a_virtual_device_counts_the_flushes_each_strategy_pays() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices, FUSE)");
    let tmp = BenchTmp::new();
    // commit=300: ext4's periodic journal commit (every 5 s) flushes too, and a loaded machine
    // can stretch a run across one; the test is about what each strategy asks for.
    let (runs, md) = bench_on_vdisk(
        tmp.path(),
        &["-o", "commit=300", "-s", "none,fsync,syncfs", "--peers", "", "--runs", "1"],
    );
    let flushes = |tool: &str, column: &str| -> u64 {
        let run =
            runs.iter().find(|r| r["tool"] == tool).unwrap_or_else(|| panic!("no {tool} run"));
        run[column].parse().unwrap_or_else(|_| panic!("{tool} {column}: '{}'", run[column]))
    };
    assert_eq!(
        flushes("none", "device_flushes_at_exit"),
        0,
        "none flushes nothing before it exits"
    );
    assert!(flushes("none", "device_flushes") > 0, "the syncfs after the run does");
    assert!(flushes("fsync", "device_flushes_at_exit") >= 40, "one per file at least");
    let syncfs = flushes("syncfs", "device_flushes_at_exit");
    assert!(syncfs > 0 && syncfs < 40, "one transaction's worth: {syncfs}");
    assert!(md.contains("device: flush=1ms,bw=unlimited") && md.contains(" fl |"), "{md}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// The bench runs the `unpack` beside it, else the first on PATH (the lab installed apart from
/// the engine); with neither, it says where it looked and runs nothing.
#[test]
fn the_engine_is_found_beside_the_bench_or_else_on_path() {
    let _serial = serial();
    let tmp = BenchTmp::new();
    let (alone, engines) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bench = alone.path().join("unpack-bench");
    std::fs::copy(bench_bin(), &bench).unwrap();
    std::fs::copy(common::unpack_bin(), engines.path().join("unpack")).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let args =
        ["--dir", dir, "--synthetic", "20:1k", "-s", "none", "--peers", "tar", "--runs", "1"];
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", engines.path().display());
    let r = run(Command::new(&bench).env("TMPDIR", tmp.path()).env("PATH", path).args(args));
    assert_eq!(r.code, 0, "{r:?}");
    let unpacked = &table_lines(&r.stdout, "as mounted", "warm")[0][0];
    assert!(
        seconds(unpacked) > 0.0,
        "the none cell is a time, run by the unpack on PATH:\n{}",
        r.stdout
    );
    let r = run(Command::new(&bench)
        .env("TMPDIR", tmp.path())
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .args(args));
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("the unpack engine binary is missing"), "{}", r.stderr);
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new(), "the bench's directories are gone");
}

/// The busy scenarios: a background writer dirties data during every run, and its throughput is
/// reported beside each tool. On another filesystem (its own virtual disk), `batch`'s sync(2)
/// makes that filesystem write the writer's dirty data during the unpack, and `syncfs` does not.
///
/// The observable is what reaches the writer's own device between the unpacker's spawn and its
/// exit: exact counts, not times. The writer has `busy::LEAD` bytes dirty before the spawn and
/// never flushes, so sync(2) must write at least those (every run of `batch`); with `syncfs`,
/// nothing flushes that filesystem during a run of a fraction of a second (background
/// writeback starts at 10% of memory dirty or 30 s old data, and its mkfs used no lazy init).
/// Only another process's sync(2) on this shared machine could write them, so `syncfs` is held
/// to its least run of three, not to each.
#[test]
fn a_background_writer_elsewhere_is_flushed_by_batch_and_not_by_syncfs() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices, FUSE)");
    let tmp = BenchTmp::new();
    let args = [
        "-o",
        "defaults",
        "-s",
        "batch,syncfs",
        "--peers",
        "tar",
        "--scenario",
        "busy-elsewhere,busy",
        "--runs",
        "3",
    ];
    let (runs, md) = bench_on_vdisk(tmp.path(), &args);
    let lead = unpack_lab::bench::busy::LEAD;
    let elsewhere = |tool: &str| -> Vec<u64> {
        let of_tool =
            runs.iter().filter(|r| r["scenario"] == "busy-elsewhere" && r["tool"] == tool);
        of_tool
            .map(|r| r["writer_device_bytes"].parse().unwrap_or_else(|_| panic!("{tool}: {r:?}")))
            .collect()
    };
    let (batch, syncfs) = (elsewhere("batch"), elsewhere("syncfs"));
    assert_eq!((batch.len(), syncfs.len()), (3, 3));
    assert!(batch.iter().all(|&b| b >= lead), "sync(2) writes the writer's dirty data: {batch:?}");
    assert!(
        syncfs.iter().min() < Some(&lead),
        "syncfs(2) leaves the other filesystem alone: {syncfs:?}"
    );
    for r in &runs {
        assert!(
            r["writer_bytes"].parse::<u64>().is_ok() && r["writer_mib_s"].parse::<f64>().is_ok(),
            "every tool's run has the writer beside it, the peer's too: {r:?}"
        );
        let own_device = r["scenario"] == "busy-elsewhere";
        assert_eq!(r["writer_device_flushes"].is_empty(), !own_device, "{r:?}");
        // Our strategies' flushes are timed (batch and syncfs flush); a peer's are not seen.
        assert_eq!(r["flush_p99_s"].parse::<f64>().is_ok(), r["kind"] == "strategy", "{r:?}");
    }
    assert!(md.contains("The 99th percentile of our flush calls' latency in a run"), "{md}");
    assert!(
        md.contains("## synthetic 40:1k on ext4, busy-elsewhere")
            && md.contains("## synthetic 40:1k on ext4, busy\n"),
        "{md}"
    );
    assert!(
        md.contains(
            "The background writer's throughput while the unpacker ran (on a filesystem of its own"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "The background writer's throughput while the unpacker ran (on the same filesystem"
        ),
        "{md}"
    );
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// A base system small enough for a test, as `fixtures/fetch-minbase.sh` lays one out: an
/// Essential package made of this machine's dpkg, dpkg-deb, dpkg-split, dpkg-query and GNU tar
/// with the libraries they load, busybox as sh, rm and diff, and do-nothing ldconfig and
/// start-stop-daemon (the programs dpkg wants on PATH), in the first stage; and a package that
/// depends on it. Returns the directory.
fn tiny_base(dir: &Path) -> PathBuf {
    let set = dir.join("tiny-base");
    let (base, leaf) = (dir.join("base-tree"), dir.join("leaf-tree"));
    let install = |from: &Path, to: PathBuf| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
    };
    let programs = ["dpkg", "dpkg-deb", "dpkg-split", "dpkg-query", "tar", "busybox"]
        .map(|p| Path::new("/usr/bin").join(p));
    for program in &programs {
        install(program, base.join(program.strip_prefix("/").unwrap()));
    }
    // busybox is the static one (busybox-static, as for the dpkg oracles): ldd fails on it.
    let ldd = run(Command::new("ldd").args(&programs[..programs.len() - 1]));
    assert_eq!(ldd.code, 0, "{ldd:?}");
    for lib in ldd
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|l| l.starts_with('/'))
    {
        let name = Path::new(lib).file_name().unwrap();
        install(
            &std::fs::canonicalize(lib).unwrap(),
            base.join("usr/lib/x86_64-linux-gnu").join(name),
        );
    }
    install(
        &std::fs::canonicalize("/lib64/ld-linux-x86-64.so.2").unwrap(),
        base.join("usr/lib64/ld-linux-x86-64.so.2"),
    );
    for applet in ["sh", "rm", "diff"] {
        std::os::unix::fs::symlink("busybox", base.join("usr/bin").join(applet)).unwrap();
    }
    std::fs::create_dir_all(base.join("usr/sbin")).unwrap();
    for tool in ["ldconfig", "start-stop-daemon"] {
        let path = base.join("usr/sbin").join(tool);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(leaf.join("usr/share/leaf")).unwrap();
    std::fs::write(leaf.join("usr/share/leaf/file"), "a leaf of the tiny base\n").unwrap();
    std::fs::create_dir_all(&set).unwrap();
    for (tree, control, deb) in [
        (
            &base,
            "Package: tinybase\nVersion: 1.0\nArchitecture: amd64\nEssential: yes\n",
            "tinybase_1.0_amd64.deb",
        ),
        (
            &leaf,
            "Package: leaf\nVersion: 1.0\nArchitecture: all\nDepends: tinybase\n",
            "leaf_1.0_all.deb",
        ),
    ] {
        std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
        std::fs::write(
            tree.join("DEBIAN/control"),
            format!("{control}Maintainer: unpack tests <root@localhost>\nDescription: tiny base\n"),
        )
        .unwrap();
        let built = run(Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zgzip", "--build"])
            .arg(tree)
            .arg(set.join(deb)));
        assert_eq!(built.code, 0, "{built:?}");
    }
    std::fs::write(set.join("first-stage.list"), "tinybase_1.0_amd64.deb\n").unwrap();
    set
}

/// The minbase scenario on a tiny base: the dpkg peers after their first stage and `unpack
/// --bootstrap` from the empty root each leave a system that `chroot ROOT dpkg --configure -a`
/// finishes, and every run has its time until configured after its time until stable.
#[test]
fn the_minbase_scenario_bootstraps_a_tiny_base_with_every_tool_and_configures_it() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices, chroot)");
    let tmp = BenchTmp::new();
    let work = tempfile::tempdir().unwrap();
    let set = tiny_base(work.path());
    let out = work.path().join("out");
    let r = bench(
        tmp.path(),
        &[
            "--scenario",
            "minbase",
            "-o",
            "defaults",
            "-s",
            "none,syncfs",
            "--runs",
            "1",
            "--out",
            out.to_str().unwrap(),
            set.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let records = csv_records(&std::fs::read_to_string(out.join("matrix.csv")).unwrap());
    let tools: Vec<&str> = records.iter().map(|r| r["tool"].as_str()).collect();
    assert_eq!(
        tools,
        ["none", "syncfs", "dpkg", "dpkg-unsafe"],
        "the default peers are the dpkg ones"
    );
    for r in &records {
        assert_eq!((r["scenario"].as_str(), r["ok"].as_str()), ("minbase", "true"), "{r:?}");
        let (stable, configured) =
            (r["stable_s"].parse::<f64>().unwrap(), r["configured_s"].parse::<f64>().unwrap());
        assert!(configured > stable, "{r:?}");
        assert_eq!(r["workload"], "tiny-base (2 packages)");
    }
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(
        md.contains("## tiny-base (2 packages) on ext4, minbase")
            && md.contains("Until the system was configured and stable"),
        "{md}"
    );
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// What the minbase scenario cannot run is a usage error before any run: a workload that is
/// not a fetch-minbase.sh directory, a synthetic package, a peer that does not install a system;
/// and so is what the apt-local scenario cannot run: a peer apt cannot drive, counting runs.
#[test]
fn the_minbase_scenario_refuses_what_does_not_install_a_system() {
    let _serial = serial();
    let tmp = BenchTmp::new();
    let work = tempfile::tempdir().unwrap();
    let no_list = work.path().join("no-list");
    std::fs::create_dir(&no_list).unwrap();
    std::fs::copy(common::fixture("other_1.0_all.deb"), no_list.join("other_1.0_all.deb")).unwrap();
    let deb = common::fixture("other_1.0_all.deb");
    let (deb, no_list) = (deb.to_str().unwrap(), no_list.to_str().unwrap());
    for (args, says) in [
        (
            &["--scenario", "minbase", deb][..],
            "needs one PACKAGE argument: the directory fixtures/fetch-minbase.sh DIR made",
        ),
        (&["--scenario", "minbase", "--synthetic", "10:1k"][..], "not a --synthetic package"),
        (
            &["--scenario", "minbase", "--peers", "dpkg,tar", no_list][..],
            "the tar peer does not install a system",
        ),
        (
            &["--scenario", "minbase", "-o", "defaults", no_list][..],
            "no first-stage.list; make the directory with fixtures/fetch-minbase.sh DIR",
        ),
        (&[no_list, deb][..], "a directory must be the only PACKAGE argument"),
        (&["--scenario", "apt-local", deb][..], "--scenario apt-local needs one PACKAGE argument"),
        (
            &["--scenario", "apt-local", "--peers", "eatmydata,tar", no_list][..],
            "the tar peer is not a dpkg apt can drive",
        ),
        (
            &["--scenario", "apt-local", "--counts", no_list][..],
            "--counts: not with --scenario apt-local",
        ),
    ] {
        let r = bench(tmp.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?} says {says}: {}", r.stderr);
    }
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// `--counts` adds two counting runs per cell: strace's tally of every process of the tool
/// agrees with the engine's own counters of its timed run, the peers' children are counted
/// (tar is dpkg-deb and tar, each an exec), and so are their instructions (tar retires more
/// than decompression alone, which it includes). Counts are exact; no time is asserted.
#[test]
fn counting_runs_tally_every_process_of_every_tool_per_entry() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices)");
    let tmp = BenchTmp::new();
    let outdir = tempfile::tempdir().unwrap();
    let out = outdir.path().to_str().unwrap();
    let args = [
        "--synthetic",
        "60:1k",
        "-o",
        "defaults",
        "-s",
        "none,writeback",
        "--peers",
        "tar,decompress",
        "--runs",
        "1",
        "--counts",
        "--out",
        out,
    ];
    let r = bench(tmp.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("counts.csv"), "{}", r.stderr);
    let read = |name: &str| std::fs::read_to_string(outdir.path().join(name)).unwrap();
    let (timed, counts, md) =
        (csv_records(&read("matrix.csv")), csv_records(&read("counts.csv")), read("matrix.md"));
    let count = |tool: &str, counter: &str, name: &str| -> u64 {
        let line = counts
            .iter()
            .find(|c| c["tool"] == tool && c["counter"] == counter && c["name"] == name);
        line.map_or(0, |c| {
            c["count"].parse().unwrap_or_else(|_| panic!("{tool} {counter} {name}: {c:?}"))
        })
    };
    for c in &counts {
        assert_eq!(c["error"], "", "{c:?}");
        assert_eq!(
            c["source"], "valgrind",
            "these machines have no hardware instructions counter: {c:?}"
        );
        // 60 files in their directories, and `./`.
        let entries: u64 = c["entries"].parse().unwrap();
        assert!(entries > 60 && entries < 80, "{c:?}");
    }
    for tool in ["none", "writeback"] {
        let engine = timed.iter().find(|r| r["tool"] == tool).unwrap();
        for call in ["fsync", "sync_file_range"] {
            assert_eq!(
                count(tool, "syscalls", call),
                engine[call].parse::<u64>().unwrap(),
                "{tool}: {call}, traced against the engine's report"
            );
        }
        assert_eq!(count(tool, "syscalls", "execve"), 1, "{tool}: the engine is one program");
    }
    assert_eq!(count("writeback", "syscalls", "sync_file_range"), 120, "two per file");
    assert_eq!(count("tar", "syscalls", "execve"), 2, "dpkg-deb and tar both counted");
    assert_eq!(count("tar", "syscalls", "fsync"), 0);
    assert!(count("tar", "syscalls", "openat") > 60, "tar creates the files");
    for tool in ["none", "writeback", "tar", "decompress"] {
        let all = count(tool, "syscalls", "all");
        let kinds: u64 = counts
            .iter()
            .filter(|c| c["tool"] == tool && c["counter"] == "syscalls" && c["name"] != "all")
            .map(|c| c["count"].parse::<u64>().unwrap())
            .sum();
        assert_eq!(all, kinds, "{tool}: the total is the sum of the kinds");
        assert!(count(tool, "instructions", "user") > 0, "{tool}");
    }
    assert!(
        count("tar", "instructions", "user") > count("decompress", "instructions", "user"),
        "tar's count has dpkg-deb's"
    );
    assert!(
        md.contains("Instructions per entry: user-space instructions")
            && md.contains("kernel instructions are not in this figure"),
        "{md}"
    );
    assert!(md.contains("| sync_file_range |"), "the per-kind table: {md}");
    assert!(md.contains("System calls per entry (strace -f -c, every kind):"), "{md}");
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// The apt-local scenario (issue 28) once per peer, on a virtual disk that counts flushes:
/// `apt-get upgrade` of the apt-local set through unpack-dpkg with syncfs, and apt with safe
/// dpkg, unsafe dpkg and under eatmydata (the default peers, from its chroot). Every run has
/// every figure (times, device flushes, apt's dpkg calls and their unpack and configure time,
/// peak RSS), and ends with the tree and database of the reference the preparation upgraded
/// with the dpkg peer (the bench fails a run that does not, and exits 3): so every peer's
/// result equals every other's. Needs the network once (fixtures/fetch-minbase.sh, about
/// 32 MB; eatmydata's packages). No time is asserted.
#[test]
fn the_apt_local_scenario_runs_apt_with_every_peer_to_the_same_tree_and_database() {
    let _serial = serial();
    assert!(is_root(), "the integration tests run as root (loop devices, FUSE, chroot)");
    let tmp = BenchTmp::new();
    let work = tempfile::tempdir().unwrap();
    let minbase = work.path().join("minbase");
    let fetch = run(Command::new(common::repo().join("fixtures/fetch-minbase.sh")).arg(&minbase));
    assert_eq!(fetch.code, 0, "fixtures/fetch-minbase.sh: {}", fetch.stderr);
    let out = work.path().join("out");
    let r = bench(
        tmp.path(),
        &[
            "--scenario",
            "apt-local",
            "--device",
            "flush=1ms,bw=unlimited",
            "-o",
            "defaults",
            "-s",
            "syncfs",
            "--runs",
            "1",
            "--out",
            out.to_str().unwrap(),
            minbase.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let records = csv_records(&std::fs::read_to_string(out.join("matrix.csv")).unwrap());
    let tools: Vec<&str> = records.iter().map(|r| r["tool"].as_str()).collect();
    assert_eq!(tools, ["syncfs", "dpkg", "dpkg-unsafe", "eatmydata"], "the apt peers by default");
    for r in &records {
        assert_eq!(
            (r["scenario"].as_str(), r["ok"].as_str(), r["error"].as_str()),
            ("apt-local", "true", ""),
            "{r:?}"
        );
        let number = |column: &str| -> f64 {
            r[column].parse().unwrap_or_else(|_| panic!("{column}: '{}' in {r:?}", r[column]))
        };
        assert!(number("exit_s") > 0.0 && number("stable_s") >= number("exit_s"), "{r:?}");
        assert!(number("device_flushes") >= number("device_flushes_at_exit"), "{r:?}");
        assert!(number("peak_rss_bytes") > 0.0, "{r:?}");
        // apt's calls: queries, one --unpack batch at least, --configure at least.
        assert!(number("apt_dpkg_calls") >= 2.0, "{r:?}");
        assert!(number("apt_unpack_s") > 0.0 && number("apt_configure_s") > 0.0, "{r:?}");
        assert!(number("apt_unpack_s") + number("apt_configure_s") < number("exit_s"), "{r:?}");
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    for cell in json["rows"][0]["cells"].as_array().unwrap() {
        for share in ["unpack_share", "configure_share"] {
            let x = cell[share].as_f64().unwrap_or_else(|| panic!("{share} in {cell}"));
            assert!(x > 0.0 && x < 1.0, "{share} {x} in {cell}");
        }
        assert!(cell["peak_rss_bytes"].as_u64().is_some_and(|b| b > 0), "{cell}");
        assert!(cell["device_flushes"].as_u64().is_some(), "{cell}");
    }
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(
        md.contains("on ext4, apt-local")
            && md.contains("ratio to `dpkg` of the same row")
            && md.contains("Where apt's time went"),
        "{md}"
    );
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}
