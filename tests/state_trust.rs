//! The state directory `var/lib/unpack/` is the engine's alone. No package writes there,
//! whatever path leads there (exit 3, the root unchanged); a state directory or state file
//! that another user, a package of old or a hostile root image put into another shape is
//! refused (exit 4) and left as it is, never followed, truncated or repaired; the lock stays
//! mutually exclusive when its file is replaced under a waiting unpack. Run as root, on real
//! filesystems, with the real binary.

mod common;

use common::deb_builder::write_deb;
use common::*;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use tar::{EntryType, Header};

/// One entry of a package built here.
enum E<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str, u32),
    Symlink(&'a str, &'a str),
    Fifo(&'a str),
}

/// A data.tar holding `entries`, owned by 0:0.
fn data_tar(entries: &[E]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in entries {
        let (path, kind, mode, data, target) = match e {
            E::File(p, data) => (p, EntryType::Regular, 0o644, *data, None),
            E::Dir(p, mode) => (p, EntryType::Directory, *mode, &b""[..], None),
            E::Symlink(p, t) => (p, EntryType::Symlink, 0o777, &b""[..], Some(t)),
            E::Fifo(p) => (p, EntryType::Fifo, 0o644, &b""[..], None),
        };
        let mut h = Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(1_700_000_000);
        h.set_uid(0);
        h.set_gid(0);
        match target {
            Some(t) => builder.append_link(&mut h, path, t).unwrap(),
            None => builder.append_data(&mut h, path, data).unwrap(),
        }
    }
    builder.into_inner().unwrap()
}

