//! The shared harness of the integration tests: the real binaries, the fixtures, scratch
//! filesystems on loop devices, and snapshots of a root to compare trees by. The engine's tests
//! (tests/) and the lab's (lab/tests/, through `#[path]`), all targets of the lab's package,
//! share this one copy.
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use unpack_lab::scratchfs::ScratchFs;

pub mod deb_builder;
pub mod dpkg;
pub mod raw_tar;
pub mod scripts;

/// The top of the repository. The integration tests are all the lab's targets (the engine's
/// tests/ through lab/Cargo.toml's `[[test]]` list, and lab/tests/).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the lab is a folder of the repository")
}

/// A program of the workspace, from the target directory and profile of the running test. Cargo
/// builds a test's own package's binaries before the test (`CARGO_BIN_EXE_*`: the lab's), not
/// the engine's (`unpack`, `unpack-dpkg`): those are built here, once per test process, with the engine's
/// default features (a no-op when it is fresh), so that no test ever runs a stale `unpack`
/// after a `cargo test --test NAME` that rebuilt only the library.
pub fn program(name: &str) -> &'static str {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_BIN_EXE_unpack-bench")).parent().unwrap().to_path_buf();
        build_unpack(&dir);
        dir
    });
    let path = dir.join(name);
    assert!(path.is_file(), "{}: not built", path.display());
    Box::leak(
        path.into_os_string().into_string().expect("a UTF-8 target directory").into_boxed_str(),
    )
}

/// `cargo build -p unpack-engine --bins` into `dir` (`TARGET/PROFILE`), as the test's own
/// binaries were built.
fn build_unpack(dir: &Path) {
    let profile = dir.file_name().and_then(|p| p.to_str()).expect("a profile directory");
    let target = dir.parent().expect("a target directory");
    // Cargo's directory for the dev profile is `debug`; every other profile's has its name.
    let profile = if profile == "debug" { "dev" } else { profile };
    let r = run(Command::new(env!("CARGO"))
        .args(["build", "--locked", "--quiet", "-p", "unpack-engine", "--bins"])
        .args(["--profile", profile, "--target-dir"])
        .arg(target)
        .arg("--manifest-path")
        .arg(repo().join("Cargo.toml")));
    assert_eq!(r.code, 0, "cargo build -p unpack-engine --bins: {}", r.stderr);
}

pub fn unpack_bin() -> &'static str {
    static BIN: OnceLock<&'static str> = OnceLock::new();
    BIN.get_or_init(|| program("unpack"))
}

pub fn fixture(name: &str) -> PathBuf {
    repo().join("fixtures").join(name)
}

/// What a finished process said.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

pub fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `unpack ARGS...`
pub fn unpack<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run(Command::new(unpack_bin()).args(args))
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A fresh filesystem on a loop device in a temporary directory; all of it goes away on drop.
pub struct Scratch {
    // Field order is drop order: the filesystem before its directory.
    pub fs: ScratchFs,
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn path(&self) -> &Path {
        self.fs.path()
    }

    /// A new empty directory on the scratch filesystem.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::create_dir(&p).unwrap();
        p
    }
}

/// A 256 MiB `fstype` filesystem mounted with `options`.
pub fn scratch(fstype: &str, options: &str) -> Scratch {
    scratch_sized(fstype, options, 256 << 20)
}

pub fn scratch_sized(fstype: &str, options: &str, size: u64) -> Scratch {
    let dir = tempfile::Builder::new().prefix("unpack-test").tempdir().unwrap();
    // Tests also run the binaries as `nobody`, who must reach the mount point.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let fs = ScratchFs::create(
        fstype,
        &dir.path().join("fs.img"),
        size,
        &dir.path().join("mnt"),
        options,
    )
    .unwrap_or_else(|e| panic!("scratch {fstype} -o {options}: {e}"));
    Scratch { fs, dir }
}

/// `dpkg-deb -x DEB DIR` into a new directory next to `near`.
pub fn dpkg_extract(deb: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let r = run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(dir));
    assert_eq!(r.code, 0, "dpkg-deb -x {}: {}", deb.display(), r.stderr);
}

/// The tree `dpkg-deb -x` makes of `deb` (extracted into `dir`), with the directory mtimes the
/// archive declares: GNU tar restores a directory's mtime when it leaves the directory, and
/// dpkg-deb's archives list symlinks last, so tar's own directory mtimes are an artifact of its
/// extraction order. The declared ones are read from `dpkg-deb --fsys-tarfile` by the tar crate.
pub fn reference_tree(deb: &Path, dir: &Path) -> BTreeMap<PathBuf, Node> {
    dpkg_extract(deb, dir);
    let mut tree = snapshot(dir);
    let out = Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb).output().unwrap();
    assert!(out.status.success());
    let mut archive = tar::Archive::new(&out.stdout[..]);
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        if entry.header().entry_type().is_dir() {
            let path = unpack::read::entry::clean_path(&entry.path_bytes()).unwrap();
            if let Some(node) = tree.get_mut(&path) {
                node.mtime = (entry.header().mtime().unwrap() as i64, 0);
            }
        }
    }
    tree
}

/// One node of a tree, with everything a faithful unpack must reproduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: char,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, i64),
    pub size: u64,
    pub content: u64,
    pub link: Option<PathBuf>,
    pub rdev: u64,
    /// The first path (in sorted order) of the node's inode: equal for hard links.
    pub inode_group: PathBuf,
}

