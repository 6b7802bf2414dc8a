//! The recovery journal and recovery's walks are attacker input: a hostile root (a container
//! image's rootfs) can hold any journal and any tree. Each test plants one and runs the real
//! binary, `unpack --recover ROOT` and a plain unpack into ROOT, and checks that nothing outside
//! ROOT changes, that a journal naming anything but the engine's own names is reported damaged,
//! and that recovery neither overflows nor crosses a mount point at any depth.
mod common;

use common::*;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The magic line of the journal format the engine reads.
const MAGIC: &str = "unpack-journal 2";

/// The journal format, written here by hand (not by the engine's encoder, which writes only
/// what the engine means): the magic, `records` as they are, the count and FNV-1a checksum.
fn journal(magic: &str, records: &[String]) -> Vec<u8> {
    let mut body = format!("{magic}\n").into_bytes();
    for r in records {
        body.extend_from_slice(r.as_bytes());
        body.push(b'\n');
    }
    let sum = body
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut out = body;
    out.extend_from_slice(format!("E {} {sum:016x}\n", records.len()).as_bytes());
    out
}

/// A tar header of `kind` and `mode`, owned by root, as dpkg-deb writes them.
fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(1_700_000_000);
    h
}

/// Plants `bytes` as ROOT's journal, with an intent beside it.
fn plant(root: &Path, bytes: &[u8]) {
    let state = root.join("var/lib/unpack");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("txn"), bytes).unwrap();
    std::fs::write(state.join("intent"), b"").unwrap();
}

/// Plants an intent without a journal: a transaction interrupted in its write phase.
fn plant_intent(root: &Path) {
    std::fs::create_dir_all(root.join("var/lib/unpack")).unwrap();
    std::fs::write(root.join("var/lib/unpack/intent"), b"").unwrap();
}

fn recover(root: &Path) -> Run {
    unpack(["--recover", root.to_str().unwrap()])
}

