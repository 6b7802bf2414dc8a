//! The dpkg oracle's harness: packages built by the real `dpkg-deb`, roots with an empty dpkg
//! database, the real `dpkg` run on them, and snapshots of a root's tree and database to compare
//! what `unpack` made with what dpkg made. It shares nothing with the engine's own parsers: the
//! status and list formats are read here by small parsers of its own, so that a misreading in
//! the engine cannot hide itself by being misread the same way here.
//!
//! What dpkg 1.21 does that a reader of its manual may not expect, found by running it (the
//! engine's database mode must match it):
//! - `dpkg --root=ROOT` resolves user and group names (statoverride) through the HOST's NSS, not
//!   ROOT/etc/passwd: a root's passwd and group here give the ids Debian's base-passwd gives
//!   (daemon 1, staff 50), which the host has too.
//! - `dpkg --unpack` computes `info/PKG.md5sums` for a package without one, conffiles included
//!   (dh_md5sums leaves conffiles out), in archive order, regular files only.
//! - `info/PKG.list` is in archive order (`/.` first; dpkg-deb puts symlinks last), and an
//!   upgrade appends the conffiles the new version dropped (now `obsolete`) at its end.
//! - A refused `--unpack` of a new package leaves a stanza `Package`, `Status: install ok
//!   not-installed`, `Architecture` behind in status.
//! - A package that `Replaces` another and takes some of its files leaves the other's md5sums
//!   as they were (the moved paths' lines stay); one that takes all of them makes the other
//!   disappear: its stanza and every info file go.

use super::{run, snapshot, Node, Run};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PATH dpkg checks for ldconfig and start-stop-daemon: without /usr/sbin and /sbin on it,
/// dpkg exits 2 ("2 expected programs not found in PATH"), --root or not. Fixed here so that
/// the tests do not depend on the caller's PATH, and need no --force-bad-path.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The flags that make dpkg leave dependencies to apt: the oracles' fixtures name packages
/// that are not there (their relations are fields to record, not the point).
pub const NO_DEPENDS: [&str; 3] = ["--force-depends", "--force-conflicts", "--force-breaks"];

/// The same for `unpack`.
pub const UNPACK_NO_DEPENDS: [&str; 2] = ["--force", "depends,conflicts,breaks"];

/// A binary package to build with `dpkg-deb --build --root-owner-group`.
#[derive(Clone)]
pub struct Pkg {
    name: String,
    version: String,
    arch: String,
    fields: Vec<(String, String)>,
    files: Vec<(String, Vec<u8>, u32)>,
    dirs: Vec<(String, u32)>,
    symlinks: Vec<(String, String)>,
    conffiles: Vec<String>,
    members: Vec<(String, Vec<u8>)>,
    scripts: Vec<(String, String)>,
    md5sums: bool,
}

impl Pkg {
    pub fn new(name: &str, version: &str, arch: &str) -> Pkg {
        Pkg {
            name: name.into(),
            version: version.into(),
            arch: arch.into(),
            fields: Vec::new(),
            files: Vec::new(),
            dirs: Vec::new(),
            symlinks: Vec::new(),
            conffiles: Vec::new(),
            members: Vec::new(),
            scripts: Vec::new(),
            md5sums: true,
        }
    }

    /// An extra control field (`Replaces`, `Multi-Arch`, `Depends`, ...).
    pub fn field(mut self, name: &str, value: &str) -> Pkg {
        self.fields.push((name.into(), value.into()));
        self
    }

    /// A regular file at the absolute `path`; its parents are made 0755.
    pub fn file(mut self, path: &str, bytes: &[u8], mode: u32) -> Pkg {
        self.files.push((path.into(), bytes.into(), mode));
        self
    }

