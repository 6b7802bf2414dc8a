//! `unpack-bench --fs nfs` end to end: the kernel's NFS server and client (natively where the
//! kernel has them, else in the user-mode-linux guest the bench boots by itself), checked
//! through the RPC counts the bench reads from /proc/self/mountstats: counts, never times.
//!
//! What the counts show: an NFSv3 client writes a file's data UNSTABLE and makes it stable with
//! a COMMIT when the file is closed (close-to-open consistency flushes at close), so a default
//! mount sends COMMITs even for `none`, which never flushes; a `sync` mount writes every WRITE
//! FILE_SYNC and never needs a COMMIT.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{is_root, run};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Files of the synthetic package, and their size: several WRITEs each (wsize is at most 1 MiB).
const FILES: u64 = 4;
const SIZE: &str = "3M";

/// The counted run's RPCs of `tool` in the row mounted with `options`.
fn rpcs<'a>(rows: &'a [Value], options: &str, tool: &str) -> &'a Value {
    let row = rows
        .iter()
        .find(|r| r["filesystem"] == "nfs" && r["mount_options"] == options)
        .unwrap_or_else(|| panic!("no nfs row -o {options}"));
    let cell = row["cells"].as_array().unwrap().iter().find(|c| c["tool"] == tool).unwrap();
    let run = &cell["runs"][0];
    assert_eq!(run["ok"], true, "{options} {tool}: {run}");
    &run["rpcs"]
}

fn count(rpcs: &Value, op: &str) -> u64 {
    rpcs[op].as_u64().unwrap_or(0)
}

#[test]
fn a_default_mount_commits_at_close_and_a_sync_mount_never_commits() {
    if !is_root() {
        eprintln!("skipped: NFS exports and mounts need root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let spec = format!("{FILES}:{SIZE}");
    let r = run(Command::new(env!("CARGO_BIN_EXE_unpack-bench"))
        .env("TMPDIR", tmp.path())
        .args([
            "--fs",
            "nfs",
            "--synthetic",
            &spec,
            "-o",
            "vers=3",
            "-o",
            "vers=3,sync",
            "-s",
            "none,fsync",
            "--peers",
            "",
            "--runs",
            "1",
            "--out",
        ])
        .arg(&out));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert!(
        json["environment"]["nfs"].as_str().unwrap().contains("`vers=3,sync`"),
        "{}",
        json["environment"]
    );

    for tool in ["none", "fsync"] {
        let default = rpcs(rows, "vers=3", tool);
        assert!(count(default, "COMMIT") >= FILES, "{tool}: a COMMIT per file closed: {default}");
        assert!(count(default, "WRITE") >= FILES, "{tool}: {default}");
        let sync = rpcs(rows, "vers=3,sync", tool);
        assert_eq!(count(sync, "COMMIT"), 0, "{tool}: a sync mount writes FILE_SYNC: {sync}");
        assert!(count(sync, "WRITE") >= FILES, "{tool}: {sync}");
        for op in ["CREATE", "SETATTR", "ACCESS", "GETATTR", "LOOKUP", "RENAME"] {
            assert_eq!(
                count(default, op),
                count(sync, op),
                "{tool}: {op} is not about data: {default} / {sync}"
            );
        }
    }
    let plain =
        rows.iter().find(|r| r["filesystem"] == "ext4").expect("the backing filesystem's own row");
    assert!(plain["cells"][0]["runs"][0]["rpcs"].is_null(), "no RPCs on the backing filesystem");
    let csv = std::fs::read_to_string(out.join("matrix.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",nfs_rpcs,nfs_rpc_ops,"));
    assert!(csv.lines().any(|l| l.contains("COMMIT=")), "{csv}");
    assert_no_leftovers(tmp.path());
}

/// Nothing of the bench is mounted under `dir`, and nothing of it (the guest's directory, a
/// scratch directory) is left there.
fn assert_no_leftovers(dir: &Path) {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.canonicalize().unwrap();
    let left: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(&dir))
        .collect();
    assert!(left.is_empty(), "left mounted: {left:?}");
    let entries = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect::<Vec<_>>();
    assert!(entries.iter().all(|n| n == "out"), "left behind in TMPDIR: {entries:?}");
}

/// The guest's bench answers for the host's: its exit status and its message come back.
#[test]
fn a_usage_error_of_an_nfs_matrix_is_exit_2_with_the_reason() {
    if !is_root() {
        eprintln!("skipped: NFS exports and mounts need root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = run(Command::new(env!("CARGO_BIN_EXE_unpack-bench")).env("TMPDIR", tmp.path()).args([
        "--fs",
        "nfs,ext4",
        "--synthetic",
        "1:1k",
        "--runs",
        "1",
    ]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--fs nfs benches alone"), "{}", r.stderr);
    assert_no_leftovers(tmp.path());
}
