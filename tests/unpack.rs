//! The `unpack` program against real archives on real filesystems (ext4 on loop devices):
//! faithful trees, confinement, all-or-nothing, the flush calls each strategy promises, the
//! lock, and the exit codes installer scripts branch on.

mod common;

use common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

const STRATEGIES: &[&str] = &["none", "fsync", "batch", "syncfs", "writeback", "parallel"];

fn unpack_ok(strategy: &str, packages: &[&Path], root: &Path) -> serde_json::Value {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--json".as_ref(), "-s".as_ref(), strategy.as_ref()];
    args.extend(packages.iter().map(|p| p.as_os_str()));
    args.push(root.as_os_str());
    let r = unpack(&args);
    assert_eq!(r.code, 0, "unpack -s {strategy} {packages:?}: {}", r.stderr);
    r.json()
}

/// `tree` with the mtime of each directory `existed` says the root already had set aside: such
/// a directory keeps its own owner and mode, and its mtime is what the renames into it leave, as
/// with dpkg (the archive's applies only to directories the unpack makes).
fn dir_mtimes_aside(
    tree: &std::collections::BTreeMap<std::path::PathBuf, Node>,
    existed: impl Fn(&Path) -> bool,
) -> std::collections::BTreeMap<std::path::PathBuf, Node> {
    let mut tree = tree.clone();
    for (_, node) in tree.iter_mut().filter(|(p, n)| n.kind == 'd' && existed(p)) {
        node.mtime = (0, 0);
    }
    tree
}

/// A new root `name` on `fs` with pkg-v1 installed, an installed system, and its snapshot, for
/// the tests that check an error leaves it as it was.
fn installed_root(
    fs: &Scratch,
    name: &str,
) -> (std::path::PathBuf, std::collections::BTreeMap<std::path::PathBuf, Node>) {
    let root = fs.subdir(name);
    unpack_ok("fsync", &[&fixture("pkg-v1_1.0_all.deb")], &root);
    let before = snapshot(&root);
    (root, before)
}

#[test]
fn every_compression_and_strategy_gives_the_tree_dpkg_deb_gives() {
    let fs = scratch("ext4", "defaults");
    for comp in ["gz", "xz", "zst", "bz2", "none", "lzma"] {
        let deb = fixture(&format!("comp-{comp}_1.0_all.deb"));
        let expected = reference_tree(&deb, &fs.path().join(format!("dpkg-{comp}")));
        assert!(expected.len() >= 5, "the fixture has content");
        for strategy in STRATEGIES {
            let root = fs.subdir(&format!("{comp}-{strategy}"));
            unpack_ok(strategy, &[&deb], &root);
            assert_same_tree(&snapshot(&root), &expected, &format!("comp-{comp} with {strategy}"));
        }
    }
}

/// The fixtures dpkg refuses are refused (exit 3, the root left empty), with or without a
/// database: a control.tar.bz2 (dpkg-deb reads the control member only uncompressed or gz, xz,
/// zst) and a data.tar of PAX headers (dpkg's tar reader refuses them; tests/refusals.rs runs
/// dpkg on such packages).
#[test]
fn the_fixtures_dpkg_refuses_are_refused() {
    let fs = scratch("ext4", "defaults");
    for (name, says) in [
        ("comp-bz2ctl_1.0_all.deb", "member 'control.tar.bz2' uses a compression"),
        ("pax_1.0_all.deb", "unsupported PAX tar header type 'x'"),
    ] {
        let root = fs.subdir(name);
        let r = unpack(["-s", "none", fixture(name).to_str().unwrap(), root.to_str().unwrap()]);
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{name}: {}", r.stderr);
        assert!(snapshot(&root).is_empty(), "{name}");
    }
}

#[test]
fn every_entry_type_owner_mode_and_mtime_is_reproduced() {
    assert!(is_root(), "the integration tests run as root (devices, owners, loop devices)");
    let fs = scratch("ext4", "defaults");
    for name in ["types_1.0_all.deb", "gnulong_1.0_all.deb", "underscore_1.0_all.deb"] {
        let deb = fixture(name);
        let expected = reference_tree(&deb, &fs.path().join(format!("dpkg-{name}")));
        // The engine makes its state directory var/lib/unpack before the transaction: var and
        // var/lib are then the root's, not the package's, and keep their own metadata.
        let state_parent = |p: &Path| p == Path::new("var") || p == Path::new("var/lib");
        let expected = dir_mtimes_aside(&expected, state_parent);
        for strategy in STRATEGIES {
            let root = fs.subdir(&format!("{name}-{strategy}"));
            unpack_ok(strategy, &[&deb], &root);
            assert_same_tree(
                &dir_mtimes_aside(&snapshot(&root), state_parent),
                &expected,
                &format!("{name} with {strategy}"),
            );
        }
    }
    // Spot checks that the comparison really covers what matters.
    let root = fs.path().join("types_1.0_all.deb-fsync");
    let tree = snapshot(&root);
    let kinds: std::collections::BTreeSet<char> = tree.values().map(|n| n.kind).collect();
    assert_eq!(kinds, ['b', 'c', 'd', 'f', 'l', 'p'].into_iter().collect());
    assert!(tree.values().any(|n| n.mode & 0o4000 != 0), "a setuid file");
    assert!(tree.values().any(|n| n.uid == 1234 && n.gid == 5678), "a file owned by 1234:5678");
}