    pub fn dir(mut self, path: &str, mode: u32) -> Pkg {
        self.dirs.push((path.into(), mode));
        self
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Pkg {
        self.symlinks.push((path.into(), target.into()));
        self
    }

    /// A 0644 file listed in the control member `conffiles`.
    pub fn conffile(mut self, path: &str, bytes: &[u8]) -> Pkg {
        self.conffiles.push(path.into());
        self.file(path, bytes, 0o644)
    }

    /// An extra control member (`shlibs`, `symbols`, `templates`, any name), 0644.
    pub fn member(mut self, name: &str, bytes: &[u8]) -> Pkg {
        self.members.push((name.into(), bytes.into()));
        self
    }

    /// A maintainer script (`preinst`, `postinst`, `prerm`, `postrm`, or any executable
    /// control member): `body` as the member `name`, mode 0755.
    pub fn script(mut self, name: &str, body: &str) -> Pkg {
        self.scripts.push((name.into(), body.into()));
        self
    }

    /// Leaves the md5sums member out, as some old packages do: dpkg then computes it.
    pub fn without_md5sums(mut self) -> Pkg {
        self.md5sums = false;
        self
    }

    /// `NAME_VERSION_ARCH.deb` in `out`, built from a staging tree beside it.
    pub fn build(&self, out: &Path) -> PathBuf {
        let stem = format!("{}_{}_{}", self.name, self.version, self.arch);
        let stage = out.join(format!("{stem}.tree"));
        let control = stage.join("DEBIAN");
        std::fs::create_dir_all(&control).unwrap();
        for (path, _, _) in &self.files {
            std::fs::create_dir_all(stage.join(rel(path)).parent().unwrap()).unwrap();
        }
        for (path, _) in &self.symlinks {
            std::fs::create_dir_all(stage.join(rel(path)).parent().unwrap()).unwrap();
        }
        // Every directory 0755 whatever the umask; the declared ones get their own mode below.
        chmod_dirs(&stage);
        for (path, mode) in &self.dirs {
            let p = stage.join(rel(path));
            std::fs::create_dir_all(&p).unwrap();
            chmod(&p, *mode);
        }
        for (path, bytes, mode) in &self.files {
            let p = stage.join(rel(path));
            std::fs::write(&p, bytes).unwrap();
            chmod(&p, *mode);
        }
        for (path, target) in &self.symlinks {
            std::os::unix::fs::symlink(target, stage.join(rel(path))).unwrap();
        }
        std::fs::write(control.join("control"), self.control_text()).unwrap();
        if !self.conffiles.is_empty() {
            std::fs::write(
                control.join("conffiles"),
                self.conffiles.iter().map(|c| format!("{c}\n")).collect::<String>(),
            )
            .unwrap();
        }
        if self.md5sums {
            std::fs::write(control.join("md5sums"), self.md5sums_text()).unwrap();
        }
        for (name, bytes) in &self.members {
            std::fs::write(control.join(name), bytes).unwrap();
            chmod(&control.join(name), 0o644);
        }
        for (name, body) in &self.scripts {
            std::fs::write(control.join(name), body).unwrap();
            chmod(&control.join(name), 0o755);
        }
        let deb = out.join(format!("{stem}.deb"));
        let r = run(Command::new("dpkg-deb")
            .args(["--build", "--root-owner-group"])
            .arg(&stage)
            .arg(&deb));
        assert_eq!(r.code, 0, "dpkg-deb --build {stem}: {}", r.stderr);
        deb
    }

    fn control_text(&self) -> String {
        let mut text = format!(
            "Package: {}\nVersion: {}\nArchitecture: {}\nMaintainer: Oracle <oracle@example.org>\n",
            self.name, self.version, self.arch
        );
        for (name, value) in &self.fields {
            text += &format!("{name}: {value}\n");
        }
        if !self.fields.iter().any(|(n, _)| n == "Description") {
            text += "Description: a fixture of the dpkg oracle\n";
        }
        text
    }

    /// The md5sums member as dh_md5sums writes it: every regular file but the conffiles,
    /// sorted by path, `HASH  PATH` with the path relative to the root.
    fn md5sums_text(&self) -> String {
        let mut files: Vec<_> =
            self.files.iter().filter(|(p, _, _)| !self.conffiles.contains(p)).collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
            .iter()
            .map(|(path, bytes, _)| format!("{}  {}\n", md5_hex(bytes), rel(path)))
            .collect()
    }
}

fn rel(path: &str) -> &str {
    path.strip_prefix('/').expect("an absolute path in the package")
}

fn chmod_dirs(dir: &Path) {
    chmod(dir, 0o755);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            chmod_dirs(&entry.path());
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The hex MD5 of `bytes`, by the system's md5sum (the tests have no MD5 of their own).
pub fn md5_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..32].to_string()
}