/// A root beside a `host` tree that a journal aims at: temporary names and an empty directory
/// in both, and symlinks from the root to the host (relative and absolute) and within the root.
fn trapped(fs: &Scratch, name: &str) -> (PathBuf, PathBuf) {
    let (root, host) = (fs.subdir(&format!("{name}-root")), fs.subdir(&format!("{name}-host")));
    for dir in [root.join("usr/bin"), root.join("etc"), root.join("sub/dir"), host.join("empty")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for file in [
        root.join("usr/bin/tool.unpack-new"),
        root.join("sub/dir/f.unpack-new"),
        host.join("secret"),
        host.join("secret.unpack-new"),
    ] {
        std::fs::write(file, b"data").unwrap();
    }
    symlink(format!("../{name}-host"), root.join("link")).unwrap();
    symlink(&host, root.join("abs")).unwrap();
    symlink("sub/dir", root.join("inside")).unwrap();
    (root, host)
}

/// Journals that name something outside their directory: each is damaged, whatever the way
/// in, and the host beside the root is untouched after `--recover` and after a plain unpack.
#[test]
fn a_planted_journal_with_names_that_leave_their_directory_changes_nothing_outside_the_root() {
    let fs = scratch("ext4", "defaults");
    let cases = |host: &Path| {
        let h = host.display();
        vec![
            ("absolute temporary name", format!("R . {h}/secret.unpack-new stolen 0")),
            ("absolute name", format!("R usr/bin tool.unpack-new {h}/secret 0")),
            (
                "name with '/' through a symlink of the root",
                "R . link/secret.unpack-new link/secret 0".to_string(),
            ),
            ("name with '..'", "R usr/bin tool.unpack-new ../../../x-host/secret 0".to_string()),
            ("temporary name '..'", "R . .. x 0".to_string()),
            ("temporary name without the suffix", "R abs secret secret2 0".to_string()),
            ("absolute directory", format!("R {h} secret.unpack-new secret 0")),
        ]
    };
    for (mode, run) in [("--recover", true), ("unpack", false)] {
        for (i, (what, record)) in cases(Path::new("/HOST")).into_iter().enumerate() {
            let name = format!("{}-{i}", if run { "r" } else { "u" });
            let (root, host) = trapped(&fs, &name);
            let record = record
                .replace("/HOST", host.to_str().unwrap())
                .replace("x-host", &format!("{name}-host"));
            plant(&root, &journal(MAGIC, &["P evil%201.0".to_string(), record.clone()]));
            let before = snapshot(&host);
            let r = if run {
                recover(&root)
            } else {
                unpack([
                    "-q",
                    "-s",
                    "none",
                    fixture("other_1.0_all.deb").to_str().unwrap(),
                    root.to_str().unwrap(),
                ])
            };
            assert_same_tree(&snapshot(&host), &before, &format!("{mode}, {what}: {record}"));
            assert_eq!(r.code, 0, "{mode}, {what}: {}", r.stderr);
            let said = if run { &r.stdout } else { &r.stderr };
            assert!(
                said.contains("was damaged (") && said.contains("discarded"),
                "{mode}, {what}: {said}"
            );
            // Rolled back instead: the root's own temporary names are gone.
            assert!(
                leftover_temps(&root).is_empty(),
                "{mode}, {what}: {:?}",
                leftover_temps(&root)
            );
        }
    }
}

/// A journal whose directory is a symlink now (a journal's directories are canonical, so the
/// tree changed since it was written) is refused, exit 4 naming the path, nothing renamed,
/// even when the symlink stays inside the root; one through an absolute symlink likewise.
#[test]
fn a_journal_directory_that_is_a_symlink_now_is_refused_and_nothing_is_renamed() {
    let fs = scratch("ext4", "defaults");
    for (i, dir) in ["inside", "abs", "link", "sub/dir/../dir"].into_iter().enumerate() {
        let (root, host) = trapped(&fs, &format!("s{i}"));
        let records = [
            "R usr/bin tool.unpack-new tool 0".to_string(),
            format!("R {dir} f.unpack-new f 0"),
            format!("R {dir} secret.unpack-new secret 0"),
        ];
        plant(&root, &journal(MAGIC, &records));
        let (root_before, host_before) = (snapshot(&root), snapshot(&host));
        let r = recover(&root);
        assert_same_tree(&snapshot(&host), &host_before, dir);
        if dir.contains("..") {
            // Not even a directory the engine could have written: damaged, rolled back.
            assert_eq!(r.code, 0, "{dir}: {}", r.stderr);
            assert!(r.stdout.contains("damaged ("), "{dir}: {}", r.stdout);
            continue;
        }
        assert_eq!(r.code, 4, "{dir}: {}", r.stderr);
        let first = dir.split('/').next().unwrap();
        assert!(
            r.stderr.contains(&format!(
                "{}: opening a directory the journal names: a symlink now",
                root.join(first).display()
            )),
            "{dir}: {}",
            r.stderr
        );
        // Not even the rename in a directory that resolves: nothing happens before all do.
        assert_same_tree(&snapshot(&root), &root_before, dir);
    }
}

/// Version 1 journals held directory-metadata records, which chmod and chown a directory by a
/// name the journal gives: such a journal is damaged now, and the directory keeps its owner
/// and mode.
#[test]
fn an_older_journal_with_a_directory_metadata_record_is_damaged_and_changes_nothing() {
    let fs = scratch("ext4", "defaults");
    let (root, host) = trapped(&fs, "m");
    for dir in [root.join("etc"), root.clone()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for magic in ["unpack-journal 1", MAGIC] {
        // The root's own directory, one of the root's, one through a symlink to the host.
        let records =
            ["M . 777 1000 1000 0 0", "M etc 4777 1000 1000 0 0", "M link 777 1000 1000 0 0"];
        plant(&root, &journal(magic, &records.map(String::from)));
        let (root_before, host_before) = (snapshot(&root), snapshot(&host));
        let r = recover(&root);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("damaged ("), "{magic}: {}", r.stdout);
        let etc = std::fs::metadata(root.join("etc")).unwrap();
        assert_eq!(
            (etc.mode() & 0o7777, etc.uid()),
            (0o755, 0),
            "{magic}: etc keeps its mode and owner"
        );
        let top = std::fs::metadata(&root).unwrap();
        assert_eq!(
            (top.mode() & 0o7777, top.uid()),
            (0o755, 0),
            "{magic}: the root keeps its mode and owner"
        );
        assert_same_tree(&snapshot(&host), &host_before, magic);
        // The rollback removed the root's temporary names and nothing else.
        let mut expected = root_before;
        expected.retain(|p, _| !p.to_string_lossy().ends_with(".unpack-new"));
        let mut now = snapshot(&root);
        for tree in [&mut expected, &mut now] {
            tree.retain(|_, n| n.kind != 'd');
        }
        assert_same_tree(&now, &expected, magic);
    }
}

/// A journal larger than the engine ever writes is damaged, and read no further than the
/// bound (a sparse file of 4 GiB: reading it whole would take the memory of the machine).
#[test]
fn an_oversized_journal_is_damaged_without_being_read_whole() {
    let fs = scratch("ext4", "defaults");
    let (root, _) = trapped(&fs, "big");
    plant(&root, &journal(MAGIC, &[]));
    let txn =
        std::fs::OpenOptions::new().write(true).open(root.join("var/lib/unpack/txn")).unwrap();
    txn.set_len(4 << 30).unwrap();
    let r = run(Command::new("prlimit")
        .arg("--as=2147483648")
        .arg(unpack_bin())
        .arg("--recover")
        .arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("damaged (") && r.stdout.contains("more than the 268435456"),
        "{}",
        r.stdout
    );
}

/// A directory the engine can never have written into: deeper than an entry may be.
fn mkdir_chain(top: &Path, depth: usize, leaf: &str) {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW;
    let mut dir: OwnedFd = rustix::fs::open(top, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(&dir, "d", flags, Mode::empty()).unwrap();
    }
    let f = rustix::fs::openat(
        dir.as_fd(),
        leaf,
        OFlags::WRONLY | OFlags::CREATE,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    drop(f);
}

/// Entries deeper than 2,048 names are refused (exit 3, the root unchanged); 2,048 unpack.
/// A hostile root 12,000 directories deep, under an ordinary name and under a temporary name,
/// with an intent: recovery neither overflows its stack nor runs out of descriptors, removes
/// the temporary tree whole, and leaves what lies deeper than an entry can be.
#[test]
fn entry_depth_is_capped_and_recovery_survives_a_hostile_root_of_any_depth() {
    let fs = scratch("ext4", "defaults");
    let builder = |path: &str| {
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = header(tar::EntryType::Regular, 0o644, 4);
        tar.append_data(&mut h, path, &b"deep"[..]).unwrap();
        tar.into_inner().unwrap()
    };
    let deepest = "d/".repeat(2047) + "f";
    let ok =
        common::deb_builder::write_deb(fs.path(), "deepest.deb", "data.tar", &builder(&deepest));
    let root = fs.subdir("deepest");
    let r = unpack(["-q", "-s", "none", ok.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "2,048 names: {}", &r.stderr[..r.stderr.len().min(300)]);
    let too_deep = common::deb_builder::write_deb(
        fs.path(),
        "too-deep.deb",
        "data.tar",
        &builder(&("d/".repeat(2048) + "f")),
    );
    let root = fs.subdir("too-deep");
    let r = unpack(["-q", "-s", "none", too_deep.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 3, "2,049 names: {}", r.stderr);
    assert!(r.stderr.contains("a path of more than 2048 components"), "{}", r.stderr);
    assert!(snapshot(&root).is_empty());

    let root = fs.subdir("hostile");
    std::fs::create_dir_all(root.join("plain")).unwrap();
    std::fs::create_dir_all(root.join("tree.unpack-new")).unwrap();
    mkdir_chain(&root.join("plain"), 12_000, "beyond.unpack-new");
    mkdir_chain(&root.join("tree.unpack-new"), 12_000, "file");
    std::fs::write(root.join("plain/d/near.unpack-new"), b"x").unwrap();
    // Two deep branches below a deep directory: whichever is walked first, the walk comes back
    // to a level whose descriptor it had closed, and opens it again for the other.
    let fork = root.join("wide").join("d/".repeat(100));
    for branch in ["a", "b"] {
        let bottom = fork.join(branch).join("d/".repeat(100));
        std::fs::create_dir_all(&bottom).unwrap();
        std::fs::write(bottom.join("t.unpack-new"), b"x").unwrap();
    }
    plant_intent(&root);
    // A low soft limit on descriptors: recovery must not need one per level.
    let r = run(Command::new("prlimit")
        .arg("--nofile=256")
        .arg(unpack_bin())
        .arg("--recover")
        .arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("write phase"), "{}", r.stdout);
    assert!(!root.join("tree.unpack-new").exists(), "the temporary tree is removed at any depth");
    assert!(!root.join("plain/d/near.unpack-new").exists());
    assert!(root.join("plain/d").is_dir(), "what is not the engine's stays");
    for branch in ["a", "b"] {
        let bottom = fork.join(branch).join("d/".repeat(100));
        assert!(
            bottom.is_dir() && !bottom.join("t.unpack-new").exists(),
            "{branch}: removed below a level opened again"
        );
    }
    // Again, now with nothing to remove: still no overflow.
    plant_intent(&root);
    let r = recover(&root);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// `mount --bind SOURCE TARGET`, undone on drop (lazily if busy), so that no mount outlives a
/// failing test.
struct BindMount(PathBuf);

impl BindMount {
    fn new(source: &Path, target: &Path) -> BindMount {
        let r = run(Command::new("mount").arg("--bind").arg(source).arg(target));
        assert_eq!(r.code, 0, "mount --bind: {}", r.stderr);
        BindMount(target.to_path_buf())
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        if run(Command::new("umount").arg(&self.0)).code != 0 {
            let _ = run(Command::new("umount").arg("-l").arg(&self.0));
        }
    }
}

/// A bind mount of the root's own filesystem inside the root (same st_dev): the rollback does
/// not walk into it, so a host file with the engine's suffix survives; a bind mount inside a
/// temporary tree stops that tree's removal (exit 4) with the mounted files untouched.
#[test]
fn recovery_never_crosses_a_bind_mount_of_the_same_filesystem() {
    let fs = scratch("ext4", "defaults");
    let (root, host) = trapped(&fs, "b");
    std::fs::create_dir_all(host.join("deep")).unwrap();
    std::fs::write(host.join("deep/file"), b"host data").unwrap();
    std::fs::create_dir(root.join("mnt")).unwrap();
    std::fs::create_dir_all(root.join("new.unpack-new/mnt")).unwrap();
    let _walked = BindMount::new(&host, &root.join("mnt"));
    let before = snapshot(&host);
    plant_intent(&root);
    std::fs::remove_dir_all(root.join("new.unpack-new")).unwrap();
    let r = recover(&root);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        host.join("secret.unpack-new").exists(),
        "a host file behind a bind mount is not the engine's"
    );
    assert_same_tree(&snapshot(&host), &before, "rollback past a bind mount");

    std::fs::create_dir_all(root.join("new.unpack-new/mnt")).unwrap();
    let _removed = BindMount::new(&host, &root.join("new.unpack-new/mnt"));
    plant_intent(&root);
    let r = recover(&root);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("new.unpack-new: removing a temporary name") && r.stderr.contains("busy"),
        "{}",
        r.stderr
    );
    assert_same_tree(&snapshot(&host), &before, "removing a temporary tree holding a bind mount");
}

/// A package whose new tree holds a 0500 directory (its mode is set before the barrier), as a
/// user who is not root, with a barrier that fails (strace makes syncfs fail with EIO): the
/// rollback removes the whole tree, so a retry works; and recovery removes such a tree left by
/// a crash as well.
#[test]
fn a_user_s_failed_barrier_removes_a_new_tree_holding_a_0500_directory() {
    let fs = scratch("ext4", "defaults");
    let mut tar = tar::Builder::new(Vec::new());
    for (path, mode, data) in [
        ("./top/", 0o755, None),
        ("./top/ro/", 0o500, None),
        ("./top/ro/file", 0o644, Some(&b"data"[..])),
        ("./top/ro/sub/", 0o500, None),
    ] {
        let kind = if data.is_some() { tar::EntryType::Regular } else { tar::EntryType::Directory };
        let mut h = header(kind, mode, data.map_or(0, |d| d.len() as u64));
        tar.append_data(&mut h, path, data.unwrap_or_default()).unwrap();
    }
    let nobody = ForNobody::new(&[]);
    let deb = common::deb_builder::write_deb(
        nobody.dir.path(),
        "ro.deb",
        "data.tar",
        &tar.into_inner().unwrap(),
    );
    std::fs::set_permissions(&deb, std::fs::Permissions::from_mode(0o644)).unwrap();
    let root = fs.subdir("root");
    std::os::unix::fs::chown(&root, Some(65534), Some(65534)).unwrap();
    let mut cmd = Command::new("strace");
    cmd.args([
        "-f",
        "-o",
        "/dev/null",
        "-e",
        "trace=syncfs",
        "-e",
        "inject=syncfs:error=EIO",
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ]);
    let r = run(cmd.arg(nobody.path("unpack")).args(["-q", "-s", "syncfs"]).arg(&deb).arg(&root));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("syncfs") && r.stderr.contains("Input/output error"), "{}", r.stderr);
    assert!(
        snapshot(&root).is_empty(),
        "the new tree is gone: {:?}",
        snapshot(&root).keys().collect::<Vec<_>>()
    );
    let r = run(nobody.command("unpack").args(["-q", "-s", "syncfs"]).arg(&deb).arg(&root));
    assert_eq!(r.code, 0, "the retry: {}", r.stderr);
    assert_eq!(std::fs::read(root.join("top/ro/file")).unwrap(), b"data");

    // A crash left such a tree under its temporary name, with an intent.
    let crashed = root.join("top2.unpack-new");
    for dir in [crashed.join("ro/sub"), crashed.join("x")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(crashed.join("ro/file"), b"data").unwrap();
    std::fs::write(root.join("var/lib/unpack/intent"), b"").unwrap();
    for (path, mode) in [("ro/sub", 0o500), ("ro", 0o500), ("x", 0o000), ("", 0o500)] {
        std::fs::set_permissions(crashed.join(path), std::fs::Permissions::from_mode(mode))
            .unwrap();
    }
    let r = run(Command::new("chown").arg("-R").arg("65534:65534").arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(nobody.command("unpack").arg("--recover").arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("removed 1 temporary files and 4 new directories"), "{}", r.stdout);
    assert!(!crashed.exists());
}

/// For a durable strategy the journal's removal is durable before exit 0: after the unlink of
/// `txn`, the state directory is fsynced (strace shows the order), so a power cut after exit 0
/// finds nothing to replay.
#[test]
fn the_journal_s_removal_is_made_durable_before_exit() {
    let fs = scratch("ext4", "defaults");
    for strategy in ["fsync", "syncfs", "batch"] {
        let root = fs.subdir(strategy);
        let trace = fs.path().join(format!("{strategy}.strace"));
        let r = run(Command::new("strace")
            .args(["-f", "-y", "-o"])
            .arg(&trace)
            .args(["-e", "trace=unlinkat,fsync", unpack_bin(), "-q", "-s", strategy])
            .arg(fixture("other_1.0_all.deb"))
            .arg(&root));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let text = std::fs::read_to_string(&trace).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let state = format!("<{}>", root.join("var/lib/unpack").display());
        // The unlink that removed it (recovery, before the transaction, finds none: ENOENT).
        let removed = |l: &&str| {
            l.contains("unlinkat(") && l.contains(&state) && l.contains("\"txn\", 0) = 0")
        };
        let unlink =
            lines.iter().position(removed).unwrap_or_else(|| panic!("no unlink of txn:\n{text}"));
        assert!(
            lines[unlink..].iter().any(|l| l.contains("fsync(") && l.contains(&state)),
            "{strategy}: no fsync of the state directory after the journal's unlink:\n{text}"
        );
    }
}

/// The rename flag that clears the name first (a directory over a symlink that leads nowhere,
/// a file over an empty directory) is read back from the journal like everything else: a
/// planted journal that sets it can remove a symlink or an empty directory of the root, never
/// follow the symlink, and never empty a directory that holds something.
#[test]
fn a_planted_clear_the_name_flag_removes_at_most_a_symlink_or_an_empty_directory() {
    let fs = scratch("ext4", "defaults");
    let (root, host) = trapped(&fs, "clears");
    // `etc/out` leads to the host's directory; `etc/full` holds a file; each has a temporary
    // file beside it that a journal may rename over it.
    symlink(&host, root.join("etc/out")).unwrap();
    std::fs::create_dir(root.join("etc/full")).unwrap();
    std::fs::write(root.join("etc/full/kept"), b"kept").unwrap();
    for temp in ["etc/out.unpack-new", "etc/full.unpack-new"] {
        std::fs::write(root.join(temp), b"new").unwrap();
    }
    let records = [
        "P evil%201.0".to_string(),
        "R etc out.unpack-new out 1".to_string(),
        "R etc full.unpack-new full 1".to_string(),
    ];
    plant(&root, &journal(MAGIC, &records));
    let before = snapshot(&host);
    let r = recover(&root);
    assert_same_tree(&snapshot(&host), &before, "the host behind the symlink");
    assert_eq!(std::fs::read(root.join("etc/full/kept")).unwrap(), b"kept", "{}", r.stderr);
    // The symlink itself was the journal's to replace: the file took its place.
    assert_eq!(std::fs::read(root.join("etc/out")).unwrap(), b"new", "{}{}", r.stdout, r.stderr);
    assert!(std::fs::symlink_metadata(root.join("etc/out")).unwrap().is_file());
    assert_eq!(r.code, 4, "a directory that holds something is not the journal's to clear");
    assert!(r.stderr.contains("etc/full"), "the refusal names the path: {}", r.stderr);
}