#[test]
fn the_json_report_names_packages_phases_calls_and_the_mount_options() {
    let fs = scratch("ext4", "nodelalloc");
    let root = fs.subdir("root");
    let j = unpack_ok(
        "syncfs",
        &[&fixture("pkg-v1_1.0_all.deb"), &fixture("other_1.0_all.deb")],
        &root,
    );
    let packages = j["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 2);
    assert_eq!(packages[0]["name"], "pkg");
    assert_eq!(packages[0]["version"], "1.0");
    assert_eq!(packages[0]["architecture"], "all");
    assert_eq!(packages[0]["files"], 12);
    assert_eq!(packages[1]["name"], "other");
    assert_eq!(j["strategy"], "syncfs");
    assert_eq!(j["filesystem"]["type"], "ext4");
    assert_eq!(j["filesystem"]["source"], fs.fs.device().to_str().unwrap());
    assert!(
        j["filesystem"]["options"].as_str().unwrap().split(',').any(|o| o == "nodelalloc"),
        "{}",
        j["filesystem"]
    );
    for phase in ["extract_s", "barrier_s", "rename_s", "dirsync_s", "total_s"] {
        assert!(j["phases"][phase].as_f64().unwrap() >= 0.0, "{phase}");
    }
    // Two packages, one transaction: one barrier and one final syncfs, not one per package.
    assert_eq!(j["syscalls"]["syncfs"], 2);
    // The barrier's syncfs took the journal along: the fsyncs are the intent's, the journal's
    // rename's and its removal's.
    assert_eq!(j["syscalls"]["fsync"], 3);
    assert!(j["peak_rss_bytes"].as_u64().unwrap() > 0);

    let human = unpack([
        "-s",
        "none",
        fixture("many_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("many 1.0 (all): "), "{}", human.stdout);
    assert!(
        human.stdout.contains("strategy none") && human.stdout.contains("nodelalloc"),
        "{}",
        human.stdout
    );
}

/// The flushes each strategy promises, and no others, counted by the engine.
#[test]
fn each_strategy_makes_the_flush_calls_it_promises_and_no_others() {
    let fs = scratch("ext4", "defaults");
    let deb = fixture("many_1.0_all.deb");
    let reference = fs.path().join("reference");
    dpkg_extract(&deb, &reference);
    let tree = snapshot(&reference);
    let files = tree.values().filter(|n| n.kind == 'f').count() as u64;
    // Into an empty root every top-level directory starts a new tree, renamed once.
    let tops = tree.keys().filter(|p| p.components().count() == 1).count() as u64;
    assert!(
        tree.iter().filter(|(p, _)| p.components().count() == 1).all(|(_, n)| n.kind == 'd'),
        "the fixture's top level holds directories only"
    );
    // Per-file strategies fsync every directory in the barrier (the new trees' entries must be
    // durable before the journal: the root for the tops' names) and the root again after the
    // renames.
    let dirs_flushed = tree.values().filter(|n| n.kind == 'd').count() as u64 + 2;
    for strategy in STRATEGIES {
        let root = fs.subdir(strategy);
        let j = unpack_ok(strategy, &[&deb], &root);
        let c = &j["syscalls"];
        let n = |k: &str| c[k].as_u64().unwrap();
        // One rename per new tree, plus the journal's (txn.new -> txn).
        assert_eq!(n("rename"), tops + 1, "{strategy}: one rename per new tree and the journal's");
        assert_eq!(n("fdatasync"), 0, "{strategy}");
        // Durable strategies also flush their own bookkeeping: the intent file when the
        // transaction starts, the journal (but where the barrier synced its filesystem, which
        // took it along) and its directory before the first rename, and the directory again
        // once the journal is removed (a power cut after exit 0 must not find it).
        let journal = if *strategy == "none" { 0 } else { 4 };
        let (fsync, sync, syncfs, sfr) = match *strategy {
            "none" => (0, 0, 0, 0),
            "fsync" | "parallel" => (files + dirs_flushed + journal, 0, 0, 0),
            "batch" => (journal - 1, 2, 0, 0),
            "syncfs" => (journal - 1, 0, 2, 0),
            "writeback" => (files + dirs_flushed + journal, 0, 0, 2 * files),
            _ => unreachable!(),
        };
        assert_eq!(
            (n("fsync"), n("sync"), n("syncfs"), n("sync_file_range")),
            (fsync, sync, syncfs, sfr),
            "{strategy}: {c}"
        );
    }
}

/// Every counted flush is timed, `parallel`'s from several threads included: per kind, the
/// latency record holds as many calls as the count, and `all` holds them all. Times are output
/// only: the test checks their counts and their order, never a duration.
#[test]
fn every_flush_call_of_every_strategy_is_in_the_latency_record() {
    let fs = scratch("ext4", "defaults");
    let deb = fixture("many_1.0_all.deb");
    let kinds = ["fsync", "fdatasync", "sync", "syncfs", "sync_file_range"];
    for strategy in STRATEGIES {
        let j = unpack_ok(strategy, &[&deb], &fs.subdir(strategy));
        let (calls, latency) = (&j["syscalls"], &j["flush_latency"]);
        for kind in kinds.into_iter().chain(["all"]) {
            let expected = match kind {
                "all" => kinds.iter().map(|k| calls[k].as_u64().unwrap()).sum(),
                _ => calls[kind].as_u64().unwrap(),
            };
            let l = &latency[kind];
            assert_eq!(l["count"].as_u64(), Some(expected), "{strategy} {kind}: {latency}");
            let quantiles: Vec<Option<f64>> =
                ["p50_s", "p99_s", "max_s"].iter().map(|q| l[q].as_f64()).collect();
            if expected == 0 {
                assert_eq!(quantiles, [None, None, None], "{strategy} {kind}: {l}");
                assert_eq!(l["total_s"].as_f64(), Some(0.0), "{strategy} {kind}: {l}");
            } else {
                let q: Vec<f64> = quantiles
                    .into_iter()
                    .map(|q| q.unwrap_or_else(|| panic!("{strategy} {kind}: {l}")))
                    .collect();
                assert!(
                    q[0] <= q[1] && q[1] <= q[2] && q[2] <= l["total_s"].as_f64().unwrap(),
                    "{strategy} {kind}: {l}"
                );
            }
        }
    }
}

/// The engine's counters agree with what the kernel saw (strace), once per strategy family.
#[test]
fn the_engine_counters_agree_with_strace() {
    let fs = scratch("ext4", "defaults");
    let deb = fixture("many_1.0_all.deb");
    for strategy in ["none", "fsync", "writeback", "syncfs", "batch"] {
        let root = fs.subdir(strategy);
        let summary = fs.path().join(format!("{strategy}.strace"));
        let r = run(Command::new("strace")
            .args(["-f", "-c", "-U", "name,calls", "-o"])
            .arg(&summary)
            .args([
                "-e",
                "trace=fsync,fdatasync,sync,syncfs,sync_file_range,rename,renameat,renameat2",
            ])
            .arg(unpack_bin())
            .args(["--json", "-s", strategy])
            .arg(&deb)
            .arg(&root));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let j = r.json();
        let text = std::fs::read_to_string(&summary).unwrap();
        let traced = |name: &str| -> u64 {
            text.lines()
                .filter_map(|l| {
                    let mut it = l.split_whitespace();
                    let (sys, calls) = (it.next()?, it.next()?);
                    (sys == name).then(|| calls.parse::<u64>().ok()).flatten()
                })
                .sum()
        };
        for call in ["fsync", "sync", "sync_file_range"] {
            assert_eq!(
                traced(call),
                j["syscalls"][call].as_u64().unwrap(),
                "{strategy}: {call} by strace\n{text}"
            );
        }
        // The background syncs of the write phase are counted apart; strace sees them all.
        let syncfs = j["syscalls"]["syncfs"].as_u64().unwrap()
            + j["syscalls"]["syncfs_early"].as_u64().unwrap();
        assert_eq!(traced("syncfs"), syncfs, "{strategy}: syncfs by strace\n{text}");
        if strategy != "syncfs" {
            assert_eq!(j["syscalls"]["syncfs_early"], 0, "{strategy} syncs in the background");
        }
        assert_eq!(
            traced("renameat") + traced("renameat2") + traced("rename"),
            j["syscalls"]["rename"].as_u64().unwrap(),
            "{strategy}: renames\n{text}"
        );
    }
}

/// `writeback` opens each written file once at its barrier for both of dpkg's passes (the wait
/// for the early writeback, then the fsync), where dpkg opens it twice: an open by name is a
/// path lookup, and on NFS an ACCESS and a GETATTR round trip. The package has more files than
/// the barrier holds open at once, so its chunks are counted too. Counted by strace: the
/// barrier's opens are the read-only, non-blocking, never-following opens of the package's files.
#[test]
fn writeback_opens_each_written_file_once_at_its_barrier() {
    let fs = scratch("ext4", "defaults");
    let deb = fixture("many_1.0_all.deb");
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    let names: std::collections::BTreeSet<String> = contents
        .stdout
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.rsplit('/').next().map(String::from))
        .collect();
    for (strategy, opens_per_file) in [("writeback", 1), ("parallel", 1), ("fsync", 0), ("none", 0)]
    {
        let log = fs.path().join(format!("{strategy}.openat"));
        let r = run(Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=open,openat", "-o"])
            .arg(&log)
            .arg(unpack_bin())
            .args(["--json", "-s", strategy])
            .arg(&deb)
            .arg(fs.subdir(strategy)));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let files = r.json()["packages"][0]["files"].as_u64().unwrap();
        assert!(files > 256, "more files than the barrier holds open at once: {files}");
        let text = std::fs::read_to_string(&log).unwrap();
        let reopens = text
            .lines()
            .filter(|l| {
                l.contains("O_RDONLY|O_NOCTTY|O_NONBLOCK")
                    && l.contains("O_NOFOLLOW")
                    && !l.contains("O_CREAT")
            })
            .filter_map(|l| l.split('"').nth(1))
            .filter(|name| names.contains(name.trim_end_matches(".unpack-new")))
            .count() as u64;
        assert_eq!(
            reopens,
            opens_per_file * files,
            "{strategy}: opens of written files for their flush"
        );
    }
}

#[test]
fn an_upgrade_replaces_every_file_and_matches_the_new_version() {
    let fs = scratch("ext4", "defaults");
    let (v1, v2) = (fixture("pkg-v1_1.0_all.deb"), fixture("pkg-v2_2.0_all.deb"));
    // Every directory of v2 is one v1 made: each keeps v1's metadata (the same owner and mode
    // in these two versions), its mtime is the upgrade's.
    let expected = dir_mtimes_aside(&reference_tree(&v2, &fs.path().join("reference")), |_| true);
    for strategy in STRATEGIES {
        let root = fs.subdir(strategy);
        unpack_ok("none", &[&v1], &root);
        unpack_ok(strategy, &[&v2], &root);
        assert_same_tree(
            &dir_mtimes_aside(&snapshot(&root), |_| true),
            &expected,
            &format!("upgrade with {strategy}"),
        );
        assert!(leftover_temps(&root).is_empty());
    }
}

#[test]
fn a_merged_usr_root_keeps_its_symlinks_and_files_land_in_usr() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::create_dir_all(root.join("usr/lib")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    std::os::unix::fs::symlink("/usr/lib", root.join("lib")).unwrap();
    unpack_ok("fsync", &[&fixture("mergedusr_1.0_all.deb")], &root);
    assert!(std::fs::symlink_metadata(root.join("bin")).unwrap().file_type().is_symlink());
    assert!(std::fs::symlink_metadata(root.join("lib")).unwrap().file_type().is_symlink());
    assert!(root.join("usr/bin/mergedusr-tool").is_file());
    assert!(root.join("usr/lib/mergedusr/libmerged.so.1").is_file());
}

/// Packages that try to reach outside the root: refused with exit 3 and the root unchanged,
/// or confined to the root. Nothing ever appears outside.
#[test]
fn hostile_packages_never_write_or_link_outside_the_root() {
    let fs = scratch("ext4", "defaults");
    // Host directories a naive engine would write into.
    let host = ["/tmp/unpack-evil-dir", "/tmp/unpack-evil-rel"];
    for d in host {
        std::fs::create_dir_all(d).unwrap();
    }
    let passwd_links = std::fs::metadata("/etc/passwd")
        .map(|m| std::os::unix::fs::MetadataExt::nlink(&m))
        .unwrap();
    let refused = [
        "evil-dotdot.deb",
        "evil-dotdot-inner.deb",
        "evil-hardlink-out.deb",
        "evil-hardlink-abs.deb",
    ];
    for name in refused {
        let root = fs.subdir(name);
        unpack_ok("none", &[&fixture("other_1.0_all.deb")], &root);
        let before = snapshot(&root);
        let r = unpack(["-s", "fsync", fixture(name).to_str().unwrap(), root.to_str().unwrap()]);
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(name), "the message names the package: {}", r.stderr);
        assert_same_tree(&snapshot(&root), &before, name);
    }
    let confined = [
        ("evil-abs.deb", "tmp/unpack-evil-abs"),
        ("evil-symlink-then-file.deb", "tmp/unpack-evil-dir/owned"),
        ("evil-symlink-rel.deb", "tmp/unpack-evil-rel/owned"),
    ];
    for (name, inside) in confined {
        let root = fs.subdir(name);
        unpack_ok("fsync", &[&fixture(name)], &root);
        assert!(root.join(inside).is_file(), "{name}: confined to ROOT/{inside}");
    }
    let root = fs.subdir("hardlink-symlink");
    unpack_ok("fsync", &[&fixture("evil-hardlink-symlink.deb")], &root);
    let (s, h) = (
        std::fs::symlink_metadata(root.join("s")).unwrap(),
        std::fs::symlink_metadata(root.join("h")).unwrap(),
    );
    assert!(h.file_type().is_symlink(), "h is the symlink's inode, not /etc/passwd");
    assert_eq!(std::os::unix::fs::MetadataExt::ino(&s), std::os::unix::fs::MetadataExt::ino(&h));

    for d in host {
        let leftovers: Vec<_> = std::fs::read_dir(d).unwrap().collect();
        assert!(leftovers.is_empty(), "{d} was written to: {leftovers:?}");
        std::fs::remove_dir(d).unwrap();
    }
    for p in ["/tmp/unpack-evil-abs", "/escape", "/escape2", "/tmp/escape"] {
        assert!(!Path::new(p).exists(), "{p} exists");
    }
    let now = std::fs::metadata("/etc/passwd")
        .map(|m| std::os::unix::fs::MetadataExt::nlink(&m))
        .unwrap();
    assert_eq!(now, passwd_links, "/etc/passwd gained a hard link");
}

/// Truncated, garbage, empty, member-less, misordered and lying packages: exit 3, a message
/// naming the file, and the root (an installed system) exactly as it was.
#[test]
fn broken_packages_exit_3_and_leave_the_root_unchanged() {
    let fs = scratch("ext4", "defaults");
    let (root, before) = installed_root(&fs, "root");
    for name in [
        "empty.deb",
        "memberless.deb",
        "garbage.deb",
        "badversion.deb",
        "nodata.deb",
        "misordered.deb",
        "corrupt-data.deb",
        "truncated.deb",
        "truncated-tar.deb",
        "tar-lies.deb",
        "no-such-package.deb",
    ] {
        for strategy in ["none", "writeback"] {
            let r =
                unpack(["-s", strategy, fixture(name).to_str().unwrap(), root.to_str().unwrap()]);
            assert_eq!(r.code, 3, "{name}: {}", r.stderr);
            assert!(
                r.stderr.contains(name) && r.stderr.starts_with("unpack: error: "),
                "{name}: {}",
                r.stderr
            );
            assert_same_tree(&snapshot(&root), &before, name);
        }
    }
    let version = unpack([fixture("badversion.deb").to_str().unwrap(), root.to_str().unwrap()]);
    assert!(
        version.stderr.contains("format version 3.0"),
        "says which version it found: {}",
        version.stderr
    );

    // A package must be a file: a pipe (curl ... | unpack /dev/stdin ROOT), a named pipe that
    // nobody writes to (which must not hang the open), a directory.
    let fifo = fs.path().join("package.fifo");
    run(Command::new("mkfifo").arg(&fifo));
    // (Refused before the first read, so what the pipe would carry does not matter.)
    let piped = Command::new(unpack_bin())
        .args(["/dev/stdin", root.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .output()
        .unwrap();
    let directory = unpack([fs.path().to_str().unwrap(), root.to_str().unwrap()]);
    let named = unpack([fifo.to_str().unwrap(), root.to_str().unwrap()]);
    for (what, code, stderr) in [
        ("/dev/stdin", piped.status.code(), String::from_utf8_lossy(&piped.stderr).into_owned()),
        ("directory", Some(directory.code), directory.stderr),
        ("fifo", Some(named.code), named.stderr),
    ] {
        assert_eq!(code, Some(3), "{what}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{what}: {stderr}");
    }
    assert_same_tree(&snapshot(&root), &before, "pipes");
    // Redirected from a file, /dev/stdin is that file.
    let redirected = Command::new(unpack_bin())
        .args(["-q", "/dev/stdin", root.to_str().unwrap()])
        .stdin(std::fs::File::open(fixture("pkg-v2_2.0_all.deb")).unwrap())
        .status()
        .unwrap();
    assert!(redirected.success());
}

/// Several packages are one transaction: if the second is corrupt, the first is not installed
/// either, and the upgrade of an installed system leaves it byte for byte as it was.
#[test]
fn an_error_in_the_second_package_leaves_the_root_byte_for_byte_unchanged() {
    let fs = scratch("ext4", "defaults");
    for strategy in STRATEGIES {
        let (root, before) = installed_root(&fs, strategy);
        for second in ["corrupt-data.deb", "truncated.deb", "evil-dotdot.deb"] {
            let r = unpack([
                "-s",
                strategy,
                fixture("pkg-v2_2.0_all.deb").to_str().unwrap(),
                fixture(second).to_str().unwrap(),
                root.to_str().unwrap(),
            ]);
            assert_eq!(r.code, 3, "{strategy} {second}: {}", r.stderr);
            assert_same_tree(&snapshot(&root), &before, &format!("{strategy}: v2 then {second}"));
        }
    }
}

#[test]
fn the_same_path_in_two_packages_of_one_call_is_refused() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    let r = unpack([
        fixture("pkg-v1_1.0_all.deb").to_str().unwrap(),
        fixture("pkg-v2_2.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("already in package #1"), "{}", r.stderr);
    assert!(snapshot(&root).is_empty());
}

#[test]
fn a_package_that_conflicts_with_the_root_fails_before_any_rename() {
    let fs = scratch("ext4", "defaults");
    // The root has a file where the package has a directory.
    let root = fs.subdir("file-for-dir");
    std::fs::create_dir_all(root.join("usr/share")).unwrap();
    std::fs::write(root.join("usr/share/pkg"), "a file").unwrap();
    let before = snapshot(&root);
    let r = unpack([fixture("pkg-v1_1.0_all.deb").to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("usr/share/pkg"), "{}", r.stderr);
    assert_same_tree(&snapshot(&root), &before, "file where the package has a directory");

    // The root has a non-empty directory where the package has a file.
    let root = fs.subdir("dir-for-file");
    std::fs::create_dir_all(root.join("usr/bin/other-tool/inside")).unwrap();
    let before = snapshot(&root);
    let r = unpack([fixture("other_1.0_all.deb").to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("non-empty directory") && r.stderr.contains("other-tool"),
        "{}",
        r.stderr
    );
    assert_same_tree(&snapshot(&root), &before, "non-empty directory where the package has a file");

    // An empty directory is replaced.
    std::fs::remove_dir(root.join("usr/bin/other-tool/inside")).unwrap();
    unpack_ok("fsync", &[&fixture("other_1.0_all.deb")], &root);
    assert!(root.join("usr/bin/other-tool").is_file());
}

#[test]
fn a_second_unpack_into_a_locked_root_exits_5_or_waits() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    unpack_ok("none", &[&fixture("other_1.0_all.deb")], &root);
    let lock = root.join("var/lib/unpack/lock");
    // Hold the lock from another process, as a running unpack would.
    // --no-fork: the process we kill is the one holding the lock.
    let mut holder =
        Command::new("flock").arg("--no-fork").arg(&lock).args(["sleep", "60"]).spawn().unwrap();
    while run(Command::new("flock").args(["-n", "-E", "99"]).arg(&lock).arg("true")).code != 99 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = unpack([fixture("many_1.0_all.deb").to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 5);
    assert!(
        r.stderr.contains("locked by another unpack") && r.stderr.contains(root.to_str().unwrap()),
        "{}",
        r.stderr
    );
    assert!(!root.join("usr/share/many").exists(), "a locked-out unpack writes nothing");
    let waiter = Command::new(unpack_bin())
        .args(["--wait", "--quiet"])
        .arg(fixture("many_1.0_all.deb"))
        .arg(&root)
        .spawn()
        .unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(root.join("usr/share/many").is_dir());
}

#[test]
fn usage_errors_exit_2_and_a_missing_root_exits_4() {
    // clap's own errors carry the prefix of every error of the program, as the engine's do.
    for (args, says) in [
        (&[][..], "the following required arguments were not provided"),
        (&["--no-such-option", "a", "b"][..], "unexpected argument '--no-such-option' found"),
        (&["--recover", "--bootstrap", "a"][..], "the argument '--recover' cannot be used with"),
        (&["--jobs", "x", "a", "b"][..], "invalid value 'x' for '--jobs <N>'"),
    ] {
        let r = unpack(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with(&format!("unpack: error: {says}")), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("\nerror: "), "{args:?}: {}", r.stderr);
    }
    let r = unpack(["-s", "eatmydata", fixture("many_1.0_all.deb").to_str().unwrap(), "/tmp"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("unpack: error: unknown strategy 'eatmydata' (known: none, fsync,"),
        "{}",
        r.stderr
    );
    // An alias is taken, though completion scripts offer the names alone.
    let aliased = tempfile::tempdir().unwrap();
    let package = fixture("many_1.0_all.deb");
    let r =
        unpack(["-s", "sync", "-q", package.to_str().unwrap(), aliased.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // --jobs is bounded: a pool of a million fsync threads would take minutes to start.
    let root = tempfile::tempdir().unwrap();
    for jobs in ["0", "257", "1000000"] {
        let r = unpack([
            "-s",
            "parallel",
            "--jobs",
            jobs,
            fixture("many_1.0_all.deb").to_str().unwrap(),
            root.path().to_str().unwrap(),
        ]);
        assert_eq!(r.code, 2, "--jobs {jobs}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("--jobs must be 1 to 256, not {jobs}")), "{}", r.stderr);
    }
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0, "a usage error writes nothing");
    let r = unpack([fixture("many_1.0_all.deb").to_str().unwrap(), "/nonexistent/root"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("/nonexistent/root"), "{}", r.stderr);
    let help = unpack(["--help"]);
    assert_eq!(help.code, 0);
    assert!(
        help.stdout.contains("Exit codes:") && help.stdout.contains("5  ROOT is locked"),
        "{}",
        help.stdout
    );
}

/// A pipe whose reader is gone, as `unpack ... | head -c0` leaves one.
fn widowed_pipe() -> std::process::Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors, which are owned from here on.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end);
    std::process::Stdio::from(write_end)
}

/// Nobody reads stdout any more: the unpack is done and durable, so it exits 0 and warns that
/// the report was lost (print! would have panicked: exit 101). Nobody reads stderr: a bad
/// package still exits 3, the code scripts branch on.
#[test]
fn a_closed_stdout_or_stderr_loses_a_message_not_the_exit_status() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    let out = Command::new(unpack_bin())
        .args(["--json", fixture("many_1.0_all.deb").to_str().unwrap(), root.to_str().unwrap()])
        .stdout(widowed_pipe())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: the report could not be printed: Broken pipe")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(root.join("usr/share/many").is_dir());
    let bad = Command::new(unpack_bin())
        .args([fixture("garbage.deb").to_str().unwrap(), root.to_str().unwrap()])
        .stderr(widowed_pipe())
        .status()
        .unwrap();
    assert_eq!(bad.code(), Some(3));
}

/// A transaction holds a descriptor per directory it writes into. When the hard limit on open
/// files is below that (a shell's `ulimit -n`), the unpack fails in its write phase with exit 4,
/// a message that says what to do, and the root as it was.
#[test]
fn too_few_file_descriptors_exit_4_saying_why_and_the_root_unchanged() {
    let fs = scratch("ext4", "defaults");
    let (root, before) = installed_root(&fs, "root");
    // 60 directories of 50 one-byte files.
    let deb = common::deb_builder::write_deb(
        fs.path(),
        "dirs.deb",
        "data.tar",
        &common::deb_builder::text_tree(3000, 1),
    );
    for strategy in ["none", "fsync"] {
        let r = run(Command::new("sh")
            .args(["-c", "ulimit -n 32 && exec \"$0\" \"$@\"", unpack_bin(), "-q", "-s", strategy])
            .arg(&deb)
            .arg(&root));
        assert_eq!(r.code, 4, "{strategy}: {}", r.stderr);
        assert!(
            r.stderr.contains("Too many open files")
                && r.stderr.contains("raise the hard limit (ulimit -Hn)"),
            "{}",
            r.stderr
        );
        assert_same_tree(&snapshot(&root), &before, strategy);
    }
}

/// What a progress display is told (the `unpack` program's bar names them): each package as
/// the writer reaches it, in the call's order, then the barrier, then the renames; and the
/// bytes read grow to the packages' size.
#[test]
fn the_phase_callback_names_each_package_then_the_barrier_then_the_renames() {
    use std::sync::{Arc, Mutex};
    let packages = [fixture("pkg-v1_1.0_all.deb"), fixture("other_1.0_all.deb")];
    let root = tempfile::tempdir().unwrap();
    let phases = Arc::new(Mutex::new(Vec::new()));
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let mut options = unpack::Options::new(unpack::durability::by_name("syncfs", 1).unwrap());
    let seen = phases.clone();
    options.phase = Some(Arc::new(move |phase| {
        let said = match phase {
            unpack::Phase::Package(path) => path.display().to_string(),
            other => format!("{other:?}"),
        };
        seen.lock().unwrap().push(said);
    }));
    let read = bytes.clone();
    options.progress = Some(Arc::new(move |done, total| read.lock().unwrap().push((done, total))));
    unpack::unpack(&packages, root.path(), &options).unwrap();
    let said = phases.lock().unwrap().clone();
    let expected: Vec<String> = packages
        .iter()
        .map(|p| p.display().to_string())
        .chain(["Barrier".to_string(), "Renames".to_string()])
        .collect();
    assert_eq!(said, expected);
    let total: u64 = packages.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert_eq!(bytes.lock().unwrap().last(), Some(&(total, total)));
}

#[test]
fn list_strategies_prints_each_with_its_guarantee_in_aligned_columns() {
    let r = unpack(["--list-strategies"]);
    assert_eq!(r.code, 0);
    for s in STRATEGIES {
        assert!(r.stdout.lines().any(|l| l.starts_with(s)), "{s} missing:\n{}", r.stdout);
    }
    assert!(r.stdout.contains("batch (sync)"));
    assert!(r.stdout.contains("default: syncfs"));
    // The second column starts where its heading does on every line of the table, after a
    // name (and at least two spaces) or after spaces alone, and no line is wider than 100.
    let table: Vec<&str> = r.stdout.lines().take_while(|l| !l.is_empty()).collect();
    let column = table[0].find("WHAT IT DOES").expect("a heading");
    for line in &table[1..] {
        let (name, text) = line.split_at(column);
        assert!(
            name.ends_with("  ") && !text.starts_with(' ') && !text.is_empty(),
            "not aligned at column {column}: {line:?}"
        );
        let name = name.trim_end();
        assert!(
            name.is_empty() || STRATEGIES.iter().any(|s| name.starts_with(s)),
            "{name:?} is no strategy: {line:?}"
        );
        assert!(line.chars().count() <= 100, "wider than 100 columns: {line:?}");
    }
    for s in unpack::durability::ALL {
        let flat = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&format!("guarantee: {}", s.guarantee)), "{}", s.name);
        assert!(flat.contains(s.idea), "{}", s.name);
    }
}

#[test]
fn a_read_only_root_exits_4_before_writing_anything() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    unpack_ok("none", &[&fixture("pkg-v1_1.0_all.deb")], &root);
    let before = snapshot(&root);
    let r = run(Command::new("mount").args(["-o", "remount,ro"]).arg(fs.path()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = unpack([fixture("pkg-v2_2.0_all.deb").to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    assert_same_tree(&snapshot(&root), &before, "read-only root");
}

/// Device nodes need root: a user's unpack refuses them with exit 4 (a permission the caller
/// lacks, not a bad package) naming the entry and the package, and a user's unpack of
/// everything else works.
#[test]
fn devices_without_root_exit_4_naming_the_entry() {
    let fs = scratch("ext4", "defaults");
    let user_dir = fs.subdir("user");
    std::fs::set_permissions(&user_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .unwrap();
    let nobody = ForNobody::new(&["devices-only.deb", "types-nodev_1.0_all.deb"]);
    let as_nobody = |deb: &str| {
        let root = tempfile::tempdir_in(&user_dir).unwrap().keep();
        std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let r =
            run(nobody.command("unpack").args(["-s", "fsync"]).arg(nobody.path(deb)).arg(&root));
        (r, root)
    };
    let (r, root) = as_nobody("devices-only.deb");
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.starts_with("unpack: error: ")
            && r.stderr.contains("usr/share/devices-only/null: creating a device node")
            && r.stderr.contains("device nodes need root")
            && r.stderr.contains("devices-only.deb"),
        "{}",
        r.stderr
    );
    assert!(snapshot(&root).is_empty(), "{:?}", snapshot(&root));
    let (r, root) = as_nobody("types-nodev_1.0_all.deb");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(root.join("hello.txt").exists() || !snapshot(&root).is_empty());
    // The user keeps the files, so the package's setuid-root and setgid-root programs must not
    // become set-id the user: the bits go, the rest of the mode stays (as GNU tar does).
    for (name, archived) in [("usr/bin/types-setuid", 0o4755), ("usr/bin/types-setgid", 0o2755)] {
        let meta = std::fs::metadata(root.join(name)).unwrap();
        assert_eq!(meta.mode() & 0o7777, archived & 0o777, "{name}");
        assert_eq!(meta.uid(), 65534, "{name} belongs to nobody");
    }
}

/// A root whose /usr is a filesystem of its own: a package entirely under /usr has the barrier
/// sync only that one, so the journal, in the root's `var/lib/unpack`, gets an fsync of its
/// own, and the package is still whole and durable.
#[test]
fn the_journal_gets_its_own_fsync_where_the_barrier_did_not_sync_its_filesystem() {
    if !is_root() {
        eprintln!("skipped: needs root for loop devices");
        return;
    }
    let outer = scratch("ext4", "defaults");
    let root = outer.subdir("root");
    std::fs::create_dir(root.join("usr")).unwrap();
    let usr_image = tempfile::Builder::new().prefix("unpack-test-usr").tempdir().unwrap();
    let usr = unpack_lab::scratchfs::ScratchFs::create(
        "ext4",
        &usr_image.path().join("usr.img"),
        64 << 20,
        &root.join("usr"),
        "defaults",
    )
    .unwrap();
    let deb = fixture("many_1.0_all.deb");
    let r = unpack(["--json", "-s", "syncfs", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(
        j["syscalls"]["syncfs"], 2,
        "/usr's filesystem at the barrier and after the renames"
    );
    assert_eq!(j["syscalls"]["fsync"], 4, "the intent, the journal, its rename and its removal");
    // /usr is the mount point the test made: its metadata is the root's, not the package's.
    let expected =
        dir_mtimes_aside(&reference_tree(&deb, &usr_image.path().join("reference")), |p| {
            p == Path::new("usr")
        });
    let mut tree = dir_mtimes_aside(&snapshot(&root), |p| p == Path::new("usr"));
    tree.retain(|p, _| !p.starts_with("usr/lost+found"));
    assert_same_tree(&tree, &expected, "many_1.0 with /usr a filesystem of its own");
    drop(usr);
}