/// A root with an empty dpkg database. dpkg itself needs no more than an empty
/// `var/lib/dpkg/status` (it makes `info/`, `updates/`, `triggers/`, its locks and
/// `info/format` on its first run, `--configure -a` included, without a warning); this one
/// also has what every root dpkg ever ran in has: `info/`, `updates/`, and `info/format`
/// saying `1` (the layout with `PKG:ARCH` names for Multi-Arch: same, which dpkg writes when
/// the file is missing). And `etc/passwd`, `etc/group` with root, daemon and staff for
/// statoverride.
pub struct DbRoot {
    pub dir: tempfile::TempDir,
}

impl DbRoot {
    pub fn new() -> DbRoot {
        let dir = tempfile::Builder::new().prefix("unpack-oracle").tempdir().unwrap();
        let db = dir.path().join("var/lib/dpkg");
        for sub in ["info", "updates"] {
            std::fs::create_dir_all(db.join(sub)).unwrap();
        }
        std::fs::write(db.join("status"), "").unwrap();
        std::fs::write(db.join("info/format"), "1\n").unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        edit(
            dir.path(),
            "/etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
        );
        edit(dir.path(), "/etc/group", b"root:x:0:\ndaemon:x:1:\nstaff:x:50:\n");
        DbRoot { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn admindir(&self) -> PathBuf {
        self.path().join("var/lib/dpkg")
    }

    /// A root in which maintainer scripts can run: dpkg runs them chrooted into ROOT (and the
    /// engine does too), so ROOT needs the `#!/bin/sh` they start with and whatever they call.
    /// The smallest thing that gives both is one file: the host's statically linked busybox
    /// (Debian's busybox-static) as ROOT/bin/sh, which runs as `ash` by that name, and whose
    /// builtins (`echo`, `[`, `printf`, `umask`, redirection) are all the oracle's fixtures
    /// call. Nothing is mounted. With `var/log` for the fixtures' log.
    pub fn with_shell() -> DbRoot {
        let root = DbRoot::new();
        std::fs::create_dir_all(root.path().join("bin")).unwrap();
        std::fs::create_dir_all(root.path().join("var/log")).unwrap();
        let shell = std::fs::read(BUSYBOX).unwrap_or_else(|e| {
            panic!(
                "{BUSYBOX}: {e} (apt-get install busybox-static: the scripts' /bin/sh in a chroot)"
            )
        });
        edit(root.path(), "/bin/sh", &shell);
        chmod(&root.path().join("bin/sh"), 0o755);
        root
    }
}

/// A statically linked shell (busybox-static's; the dynamically linked `busybox` package's would
/// find no libc in the chroot).
const BUSYBOX: &str = "/bin/busybox";

/// A dpkg tool (`dpkg`, `dpkg-divert`, `dpkg-statoverride`) with `--root=ROOT` and a clean
/// environment: a fixed PATH, the C locale, and none of the variables by which a calling dpkg
/// or apt would hand over its locks or admin directory.
pub fn tool(name: &str, root: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(name);
    cmd.arg(format!("--root={}", root.display())).args(args);
    run(clean_env(&mut cmd))
}

/// The environment of `tool` for any command (`chroot ROOT dpkg ...`).
pub fn clean_env(cmd: &mut Command) -> &mut Command {
    cmd.env("PATH", PATH).env("LC_ALL", "C");
    for var in [
        "DPKG_FRONTEND_LOCKED",
        "DPKG_ROOT",
        "DPKG_ADMINDIR",
        "DPKG_FORCE",
        "DPKG_MAINTSCRIPT_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// `dpkg --root=ROOT ARGS...`
pub fn dpkg(root: &Path, args: &[&str]) -> Run {
    tool("dpkg", root, args)
}

/// `dpkg --unpack DEBS...` with dependencies left to apt; asserts it succeeds.
pub fn dpkg_unpack(root: &Path, debs: &[&Path]) -> Run {
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.push("--unpack");
    args.extend(debs.iter().map(|d| d.to_str().unwrap()));
    let r = dpkg(root, &args);
    assert_eq!(r.code, 0, "dpkg --unpack {debs:?}:\n{}{}", r.stdout, r.stderr);
    r
}

/// `unpack -s fsync DEBS... ROOT`, dependencies left to apt; asserts it succeeds.
pub fn unpack_db(root: &Path, debs: &[&Path]) -> Run {
    let mut args = vec!["-s".as_ref(), "fsync".as_ref()];
    args.extend(UNPACK_NO_DEPENDS.iter().map(std::ffi::OsStr::new));
    args.extend(debs.iter().map(|d| d.as_os_str()));
    args.push(root.as_os_str());
    let r = super::unpack(args);
    assert_eq!(r.code, 0, "unpack {debs:?} {}:\n{}{}", root.display(), r.stdout, r.stderr);
    r
}

/// `dpkg --configure -a` with `extra` flags (`--force-confold`, ...); asserts it succeeds.
pub fn dpkg_configure(root: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(extra);
    args.extend(["--configure", "-a"]);
    let r = dpkg(root, &args);
    assert_eq!(r.code, 0, "dpkg --configure -a {extra:?}:\n{}{}", r.stdout, r.stderr);
    r
}

/// Which tool unpacks a package in an oracle's scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Dpkg,
    Unpack,
}

impl Via {
    /// Unpacks `debs` into `root` by this tool, in one call; asserts it succeeds.
    pub fn unpack(self, root: &Path, debs: &[&Path]) -> Run {
        match self {
            Via::Dpkg => dpkg_unpack(root, debs),
            Via::Unpack => unpack_db(root, debs),
        }
    }

    /// Unpacks `debs` by this tool, then `dpkg --configure -a` with `configure` flags.
    pub fn install(self, root: &Path, debs: &[&Path], configure: &[&str]) {
        self.unpack(root, debs);
        dpkg_configure(root, configure);
    }
}

/// What a tree node must agree on. The mtime of a directory is left out: it is the time its
/// last entry was made, an artifact of the order either tool writes in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub kind: char,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: Option<(i64, i64)>,
    pub size: u64,
    pub content: u64,
    pub link: Option<PathBuf>,
    pub inode_group: PathBuf,
}

impl From<Node> for TreeNode {
    fn from(n: Node) -> TreeNode {
        TreeNode {
            kind: n.kind,
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            mtime: (n.kind != 'd').then_some(n.mtime),
            size: n.size,
            content: n.content,
            link: n.link,
            inode_group: n.inode_group,
        }
    }
}

/// The files of the admin directory that are not state, each left out of a DbSnapshot:
/// - `lock`, `lock-frontend`, `triggers/Lock`: empty lock files, there once any tool locked;
/// - `status-old`, `available-old`, `diversions-old`, `statoverride-old`: dpkg's copies of the
///   previous version, a step of its own way of replacing a file, not what is installed;
/// - `available`: dselect's record of available packages, which neither apt nor `--configure`
///   reads for installed state;
/// - `triggers/Unincorp`: the queue of trigger activations, empty here (no fixture has
///   triggers), which dpkg makes on every run whether or not another tool ran first.
///
/// (`status` is compared stanza by stanza, not as a file.)
const NOT_STATE: [&str; 9] = [
    "lock",
    "lock-frontend",
    "triggers/Lock",
    "status-old",
    "available-old",
    "diversions-old",
    "statoverride-old",
    "available",
    "triggers/Unincorp",
];

/// The parts of the tree that are not a package's: dpkg's database (compared as such), the
/// engine's state directory, and logs.
const NOT_TREE: [&str; 3] = ["var/lib/dpkg", "var/lib/unpack", "var/log"];

/// A root's tree and database, to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSnapshot {
    pub tree: BTreeMap<PathBuf, TreeNode>,
    /// Every status stanza, by `Package:Architecture`, its fields in order as written.
    pub status: BTreeMap<String, Vec<(String, String)>>,
    /// The stanzas' keys in the order status has them (dpkg sorts by name, then architecture).
    pub status_order: Vec<String>,
    /// Every other file of the admin directory (info/*, diversions, statoverride, arch,
    /// updates/*, ...) by its path under it: its bytes.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The mode of every file and directory of the admin directory, status included (dpkg -L,
    /// apt and dpkg-query read them as any user), lock files left out as above.
    pub modes: BTreeMap<String, u32>,
}

impl DbSnapshot {
    pub fn take(root: &Path) -> DbSnapshot {
        let tree = snapshot(root)
            .into_iter()
            .filter(|(p, _)| !NOT_TREE.iter().any(|n| p.starts_with(n)))
            .map(|(p, n)| (p, TreeNode::from(n)))
            .collect();
        let admin = root.join("var/lib/dpkg");
        let text = std::fs::read_to_string(admin.join("status"))
            .unwrap_or_else(|e| panic!("{}/status: {e}", admin.display()));
        let (mut files, mut modes) = (BTreeMap::new(), BTreeMap::new());
        admin_files(&admin, "", &mut files, &mut modes);
        let stanzas = parse_stanzas(&text);
        let status_order = stanzas.iter().map(|(k, _)| k.clone()).collect();
        let mut status = BTreeMap::new();
        for (key, fields) in stanzas {
            assert!(
                status.insert(key.clone(), fields).is_none(),
                "{}/status: {key} twice",
                admin.display()
            );
        }
        DbSnapshot { tree, status, status_order, files, modes }
    }
}

fn admin_files(
    dir: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
    modes: &mut BTreeMap<String, u32>,
) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
        if NOT_STATE.contains(&name.as_str()) {
            continue;
        }
        modes.insert(name.clone(), entry.metadata().unwrap().permissions().mode() & 0o7777);
        if entry.file_type().unwrap().is_dir() {
            admin_files(&entry.path(), &format!("{name}/"), files, modes);
        } else if name != "status" {
            files.insert(name, std::fs::read(entry.path()).unwrap());
        }
    }
}