/// A root on the scratch filesystem with a package installed: its state directory and lock
/// exist, as an installer meets them.
fn installed_root(fs: &Scratch, name: &str) -> PathBuf {
    let root = fs.subdir(name);
    let r = unpack([
        "-s",
        "none",
        fixture("other_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    root
}

/// Everything on the scratch filesystem, every state directory included. A lock file's content
/// and times are left out: every unpack that takes the lock writes its pid there.
fn everything(fs: &Scratch) -> BTreeMap<PathBuf, Node> {
    let mut tree = snapshot(fs.path());
    for (path, node) in tree.iter_mut() {
        if path.ends_with("var/lib/unpack/lock") {
            (node.mtime, node.content, node.size) = ((0, 0), 0, 0);
        }
    }
    tree
}

#[test]
fn no_package_writes_in_the_state_directory_by_any_path() {
    let fs = scratch("ext4", "defaults");
    let journal = b"unpack-journal 1\nrename usr . passwd\n";
    let cases: Vec<(&str, Vec<E>)> = vec![
        ("journal", vec![E::File("./var/lib/unpack/txn", journal)]),
        ("journal-new", vec![E::File("./var/lib/unpack/txn.new", journal)]),
        ("lock-symlink", vec![E::Symlink("./var/lib/unpack/lock", "/etc/passwd")]),
        ("lock-fifo", vec![E::Fifo("./var/lib/unpack/lock")]),
        ("lock-file", vec![E::File("./var/lib/unpack/lock", b"1\n")]),
        // Once a directory of the package's own unpack ended "committed but not finished".
        ("journal-dir", vec![E::Dir("./var/lib/unpack/txn/", 0o755)]),
        (
            "state-dir-0777",
            vec![
                E::Dir("./var/", 0o755),
                E::Dir("./var/lib/", 0o755),
                E::Dir("./var/lib/unpack/", 0o777),
            ],
        ),
        ("state-dir-symlink", vec![E::Symlink("./var/lib/unpack", "/tmp")]),
        ("new-dir-inside", vec![E::File("./var/lib/unpack/new/intent", b"")]),
        // Through the package's own symlink, and through the root's (below).
        ("own-symlink", vec![E::Symlink("./v", "var"), E::File("./v/lib/unpack/intent", b"")]),
        ("own-symlink-dir", vec![E::Symlink("./s", "/var/lib"), E::Dir("./s/unpack/", 0o777)]),
        ("root-symlink", vec![E::File("./in-root/txn", journal)]),
        ("root-symlink-dir", vec![E::Dir("./lib-link/unpack/", 0o777)]),
    ];
    for (name, entries) in cases {
        let root = installed_root(&fs, name);
        std::os::unix::fs::symlink("/var/lib/unpack", root.join("in-root")).unwrap();
        std::os::unix::fs::symlink("../var/lib", root.join("lib-link")).unwrap();
        let deb = write_deb(fs.dir.path(), &format!("{name}.deb"), "data.tar", &data_tar(&entries));
        let before = everything(&fs);
        let r = unpack(["-s", "fsync", deb.to_str().unwrap(), root.to_str().unwrap()]);
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("{name}.deb")) && r.stderr.contains("the engine's state directory var/lib/unpack/ and what it holds are no package's to write"), "{name}: {}", r.stderr);
        assert_same_tree(&everything(&fs), &before, name);
        // The root still unpacks: nothing of the package stayed behind to break it.
        let r = unpack([
            "-s",
            "none",
            fixture("many_1.0_all.deb").to_str().unwrap(),
            root.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{name}: the next unpack: {}", r.stderr);
    }
    // The message names the path the package wrote and the one it leads to.
    let root = installed_root(&fs, "named");
    let deb = write_deb(
        fs.dir.path(),
        "named.deb",
        "data.tar",
        &data_tar(&[E::Symlink("./v", "var"), E::File("./v/lib/unpack/txn", b"")]),
    );
    let r = unpack([deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert!(
        r.stderr.contains("'v/lib/unpack' leads to 'var/lib/unpack': the engine's state directory"),
        "{}",
        r.stderr
    );
    // var/ and var/lib/ themselves, and their other contents, are a package's as ever.
    let deb = write_deb(
        fs.dir.path(),
        "var.deb",
        "data.tar",
        &data_tar(&[
            E::Dir("./var/", 0o755),
            E::Dir("./var/lib/", 0o755),
            E::Dir("./var/lib/other/", 0o755),
            E::File("./var/lib/other/db", b"x"),
        ]),
    );
    let r = unpack([deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(root.join("var/lib/other/db")).unwrap(), b"x");
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// Puts what `make` makes in place of ROOT's lock file.
fn replace_lock(root: &Path, make: impl FnOnce(&Path)) {
    let lock = root.join("var/lib/unpack/lock");
    std::fs::remove_file(&lock).unwrap();
    make(&lock);
}

/// Moves ROOT/`rel` to ROOT/elsewhere and puts a symlink to it (`target`) in its place.
fn move_behind_symlink(root: &Path, rel: &str, target: &str) {
    std::fs::rename(root.join(rel), root.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(target, root.join(rel)).unwrap();
}

/// A hostile root's state directory: (case, the path under ROOT the refusal names, what it
/// says of it, how the installed root is tampered with, given a file outside ROOT).
type Tamper = (&'static str, &'static str, &'static str, fn(&Path, &Path));

const OTHER_OWNER: &str = "is owned by uid 1000, not by the user running unpack (uid 0)";

const TAMPERED: &[Tamper] = &[
    ("lock-symlink", "var/lib/unpack/lock", "is a symbolic link", |root, outside| {
        replace_lock(root, |lock| std::os::unix::fs::symlink(outside, lock).unwrap())
    }),
    ("lock-fifo", "var/lib/unpack/lock", "is a FIFO", |root, _| replace_lock(root, mkfifo)),
    // Once truncated the file outside and wrote a pid into it.
    ("lock-hard-link", "var/lib/unpack/lock", "has 2 links", |root, outside| {
        replace_lock(root, |lock| std::fs::hard_link(outside, lock).unwrap())
    }),
    (
        "lock-0666",
        "var/lib/unpack/lock",
        "is writable by its group or by others (mode 0666)",
        |root, _| chmod(&root.join("var/lib/unpack/lock"), 0o666),
    ),
    ("journal-dir", "var/lib/unpack/txn", "is a directory", |root, _| {
        std::fs::create_dir(root.join("var/lib/unpack/txn")).unwrap()
    }),
    ("journal-new-dir", "var/lib/unpack/txn.new", "is a directory", |root, _| {
        std::fs::create_dir(root.join("var/lib/unpack/txn.new")).unwrap()
    }),
    ("intent-fifo", "var/lib/unpack/intent", "is a FIFO", |root, _| {
        mkfifo(&root.join("var/lib/unpack/intent"))
    }),
    // unpack-dpkg's configure guard's record.
    ("configure-symlink", "var/lib/unpack/configure", "is a symbolic link", |root, outside| {
        std::os::unix::fs::symlink(outside, root.join("var/lib/unpack/configure")).unwrap()
    }),
    ("journal-other-owner", "var/lib/unpack/txn", OTHER_OWNER, |root, _| {
        let txn = root.join("var/lib/unpack/txn");
        std::fs::write(&txn, b"unpack-journal 1\n").unwrap();
        std::os::unix::fs::chown(txn, Some(1000), Some(1000)).unwrap();
    }),
    (
        "state-0777",
        "var/lib/unpack",
        "is writable by its group or by others (mode 0777)",
        |root, _| chmod(&root.join("var/lib/unpack"), 0o777),
    ),
    ("state-other-owner", "var/lib/unpack", OTHER_OWNER, |root, _| {
        std::os::unix::fs::chown(root.join("var/lib/unpack"), Some(1000), Some(1000)).unwrap()
    }),
    (
        "var-lib-other-owner",
        "var/lib",
        "is owned by uid 1000, neither root nor the user running unpack (uid 0)",
        |root, _| std::os::unix::fs::chown(root.join("var/lib"), Some(1000), Some(1000)).unwrap(),
    ),
    (
        "var-0777",
        "var",
        "is writable by its group or by others without the sticky bit (mode 0777)",
        |root, _| chmod(&root.join("var"), 0o777),
    ),
    ("var-lib-symlink", "var/lib", "is a symbolic link", |root, _| {
        move_behind_symlink(root, "var/lib", "../elsewhere")
    }),
    ("state-symlink", "var/lib/unpack", "is a symbolic link", |root, _| {
        move_behind_symlink(root, "var/lib/unpack", "/elsewhere")
    }),
];

#[test]
fn a_hostile_state_directory_is_refused_with_exit_4_and_left_as_it_is() {
    let fs = scratch("ext4", "defaults");
    let outside = fs.path().join("outside");
    std::fs::write(&outside, b"a file outside every root, only root may write it\n").unwrap();
    chmod(&outside, 0o600);
    for &(name, path, says, tamper) in TAMPERED {
        let root = installed_root(&fs, name);
        tamper(&root, &outside);
        let before = snapshot(fs.path());
        let deb = fixture("many_1.0_all.deb");
        for args in [vec!["-s", "fsync", deb.to_str().unwrap()], vec!["--recover"]] {
            let r = unpack(args.iter().copied().chain([root.to_str().unwrap()]));
            assert_eq!(r.code, 4, "{name} {args:?}: {}", r.stderr);
            let named =
                format!("{}: refusing the engine's state: {says}", root.join(path).display());
            assert!(
                r.stderr.contains(&named),
                "{name} {args:?}: expected '{named}' in: {}",
                r.stderr
            );
            // Not repaired, not followed, nothing truncated: not a byte changed anywhere.
            assert_same_tree(&snapshot(fs.path()), &before, name);
        }
    }
    // Root's var/ writable by all, but sticky as /tmp: nobody else can move the state away.
    let root = installed_root(&fs, "var-1777");
    chmod(&root.join("var"), 0o1777);
    let r = unpack([
        "-s",
        "none",
        fixture("many_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Whether process `pid` waits in flock(2) for inode `ino` (a `->` line of /proc/locks:
/// `1: -> FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF`).
fn waits_for(pid: u32, ino: u64) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.get(1) == Some(&"->")
            && f.get(5) == Some(&pid.to_string().as_str())
            && f.get(6).is_some_and(|d| d.ends_with(&format!(":{ino}")))
    })
}

/// Polls until `done` (no timing is asserted: the bound only turns a hang into a failure).
fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..6000 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("never happened: {what}");
}

/// Opens `path` (making it, 0644) and holds an exclusive flock on it, as an unpack would.
fn hold(path: &Path) -> (File, u64) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
        .unwrap();
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let ino = file.metadata().unwrap().ino();
    (file, ino)
}

fn spawn_waiting(args: &[&str], root: &Path) -> Child {
    Command::new(unpack_bin()).args(["--wait", "-q"]).args(args).arg(root).spawn().unwrap()
}

/// An unpack waiting with --wait while the lock file is replaced (renamed over) or removed
/// must not run on the old inode: it would run beside whoever locks the new file. The test
/// process stands for that other unpack: it holds the new file's lock, and the waiting unpack
/// must go on waiting for it (seen in /proc/locks), not finish.
#[test]
fn an_unpack_waiting_for_a_replaced_lock_file_waits_for_the_new_one() {
    let fs = scratch("ext4", "defaults");
    let root = installed_root(&fs, "root");
    let lock = root.join("var/lib/unpack/lock");
    let (old, old_ino) = hold(&lock);
    let mut b =
        spawn_waiting(&["-s", "none", fixture("many_1.0_all.deb").to_str().unwrap()], &root);
    until("the unpack waits for the lock", || waits_for(b.id(), old_ino));
    let (new, new_ino) = hold(&root.join("var/lib/unpack/lock.new"));
    std::fs::rename(root.join("var/lib/unpack/lock.new"), &lock).unwrap();
    drop(old);
    until("the unpack waits for the new lock file or has finished", || {
        waits_for(b.id(), new_ino) || b.try_wait().unwrap().is_some()
    });
    assert!(
        b.try_wait().unwrap().is_none(),
        "the unpack ran while the lock file's current inode was locked"
    );
    assert!(!root.join("usr/share/many").exists());
    drop(new);
    assert!(b.wait().unwrap().success());
    assert!(root.join("usr/share/many").is_dir());

    // Removed while an unpack waits: it makes a new lock file and locks that.
    let (held, held_ino) = hold(&lock);
    let mut c =
        spawn_waiting(&["-s", "none", fixture("other_1.0_all.deb").to_str().unwrap()], &root);
    until("the unpack waits for the lock", || waits_for(c.id(), held_ino));
    std::fs::remove_file(&lock).unwrap();
    drop(held);
    assert!(c.wait().unwrap().success());
    assert!(lock.is_file(), "the unpack that ran held a lock file that has a name");
}

/// `unpack --recover` raises its soft limit on open files to the hard one as an unpack does:
/// recovery holds a descriptor for each directory a journal names.
#[test]
fn recover_raises_the_open_file_limit() {
    let fs = scratch("ext4", "defaults");
    let root = installed_root(&fs, "root");
    let (held, ino) = hold(&root.join("var/lib/unpack/lock"));
    // prlimit execs unpack: the same pid.
    let mut recover = Command::new("prlimit")
        .args(["--nofile=64:4096", "--", unpack_bin(), "--recover", "--wait", "-q"])
        .arg(&root)
        .spawn()
        .unwrap();
    until("--recover waits for the lock", || waits_for(recover.id(), ino));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", recover.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&open_files[3..5], ["4096", "4096"], "{limits}");
    drop(held);
    assert!(recover.wait().unwrap().success());
}

/// `var` and `var/lib`, made by the engine for its state directory, are directories the root
/// has from then on, so a package's `./var/` no longer sets their mode: they are made 0755
/// whatever the umask, or under umask 077 they would stay 0700 and hide /var from every user.
#[test]
fn the_directories_made_for_the_state_directory_are_0755_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let script = format!(
        "umask 077; exec '{}' -q -s none '{}' '{}'",
        unpack_bin(),
        fixture("other_1.0_all.deb").display(),
        root.display()
    );
    let r = run(Command::new("sh").args(["-c", &script]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    for made in ["var", "var/lib", "var/lib/unpack"] {
        let mode = std::fs::metadata(root.join(made)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{made}");
    }
}

/// `flock` run as `nobody` on `lock` (shared, as a read-only descriptor allows), holding it for
/// a minute; `None` when nobody cannot open the file at all.
fn hold_as_nobody(lock: &Path) -> Option<Child> {
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "flock", "--shared"])
        .arg(lock)
        .args(["sleep", "60"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ino = std::fs::metadata(lock).unwrap().ino();
    let mut held = false;
    until("nobody's flock holds the lock or failed", || {
        held = held_flock(ino);
        held || child.try_wait().unwrap().is_some()
    });
    if held {
        Some(child)
    } else {
        assert!(!child.wait().unwrap().success(), "flock ended without holding the lock");
        None
    }
}

/// Whether some process holds a flock on inode `ino` (a line of /proc/locks that is not a `->`
/// waiter).
fn held_flock(ino: u64) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.get(1) == Some(&"FLOCK") && f.get(5).is_some_and(|id| id.ends_with(&format!(":{ino}")))
    })
}

/// The lock is the engine's user's alone, as dpkg's is root's: made 0600, so no other local
/// user can open it, let alone hold every unpack of the root off with a read-only descriptor's
/// flock; a lock file an older unpack made 0644 is replaced by a 0600 one, even while another
/// user's process holds it.
#[test]
fn no_other_user_can_hold_the_root_s_lock() {
    let fs = scratch("ext4", "defaults");
    let root = installed_root(&fs, "root");
    let lock = root.join("var/lib/unpack/lock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&lock), 0o600);
    assert!(hold_as_nobody(&lock).is_none(), "nobody opened a 0600 lock file");

    // A lock file as an older unpack left it, held by another user's shared flock.
    chmod(&lock, 0o644);
    let old_ino = std::fs::metadata(&lock).unwrap().ino();
    let mut holder = hold_as_nobody(&lock).expect("nobody can open and lock a 0644 lock file");
    let r = unpack([
        "-s",
        "none",
        fixture("many_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(r.code, 0, "another user's flock held the unpack off: {}", r.stderr);
    assert!(root.join("usr/share/many").is_dir());
    assert_eq!(mode(&lock), 0o600, "the lock file was made the engine's user's alone");
    assert_ne!(std::fs::metadata(&lock).unwrap().ino(), old_ino, "a new inode took the name");
    assert!(hold_as_nobody(&lock).is_none());

    // Held by a process of the engine's own user, the lock still holds an unpack off (exit 5).
    chmod(&lock, 0o644);
    let (held, _) = hold(&lock);
    let r = unpack([
        "-s",
        "none",
        fixture("other_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    drop(held);
}
