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

/// True when this kernel has NFS: then `--fs nfs` runs natively and boots no guest.
fn kernel_has_nfs() -> bool {
    let table = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let has = |name: &str| table.lines().any(|l| l.split_whitespace().last() == Some(name));
    has("nfs") && has("nfsd")
}

/// How a stand-in kernel behaves after its `--version`.
enum Fake {
    /// As Debian 12's user-mode-linux on a host with AMX: the console's last words, a panic,
    /// SIGABRT.
    Panics,
    /// Says the probe's line for the release, and for the bench's own boot prints its command
    /// line and powers off without the bench's exit status.
    Boots,
}

/// A kit directory whose `usr/bin/linux.uml` is a stand-in for a user-mode-linux kernel of
/// `release` (it never runs the init it is given: that would power the host off), with modules
/// for `modules_for` when given.
fn fake_kit(
    dir: &Path,
    release: &str,
    fake: Fake,
    modules_for: Option<&str>,
) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let kernel = dir.join("usr/bin/linux.uml");
    std::fs::create_dir_all(kernel.parent().unwrap()).unwrap();
    let after = match fake {
        Fake::Panics => "echo 'Checking that ptrace can change system call numbers...OK'
echo 'userspace - ptrace set fp regs failed, errno = 14'
echo 'Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b'
echo 'CPU: 0 PID: 1 Comm: init Not tainted 6.1.176 #1'
echo 'Stack:'
kill -ABRT $$"
            .to_string(),
        Fake::Boots => format!(
            "case $init in
*/init.sh) echo \"fake kernel booted: $*\"; exit 0 ;;
*) echo \"$init: userspace runs, kernel {release}\"; exit 0 ;;
esac"
        ),
    };
    let script = format!(
        "#!/bin/sh
[ \"$1\" = --version ] && {{ echo {release}; exit 0; }}
for arg; do case $arg in init=*) init=${{arg#init=}} ;; esac; done
{after}
"
    );
    std::fs::write(&kernel, script).unwrap();
    std::fs::set_permissions(&kernel, std::fs::Permissions::from_mode(0o755)).unwrap();
    let modules = dir.join("usr/lib/uml/modules");
    std::fs::create_dir_all(&modules).unwrap();
    if let Some(release) = modules_for {
        std::fs::create_dir_all(modules.join(release)).unwrap();
        std::fs::write(modules.join(release).join("modules.dep"), "").unwrap();
    }
    kernel
}

/// `unpack-bench --fs nfs` of a small package with the guest kit `kit`, in `tmp`.
fn bench_with_kit(kit: &Path, tmp: &Path) -> common::Run {
    run(Command::new(env!("CARGO_BIN_EXE_unpack-bench"))
        .env("TMPDIR", tmp)
        .env("UNPACK_BENCH_UML", kit)
        .args(["--fs", "nfs", "--synthetic", "1:1k", "--runs", "1", "--peers", "", "-s", "none"]))
}

/// A guest kernel that cannot run userspace here (Debian 12's 6.1 on a host with AMX) is one
/// error: the kernel and its version, the console's reason, the fix; exit 1 (the bench's own
/// failure, as a missing tool); the console's panic is not dumped, nothing is left behind.
#[test]
fn a_guest_kernel_that_cannot_run_userspace_is_one_error_naming_it_the_reason_and_the_fix() {
    if kernel_has_nfs() {
        eprintln!("skipped: this kernel has NFS, so no guest is booted");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let kit = tmp.path().join("kit");
    let kernel = fake_kit(&kit, "6.1.176", Fake::Panics, Some("6.1.176"));
    let r = bench_with_kit(&kit, tmp.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    let errors: Vec<&str> =
        r.stderr.lines().filter(|l| l.starts_with("unpack-bench: ")).skip(1).collect();
    assert_eq!(errors.len(), 1, "one error line after the guest notice: {}", r.stderr);
    let error = errors[0];
    for part in [
        &format!("unpack-bench: {}: ", kernel.display()),
        "(Linux 6.1.176) cannot run userspace on this host",
        "\"userspace - ptrace set fp regs failed, errno = 14\", then \"Kernel panic - not syncing",
        "xstate",
        "fixtures/fetch-uml.sh DIR",
        "UNPACK_BENCH_UML=DIR",
    ] {
        assert!(error.contains(part), "{part:?} not in: {error}");
    }
    assert!(!r.stderr.contains("CPU: 0 PID"), "the console stays out of the error: {}", r.stderr);
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "only the kit is left in TMPDIR: the guest's directory is gone"
    );
}

/// `UNPACK_BENCH_UML` naming a directory that holds no kit is an error naming it, before any
/// boot.
#[test]
fn a_kit_directory_without_a_kernel_is_refused_with_its_path() {
    if kernel_has_nfs() {
        eprintln!("skipped: this kernel has NFS, so no guest is booted");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let kit = tmp.path().join("empty");
    std::fs::create_dir(&kit).unwrap();
    let r = bench_with_kit(&kit, tmp.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    let path = kit.canonicalize().unwrap();
    assert!(
        r.stderr.contains(&format!(
            "{}: UNPACK_BENCH_UML names no user-mode-linux kit: no executable {}",
            kit.display(),
            path.join("usr/bin/linux.uml").display()
        )),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("fixtures/fetch-uml.sh"), "{}", r.stderr);
}

/// The kit's modules must be those of the release its kernel reported; the guest is then given
/// that directory on its kernel command line (init.sh loads the modules from there).
#[test]
fn the_guest_loads_the_kits_modules_of_the_release_its_kernel_reports() {
    if kernel_has_nfs() {
        eprintln!("skipped: this kernel has NFS, so no guest is booted");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let kit = tmp.path().join("kit");
    let kernel = fake_kit(&kit, "9.9.9", Fake::Boots, Some("9.9.8"));
    let r = bench_with_kit(&kit, tmp.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    let modules = kit.canonicalize().unwrap().join("usr/lib/uml/modules/9.9.9");
    assert!(
        r.stderr.contains(&format!(
            "{}: this user-mode-linux kernel is Linux 9.9.9, but {} has no modules.dep",
            kernel.canonicalize().unwrap().display(),
            modules.display()
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("fake kernel booted"), "not booted for the bench: {}", r.stderr);

    std::fs::create_dir_all(&modules).unwrap();
    std::fs::write(modules.join("modules.dep"), "").unwrap();
    let r = bench_with_kit(&kit, tmp.path());
    let booted = r
        .stderr
        .lines()
        .find(|l| l.starts_with("fake kernel booted: "))
        .unwrap_or_else(|| panic!("the kit's kernel booted for the bench: {}", r.stderr));
    assert!(
        booted.split(' ').any(|a| a == format!("UNPACK_GUEST_MODULES={}", modules.display())),
        "{booted}"
    );
    assert!(booted.contains("/init.sh "), "{booted}");
    assert_eq!(r.code, 1, "no exit status came back: {}", r.stderr);
    assert!(r.stderr.contains("ended without the bench's exit status"), "{}", r.stderr);
}