/// The stanzas of a status file (deb822: `Name: value` lines, continuation lines starting with
/// a space or tab, stanzas parted by empty lines), by `Package:Architecture`. A continuation
/// keeps its line break: `Conffiles:` and `Description:` compare line by line.
pub fn parse_status(text: &str) -> BTreeMap<String, Vec<(String, String)>> {
    parse_stanzas(text).into_iter().collect()
}

fn parse_stanzas(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in stanza.lines() {
            if line.starts_with([' ', '\t']) {
                let last = fields
                    .last_mut()
                    .unwrap_or_else(|| panic!("status: a continuation line first: {line:?}"));
                last.1 += &format!("\n{line}");
            } else {
                let (name, value) =
                    line.split_once(':').unwrap_or_else(|| panic!("status: not a field: {line:?}"));
                fields.push((name.to_string(), value.trim().to_string()));
            }
        }
        let get = |n: &str| {
            fields.iter().find(|(f, _)| f == n).map(|(_, v)| v.clone()).unwrap_or_default()
        };
        out.push((format!("{}:{}", get("Package"), get("Architecture")), fields));
    }
    out
}

/// Every difference between two snapshots, the first of each kind first, readable.
pub fn db_differences(ours: &DbSnapshot, theirs: &DbSnapshot) -> Vec<String> {
    let mut diffs = Vec::new();
    map_differences(&ours.tree, &theirs.tree, "tree", &mut diffs, |p, a, b| {
        format!("tree {}:\n  ours:   {a:?}\n  theirs: {b:?}", p.display())
    });
    map_differences(&ours.status, &theirs.status, "status stanza", &mut diffs, |k, a, b| {
        stanza_difference(k, a, b)
    });
    if ours.status_order != theirs.status_order {
        diffs.push(format!(
            "status stanza order:\n  ours:   {:?}\n  theirs: {:?}",
            ours.status_order, theirs.status_order
        ));
    }
    map_differences(&ours.files, &theirs.files, "admin file", &mut diffs, |k, a, b| {
        file_difference(k, a, b)
    });
    map_differences(&ours.modes, &theirs.modes, "admin mode", &mut diffs, |k, a, b| {
        format!("mode of {k}: ours {a:o}, theirs {b:o}")
    });
    diffs
}