/// Every node under `root` but the root itself, by relative path. The engine's state directory
/// (`var/lib/unpack`, and `var/lib`, `var` when they hold nothing else) and ext4's `lost+found`
/// are left out: they are not part of any package.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<(u64, u64), PathBuf> = BTreeMap::new();
    walk(root, Path::new(""), &mut out, &mut inodes);
    for p in ["var/lib/unpack", "lost+found"] {
        out.retain(|k, _| !k.starts_with(p));
    }
    for p in ["var/lib", "var"] {
        let p = Path::new(p);
        if out.contains_key(p) && !out.keys().any(|k| k != p && k.starts_with(p)) {
            out.remove(p);
        }
    }
    out
}

fn walk(
    root: &Path,
    rel: &Path,
    out: &mut BTreeMap<PathBuf, Node>,
    inodes: &mut BTreeMap<(u64, u64), PathBuf>,
) {
    let mut names: Vec<_> =
        std::fs::read_dir(root.join(rel)).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    for name in names {
        let relp = rel.join(&name);
        let full = root.join(&relp);
        let m = std::fs::symlink_metadata(&full).unwrap();
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            'd'
        } else if ft.is_symlink() {
            'l'
        } else if ft.is_file() {
            'f'
        } else if ft.is_fifo() {
            'p'
        } else if ft.is_char_device() {
            'c'
        } else if ft.is_block_device() {
            'b'
        } else {
            's'
        };
        let content = if kind == 'f' {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::fs::read(&full).unwrap().hash(&mut h);
            h.finish()
        } else {
            0
        };
        let group = inodes.entry((m.dev(), m.ino())).or_insert_with(|| relp.clone()).clone();
        out.insert(
            relp.clone(),
            Node {
                kind,
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
                mtime: (m.mtime(), m.mtime_nsec()),
                size: if kind == 'd' { 0 } else { m.len() },
                content,
                link: ft.is_symlink().then(|| std::fs::read_link(&full).unwrap()),
                rdev: m.rdev(),
                inode_group: group,
            },
        );
        if ft.is_dir() {
            walk(root, &relp, out, inodes);
        }
    }
}

/// Asserts two snapshots are equal, showing the first differences.
pub fn assert_same_tree(
    ours: &BTreeMap<PathBuf, Node>,
    theirs: &BTreeMap<PathBuf, Node>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for (p, n) in ours {
        match theirs.get(p) {
            None => diffs.push(format!("only in ours: {} {n:?}", p.display())),
            Some(t) if t != n => {
                diffs.push(format!("differs: {}\n  ours:   {n:?}\n  theirs: {t:?}", p.display()))
            }
            _ => {}
        }
    }
    for p in theirs.keys().filter(|p| !ours.contains_key(*p)) {
        diffs.push(format!("only in theirs: {}", p.display()));
    }
    assert!(
        diffs.is_empty(),
        "{what}: {} differences:\n{}",
        diffs.len(),
        diffs.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Temporary names the engine may have left: there must be none.
pub fn leftover_temps(root: &Path) -> Vec<PathBuf> {
    snapshot(root).into_keys().filter(|p| p.to_string_lossy().ends_with(".unpack-new")).collect()
}

/// A directory `nobody` can read, with copies of the binaries and of the named fixtures: the
/// checkout itself may sit under a directory only root can enter (CI clones into one), and a
/// test about an unprivileged user must fail for the reason it tests, not for that.
pub struct ForNobody {
    pub dir: tempfile::TempDir,
}

impl ForNobody {
    pub fn new(fixtures: &[&str]) -> ForNobody {
        let dir = tempfile::Builder::new().prefix("unpack-nobody").tempdir().unwrap();
        let world = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap()
        };
        world(dir.path(), 0o755);
        for bin in [program("unpack"), program("unpack-bench")] {
            let to = dir.path().join(Path::new(bin).file_name().unwrap());
            std::fs::copy(bin, &to).unwrap();
            world(&to, 0o755);
        }
        for name in fixtures {
            let to = dir.path().join(name);
            std::fs::copy(fixture(name), &to).unwrap();
            world(&to, 0o644);
        }
        ForNobody { dir }
    }

    /// The copy of a binary or fixture.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `setpriv` running the copy of `bin` as nobody.
    pub fn command(&self, bin: &str) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(self.path(bin));
        cmd
    }
}

/// How many of this process's threads are called `name`.
pub fn threads_named(name: &str) -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter(|t| {
            std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"))
                .is_ok_and(|c| c.trim() == name)
        })
        .count()
}

/// The threads called `name` left once the kernel has reaped the joined ones: a joined thread
/// can linger in /proc for a moment after pthread_join returns, a leaked one stays.
pub fn threads_left(name: &str) -> usize {
    for _ in 0..200 {
        if threads_named(name) == 0 {
            return 0;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    threads_named(name)
}

/// A process holding a write lock on `file` (fcntl, as dpkg and apt take theirs) until killed.
pub struct LockHolder(pub std::process::Child);

impl LockHolder {
    pub fn new(file: &Path) -> LockHolder {
        let script = "use Fcntl; open(F, '>>', $ARGV[0]) or die; my $l = pack('s s q q i', F_WRLCK, 0, 0, 0, 0); fcntl(F, F_SETLKW, $l) or die; print \"locked\\n\"; $| = 1; sleep 600;";
        let mut child = Command::new("perl")
            .args(["-e", script])
            .arg(file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "locked\n");
        LockHolder(child)
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