fn map_differences<K: Ord + std::fmt::Debug, V: PartialEq>(
    ours: &BTreeMap<K, V>,
    theirs: &BTreeMap<K, V>,
    what: &str,
    diffs: &mut Vec<String>,
    differ: impl Fn(&K, &V, &V) -> String,
) {
    for (k, v) in ours {
        match theirs.get(k) {
            None => diffs.push(format!("{what} only in ours: {k:?}")),
            Some(t) if t != v => diffs.push(differ(k, v, t)),
            _ => {}
        }
    }
    for k in theirs.keys().filter(|k| !ours.contains_key(*k)) {
        diffs.push(format!("{what} only in theirs: {k:?}"));
    }
}

fn stanza_difference(key: &str, ours: &[(String, String)], theirs: &[(String, String)]) -> String {
    let at =
        ours.iter().zip(theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
    format!(
        "status {key}: field {at} differs:\n  ours:   {:?}\n  theirs: {:?}\n  ours in full:   {ours:?}\n  theirs in full: {theirs:?}",
        ours.get(at),
        theirs.get(at)
    )
}

fn file_difference(name: &str, ours: &[u8], theirs: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(ours), String::from_utf8_lossy(theirs));
    let (al, bl): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
    let at = al.iter().zip(&bl).position(|(x, y)| x != y).unwrap_or(al.len().min(bl.len()));
    format!("{name}: line {} differs:\n  ours:   {:?}\n  theirs: {:?}\n  ours in full:\n{a}  theirs in full:\n{b}", at + 1, al.get(at), bl.get(at))
}

/// Asserts two roots hold the same tree and database, naming the first differences.
pub fn assert_same_db(ours: &DbSnapshot, theirs: &DbSnapshot, what: &str) {
    let diffs = db_differences(ours, theirs);
    assert!(
        diffs.is_empty(),
        "{what}: {} differences (ours = unpack, theirs = dpkg):\n{}",
        diffs.len(),
        diffs.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Which tool stands for `unpack` in an oracle: `unpack`, or dpkg itself when
/// `DPKG_ORACLE_SELF_CHECK=1`, which runs every scenario's dpkg side against itself to show
/// that the fixtures and the comparison are deterministic (each test must then pass).
pub fn ours_via() -> Via {
    if std::env::var_os("DPKG_ORACLE_SELF_CHECK").is_some_and(|v| v == "1") {
        Via::Dpkg
    } else {
        Via::Unpack
    }
}

/// Two fresh roots taken through the same scenario in lockstep: `theirs` by dpkg, `ours` by
/// `unpack` where a package is unpacked. Each `unpack` and `configure` compares them after it.
pub struct Oracle {
    pub ours: DbRoot,
    pub theirs: DbRoot,
    what: String,
}

impl Oracle {
    pub fn new(what: &str) -> Oracle {
        Oracle { ours: DbRoot::new(), theirs: DbRoot::new(), what: what.into() }
    }

    /// The same preparation in both roots (installs by dpkg, diversions, edits).
    pub fn both(&self, prepare: impl Fn(&Path)) {
        prepare(self.theirs.path());
        prepare(self.ours.path());
    }

    /// `dpkg --unpack DEBS` in theirs, `unpack DEBS` in ours; the roots must then agree.
    pub fn unpack(&self, debs: &[&Path]) -> Run {
        Via::Dpkg.unpack(self.theirs.path(), debs);
        let r = ours_via().unpack(self.ours.path(), debs);
        self.check("after the unpack");
        r
    }

    /// `dpkg --configure -a` with `flags` in both; the roots must then agree.
    pub fn configure(&self, flags: &[&str]) {
        dpkg_configure(self.theirs.path(), flags);
        dpkg_configure(self.ours.path(), flags);
        self.check(&format!("after dpkg --configure -a {}", flags.join(" ")));
    }

    pub fn check(&self, stage: &str) {
        assert_same_db(
            &DbSnapshot::take(self.ours.path()),
            &DbSnapshot::take(self.theirs.path()),
            &format!("{}, {stage}", self.what),
        );
    }
}

/// An administrator's edit (or the making of a root's file): `path` (absolute, inside `root`) gets `bytes`, with a fixed mtime
/// so that the same edit in two roots gives the same tree.
pub fn edit(root: &Path, path: &str, bytes: &[u8]) {
    let p = root.join(rel(path));
    std::fs::write(&p, bytes).unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    std::fs::File::options().write(true).open(&p).unwrap().set_modified(when).unwrap();
}
