//! The invariant for a root with dpkg's database (`var/lib/dpkg`), and the package pair of the
//! `upgrade-db` scenario.
//!
//! After recovery, the transaction's package must be registered entirely as one version, and
//! the tree must be that version's:
//! - `half-registered`: the package's status (as `dpkg-query` reads it: `status` and the
//!   records in `updates/`) is neither the old side (`install ok installed`, the
//!   older version, as `dpkg --configure` leaves it) nor the new side (`install ok unpacked`, the
//!   newer version, `Config-Version` the older one, as `dpkg --unpack` leaves it), or
//!   `info/PKG.list`, `info/PKG.conffiles` or the paths of `info/PKG.md5sums` are not the ones
//!   of the version the stanza names;
//! - `db-tree`: a path of that version does not hold what it holds after dpkg (a conffile
//!   `NAME` keeps the old content and `NAME.dpkg-new` has the new one on the new side; a file
//!   the newer version drops is gone), or `dpkg --verify` reports a listed file missing or with
//!   another md5sum (its conffile lines left out on the new side, where the old content is
//!   expected under the name dpkg hashes);
//! - `db-audit`: `dpkg --audit` does not list exactly the package as unpacked (new side) or
//!   does not say nothing (old side).
//!
//! What each version holds comes from the packages (their data read as [`Tree::of_deb`] reads
//! it, their control fields read by `dpkg-deb`), never from the root under test; the tools that
//! judge the root are the real dpkg's. This module reads the root through
//! the checker's `probe` and files opened with RESOLVE_IN_ROOT, and changes nothing in it.

use super::check::{open_root, probe, violation, Checked, Deeper, Expected, Kind, Violation};
use super::expect::{Content, Tree};
use super::CrashError;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use crate::bench::peers::ADMIN_DIR;

/// The conffile the scenario's packages add, and the file only the older version ships.
pub const CONFFILE: &str = "etc/unpack-crashtest/crashtest.conf";
pub const DROPPED: &str = "etc/unpack-crashtest/dropped";

/// The biggest info file read (the list of a big package is a few MiB).
const MAX_DB_FILE: u64 = 64 << 20;

/// One version of the package, as the `.deb` says.
#[derive(Debug, Clone)]
pub struct Version {
    pub version: String,
    /// Every path of its data member, as `Tree::of_deb` reads it.
    pub tree: Tree,
    /// Its conffiles, relative like the tree's paths.
    pub conffiles: BTreeSet<PathBuf>,
}

/// The package of a transaction, its older (installed and configured) and newer version.
#[derive(Debug, Clone)]
pub struct Db {
    pub package: String,
    pub old: Version,
    pub new: Version,
}

/// Which version the database registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Old,
    New,
}

impl Version {
    /// Reads `deb`: its data with [`Tree::of_deb`], its `Version` field and `conffiles`
    /// member with `dpkg-deb`.
    pub fn of_deb(deb: &Path) -> Result<Version, CrashError> {
        let tree = Tree::of_deb(deb)?;
        let version = field(deb, "Version")?;
        let conffiles =
            match Command::new("dpkg-deb").arg("--info").arg(deb).arg("conffiles").output() {
                Ok(out) if out.status.success() => {
                    lines(&text(&out)).map(|l| PathBuf::from(l.trim_start_matches('/'))).collect()
                }
                _ => BTreeSet::new(),
            };
        Ok(Version { version, tree, conffiles })
    }

    /// The `info/PKG.list` dpkg writes for this version: `/.` and every path, absolute.
    fn list(&self) -> BTreeSet<String> {
        std::iter::once("/.".to_string())
            .chain(self.tree.0.keys().map(|p| format!("/{}", p.display())))
            .collect()
    }

    /// The lines of `info/PKG.conffiles`: its conffiles, absolute.
    fn conffile_list(&self) -> BTreeSet<String> {
        self.conffiles.iter().map(|p| format!("/{}", p.display())).collect()
    }

    /// The paths of `info/PKG.md5sums`: every regular file, conffiles included.
    fn md5sum_paths(&self) -> BTreeSet<String> {
        self.tree
            .0
            .iter()
            .filter(|(_, c)| matches!(c, Content::File { .. }))
            .map(|(p, _)| p.display().to_string())
            .collect()
    }
}

impl Db {
    /// The package pair `older` (installed and configured before the transaction) and `newer`.
    pub fn of_debs(older: &Path, newer: &Path) -> Result<Db, CrashError> {
        Ok(Db {
            package: field(newer, "Package")?,
            old: Version::of_deb(older)?,
            new: Version::of_deb(newer)?,
        })
    }

    /// The tree a root holds once the older version is configured: the older package's.
    pub fn old_tree(&self) -> Tree {
        self.old.tree.clone()
    }

    /// The tree `dpkg --unpack` of the newer version leaves over the configured older one: the
    /// newer package's paths, but each conffile `NAME` keeps its old content (absent on a fresh
    /// install) and the new content is at `NAME.dpkg-new`; paths only the older version has are
    /// gone, but for its conffiles, which dpkg keeps (obsolete).
    pub fn new_tree(&self) -> Tree {
        let mut tree = self.new.tree.clone();
        for conffile in &self.new.conffiles {
            let mut pending = conffile.clone().into_os_string();
            pending.push(".dpkg-new");
            tree.0.insert(PathBuf::from(pending), self.new.tree.get(conffile));
            tree.0.insert(conffile.clone(), self.old.tree.get(conffile));
        }
        for conffile in self.old.conffiles.difference(&self.new.conffiles) {
            tree.0.insert(conffile.clone(), self.old.tree.get(conffile));
        }
        tree
    }

    fn version(&self, side: Side) -> &Version {
        match side {
            Side::Old => &self.old,
            Side::New => &self.new,
        }
    }

    fn tree(&self, side: Side) -> Tree {
        match side {
            Side::Old => self.old_tree(),
            Side::New => self.new_tree(),
        }
    }
}

impl Deeper for Db {
    fn check(
        &self,
        root: &Path,
        _: &Expected<'_>,
        _: Option<usize>,
        id: usize,
        _: bool,
    ) -> Checked {
        Checked { violations: check(root, self, id), ..Checked::default() }
    }
}

/// Checks the database invariant on `root` (after recovery) for crash state `id`; every
/// violation names the path it is about and what was found.
pub fn check(root: &Path, db: &Db, id: usize) -> Vec<Violation> {
    let dir = match open_root(root) {
        Ok(dir) => dir,
        Err(e) => return vec![unreadable_root(id, e)],
    };
    let side = match registered_side(root, db) {
        Ok(side) => side,
        Err(found) => {
            let status = Path::new(ADMIN_DIR).join("status");
            let want = |v: &Version, s: &str| format!("Version {}, Status {s}", v.version);
            let (old, new) =
                (want(&db.old, "install ok installed"), want(&db.new, "install ok unpacked"));
            return vec![db_violation(
                id,
                &status,
                Kind::HalfRegistered,
                old,
                new,
                Content::Other(found),
            )];
        }
    };
    let mut found = info_files(&dir, db, side, id);
    found.extend(tree(&dir, db, side, id));
    found.extend(verify(root, db, side, id));
    found.extend(audit(root, db, side, id));
    found
}

/// The violation for a root that cannot be opened to read its database.
pub(super) fn unreadable_root(id: usize, why: String) -> Violation {
    let root = "a root".to_string();
    db_violation(
        id,
        Path::new(""),
        Kind::HalfRegistered,
        root.clone(),
        root,
        Content::Other(format!("unreadable root: {why}")),
    )
}

/// The side the package's status registers, as `dpkg-query` reads it (`status` with the
/// records in `updates/` that dpkg has not merged yet), or what it says instead.
fn registered_side(root: &Path, db: &Db) -> Result<Side, String> {
    let format = "--showformat=${Version}\n${Status}\n${Config-Version}\n";
    let out = Command::new("dpkg-query")
        .arg(format!("--root={}", root.display()))
        .arg(format)
        .arg("--show")
        .arg(&db.package)
        .output();
    let said = match out {
        Ok(out) if out.status.success() => text(&out),
        Ok(out) => {
            return Err(format!("dpkg-query: {}", one_line(&String::from_utf8_lossy(&out.stderr))))
        }
        Err(e) => return Err(format!("cannot run dpkg-query: {e}")),
    };
    let mut fields = said.split('\n');
    let mut field = || fields.next().unwrap_or_default().to_string();
    let (version, status, config) = (field(), field(), field());
    match status.as_str() {
        "install ok installed" if version == db.old.version => Ok(Side::Old),
        "install ok unpacked" if version == db.new.version && config == db.old.version => {
            Ok(Side::New)
        }
        _ => Err(format!("Version {version}, Status {status}, Config-Version {config}")),
    }
}

/// An info file's suffix, the paths a version says it holds, and how to read them from it.
pub(super) type InfoFile =
    (&'static str, fn(&Version) -> BTreeSet<String>, fn(&str) -> BTreeSet<String>);

/// The info files dpkg keeps of a package's paths: its list, md5sums and conffiles.
pub(super) const INFO_FILES: [InfoFile; 3] = [
    ("list", Version::list, list_lines),
    ("md5sums", Version::md5sum_paths, md5sum_lines),
    ("conffiles", Version::conffile_list, list_lines),
];

fn list_lines(text: &str) -> BTreeSet<String> {
    lines(text).map(str::to_string).collect()
}

fn md5sum_lines(text: &str) -> BTreeSet<String> {
    lines(text).filter_map(|l| l.split_once("  ")).map(|(_, p)| p.to_string()).collect()
}

/// The paths `info/PACKAGE.SUFFIX` names, read without leaving the root, or why it could not
/// be read. A package without conffiles has no conffiles file: none is an empty list.
pub(super) fn read_info(
    dir: &OwnedFd,
    package: &str,
    (suffix, _, parse): &InfoFile,
) -> Result<BTreeSet<String>, String> {
    match read_db_file(dir, &format!("info/{package}.{suffix}")) {
        Ok(text) => Ok(parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && *suffix == "conffiles" => {
            Ok(BTreeSet::new())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The package's info files name the registered version's paths and conffiles.
fn info_files(dir: &OwnedFd, db: &Db, side: Side, id: usize) -> Vec<Violation> {
    let want = db.version(side);
    let other = db.version(if side == Side::Old { Side::New } else { Side::Old });
    let mut found = Vec::new();
    for file in &INFO_FILES {
        let (suffix, expected, _) = file;
        let what = match read_info(dir, &db.package, file) {
            Ok(paths) if paths == expected(want) => continue,
            Ok(paths) if paths == expected(other) => {
                format!("the {suffix} of version {}", other.version)
            }
            Ok(paths) => differ(&paths, &expected(want)),
            Err(e) => e,
        };
        let says = |v: &Version| format!("the {suffix} of version {}", v.version);
        let what =
            Content::Other(format!("{what}, where the status registers version {}", want.version));
        let path = Path::new(ADMIN_DIR).join(format!("info/{}.{suffix}", db.package));
        found.push(db_violation(
            id,
            &path,
            Kind::HalfRegistered,
            says(&db.old),
            says(&db.new),
            what,
        ));
    }
    found
}

/// What a set of paths read has that `expected` has not, and the other way round.
pub(super) fn differ(read: &BTreeSet<String>, expected: &BTreeSet<String>) -> String {
    let extra: Vec<&String> = read.difference(expected).take(3).collect();
    let missing: Vec<&String> = expected.difference(read).take(3).collect();
    format!("{} paths; not expected: {extra:?}; missing: {missing:?}", read.len())
}

/// Every path of the registered version's tree holds what dpkg leaves there.
fn tree(dir: &OwnedFd, db: &Db, side: Side, id: usize) -> Vec<Violation> {
    let (old, new) = (db.old_tree(), db.new_tree());
    let paths: BTreeSet<&PathBuf> = old.0.keys().chain(new.0.keys()).collect();
    let want = db.tree(side);
    paths
        .into_iter()
        .filter_map(|path| {
            let found = probe(dir, path);
            (found != want.get(path)).then(|| {
                violation(id, path, Kind::DbTree, &old.get(path), &new.get(path), &found, None)
            })
        })
        .collect()
}

/// `dpkg --verify PKG`: every line is a listed file missing or changed, except, on the new
/// side, the conffiles' (dpkg hashes `NAME`, which keeps the old content until configured).
fn verify(root: &Path, db: &Db, side: Side, id: usize) -> Vec<Violation> {
    let out = match dpkg(root, &["--verify", &db.package]) {
        Ok(out) => out,
        Err(why) => return vec![tool_violation(id, "dpkg --verify", Kind::DbTree, why)],
    };
    lines(&text(&out))
        .filter(|l| !(side == Side::New && is_conffile_line(l)))
        .map(|l| {
            let path = l.split_once(" /").map_or("", |(_, path)| path);
            let says = "nothing from dpkg --verify".to_string();
            db_violation(
                id,
                Path::new(path),
                Kind::DbTree,
                says.clone(),
                says,
                Content::Other(format!("dpkg --verify: {l}")),
            )
        })
        .collect()
}

/// A `dpkg --verify` line about a conffile: `??5?????? c /etc/NAME`.
fn is_conffile_line(line: &str) -> bool {
    line.split_whitespace().nth(1) == Some("c")
}

/// `dpkg --audit`: nothing on the old side, exactly the package as unpacked on the new.
fn audit(root: &Path, db: &Db, side: Side, id: usize) -> Vec<Violation> {
    let said = match dpkg(root, &["--audit"]) {
        Ok(out) => text(&out),
        Err(why) => return vec![tool_violation(id, "dpkg --audit", Kind::DbAudit, why)],
    };
    let listed: BTreeSet<&str> = said
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let fine = match side {
        Side::Old => said.trim().is_empty(),
        Side::New => {
            said.contains("unpacked but not yet configured")
                && listed == BTreeSet::from([db.package.as_str()])
        }
    };
    if fine {
        return Vec::new();
    }
    let old = "nothing".to_string();
    let new = format!("{} unpacked but not yet configured", db.package);
    vec![db_violation(
        id,
        Path::new(ADMIN_DIR),
        Kind::DbAudit,
        old,
        new,
        Content::Other(format!("dpkg --audit: {}", one_line(&said))),
    )]
}

/// `dpkg --root=ROOT ARGS`; its output, or why it could not be run.
fn dpkg(root: &Path, args: &[&str]) -> Result<Output, String> {
    let out = Command::new("dpkg").arg(format!("--root={}", root.display())).args(args).output();
    match out {
        Ok(out) if out.status.success() => Ok(out),
        Ok(out) => Err(format!(
            "exit {}: {}",
            out.status.code().unwrap_or(-1),
            one_line(&String::from_utf8_lossy(&out.stderr))
        )),
        Err(e) => Err(format!("cannot run dpkg: {e}")),
    }
}

fn tool_violation(id: usize, what: &str, kind: Kind, why: String) -> Violation {
    let says = format!("{what} runs");
    db_violation(
        id,
        Path::new(ADMIN_DIR),
        kind,
        says.clone(),
        says,
        Content::Other(format!("{what}: {why}")),
    )
}

pub(super) fn db_violation(
    id: usize,
    path: &Path,
    kind: Kind,
    old: String,
    new: String,
    found: Content,
) -> Violation {
    violation(id, path, kind, &Content::Other(old), &Content::Other(new), &found, None)
}

/// Reads `ADMIN_DIR/name` under `dir`, resolved without leaving it, at most [`MAX_DB_FILE`]
/// bytes.
pub(super) fn read_db_file(dir: &OwnedFd, name: &str) -> std::io::Result<String> {
    let path = Path::new(ADMIN_DIR).join(name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat2(
        dir,
        &path,
        flags,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd).take(MAX_DB_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_DB_FILE {
        return Err(std::io::Error::other(format!("larger than {MAX_DB_FILE} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8"))
}

/// `text` on one line: its non-empty lines joined by ` | `, for a violation's one line.
pub(super) fn one_line(text: &str) -> String {
    lines(text).map(str::trim).collect::<Vec<_>>().join(" | ")
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim().is_empty())
}

/// A control field of `deb`, as `dpkg-deb --field` reads it.
pub(super) fn field(deb: &Path, name: &str) -> Result<String, CrashError> {
    Ok(text(&tool(Command::new("dpkg-deb").arg("--field").arg(deb).arg(name), deb)?)
        .trim()
        .to_string())
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a tool that must succeed, about `path`.
pub(super) fn tool(cmd: &mut Command, path: &Path) -> Result<Output, CrashError> {
    let program = PathBuf::from(cmd.get_program());
    let out = cmd.output().map_err(|e| CrashError::Tool {
        path: program.clone(),
        reason: format!("cannot run it: {e}"),
    })?;
    if out.status.success() {
        return Ok(out);
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(CrashError::Tool {
        path: program,
        reason: format!("on {}: exit {}: {said}", path.display(), out.status.code().unwrap_or(-1)),
    })
}

/// Writes the scenario's package pair into `dir` from `package`: the newer version is the
/// package with [`CONFFILE`] added; the older is [`super::older`]'s rewrite of it, with the
/// version `VERSION~older` (lower in dpkg's order), another content for the conffile, and
/// [`DROPPED`], which the newer version does not ship. Both lose a `md5sums` member (the
/// rewrite would make the older one's wrong; dpkg computes them). Returns (older, newer).
pub fn write_pair(package: &Path, dir: &Path) -> Result<(PathBuf, PathBuf), CrashError> {
    let rewritten = dir.join("older-files.deb");
    super::older::write(package, &rewritten)?;
    let older = dir.join("older-db.deb");
    let newer = dir.join("newer-db.deb");
    let older_version = |v: Option<&str>| Some(format!("{}~older", v.unwrap_or_default()));
    let older_edit = Rebuild {
        conffile: (CONFFILE, "the older version's conffile\n"),
        files: &[(DROPPED, "a file only the older version ships\n")],
        fields: &[("Version", &older_version)],
        md5sums: false,
    };
    rebuild(&rewritten, &older, dir, &older_edit)?;
    let newer_edit = Rebuild {
        conffile: (CONFFILE, "the newer version's conffile, longer\n"),
        files: &[],
        fields: &[],
        md5sums: false,
    };
    rebuild(package, &newer, dir, &newer_edit)?;
    Ok((older, newer))
}

/// A control field's new value from its old one (`None`: the package has no such field);
/// `None` removes the field.
pub(super) type FieldEdit<'a> = &'a dyn Fn(Option<&str>) -> Option<String>;

/// What [`rebuild`] changes in a package.
pub(super) struct Rebuild<'a> {
    /// A conffile added: its path (relative, as [`CONFFILE`]) and content.
    pub conffile: (&'a str, &'a str),
    /// Regular files added that are not conffiles: (relative path, content).
    pub files: &'a [(&'a str, &'a str)],
    /// Control fields changed, by name (one-line fields: a continuation goes with its field).
    pub fields: &'a [(&'a str, FieldEdit<'a>)],
    /// True: a `md5sums` member of every regular file, conffiles included, as dpkg computes
    /// one for a package that ships none (a member the package had is made again: it would
    /// not name the files added). False: no `md5sums` member at all.
    pub md5sums: bool,
}

/// Takes `from` apart with dpkg-deb, makes the changes of `edit`, builds `to`.
pub(super) fn rebuild(
    from: &Path,
    to: &Path,
    dir: &Path,
    edit: &Rebuild<'_>,
) -> Result<(), CrashError> {
    let stage = dir.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(io_error(&stage, "removing"))?;
    }
    tool(Command::new("dpkg-deb").arg("--raw-extract").arg(from).arg(&stage), from)?;
    let control_dir = stage.join("DEBIAN");
    for (path, content) in edit.files.iter().chain([&edit.conffile]) {
        let file = stage.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&stage))
            .map_err(io_error(&file, "creating the parent of"))?;
        std::fs::write(&file, content).map_err(io_error(&file, "writing"))?;
    }
    let list = control_dir.join("conffiles");
    let mut conffiles = std::fs::read_to_string(&list).unwrap_or_default();
    conffiles.push_str(&format!("/{}\n", edit.conffile.0));
    std::fs::write(&list, conffiles).map_err(io_error(&list, "writing"))?;
    let md5sums = control_dir.join("md5sums");
    if md5sums.exists() {
        std::fs::remove_file(&md5sums).map_err(io_error(&md5sums, "removing"))?;
    }
    if edit.md5sums {
        let sums = md5sums_of(&stage, from)?;
        std::fs::write(&md5sums, sums).map_err(io_error(&md5sums, "writing"))?;
    }
    if !edit.fields.is_empty() {
        let control = control_dir.join("control");
        let text = std::fs::read_to_string(&control).map_err(io_error(&control, "reading"))?;
        std::fs::write(&control, edit_fields(&text, edit.fields))
            .map_err(io_error(&control, "writing"))?;
    }
    tool(Command::new("dpkg-deb").args(["-Zgzip", "--build"]).arg(&stage).arg(to), from)?;
    std::fs::remove_dir_all(&stage).map_err(io_error(&stage, "removing"))
}

/// A [`CrashError::Io`] about `path`.
fn io_error(path: &Path, what: &'static str) -> impl FnOnce(std::io::Error) -> CrashError {
    let path = path.to_path_buf();
    move |source| CrashError::Io { path, what, source }
}

/// `control` with the fields of `edits` changed, removed or (at the end) added.
fn edit_fields(control: &str, edits: &[(&str, FieldEdit<'_>)]) -> String {
    let name_of =
        |line: &str| line.split_once(':').map(|(name, _)| name.trim().to_ascii_lowercase());
    let edit_of = |line: &str| {
        let name = name_of(line)?;
        edits.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name))
    };
    let mut out = String::new();
    let mut seen = Vec::new();
    let mut skipping = false;
    for line in control.lines() {
        if line.starts_with([' ', '\t']) {
            if !skipping {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        skipping = false;
        match edit_of(line) {
            Some((name, edit)) => {
                seen.push(*name);
                let old = line.split_once(':').map(|(_, v)| v.trim());
                match edit(old) {
                    Some(value) => out.push_str(&format!("{name}: {value}\n")),
                    None => skipping = true,
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (name, edit) in edits.iter().filter(|(n, _)| !seen.contains(n)) {
        if let Some(value) = edit(None) {
            out.push_str(&format!("{name}: {value}\n"));
        }
    }
    out
}

/// The `md5sums` member dpkg computes for the data tree at `stage` (its `DEBIAN` left out):
/// `HASH  PATH` for every regular file, by `md5sum`, a thousand files per call.
fn md5sums_of(stage: &Path, package: &Path) -> Result<String, CrashError> {
    let mut files = Vec::new();
    regular_files(stage, Path::new(""), &mut files)?;
    files.sort();
    let mut sums = String::new();
    for chunk in files.chunks(1000) {
        let out = tool(
            Command::new("md5sum").arg("--zero").arg("--").args(chunk).current_dir(stage),
            package,
        )?;
        for line in text(&out).split('\0').filter(|l| !l.is_empty()) {
            sums.push_str(line);
            sums.push('\n');
        }
    }
    Ok(sums)
}

/// Collects the regular files below `dir` (`rel` inside the stage), `DEBIAN` left out.
fn regular_files(dir: &Path, rel: &Path, files: &mut Vec<PathBuf>) -> Result<(), CrashError> {
    let here = dir.join(rel);
    for entry in std::fs::read_dir(&here).map_err(io_error(&here, "reading"))? {
        let entry = entry.map_err(io_error(&here, "reading"))?;
        let path = rel.join(entry.file_name());
        if path == Path::new("DEBIAN") {
            continue;
        }
        let kind = entry.file_type().map_err(io_error(&dir.join(&path), "stat"))?;
        if kind.is_dir() {
            regular_files(dir, &path, files)?;
        } else if kind.is_file() {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(len: u64, hash: u64) -> Content {
        Content::File { len, hash }
    }

    fn version(v: &str, paths: &[(&str, Content)], conffiles: &[&str]) -> Version {
        Version {
            version: v.to_string(),
            tree: Tree(paths.iter().map(|(p, c)| (PathBuf::from(p), c.clone())).collect()),
            conffiles: conffiles.iter().map(PathBuf::from).collect(),
        }
    }

    #[test]
    fn after_dpkg_unpack_a_conffile_keeps_its_old_content_beside_the_new_one_and_dropped_files_go()
    {
        let old = version(
            "1",
            &[
                ("etc", Content::Dir),
                ("etc/a", file(1, 1)),
                ("etc/gone", file(2, 2)),
                ("usr/f", file(3, 3)),
                ("usr/x", file(4, 4)),
            ],
            &["etc/a", "etc/gone"],
        );
        let new = version(
            "2",
            &[
                ("etc", Content::Dir),
                ("etc/a", file(5, 5)),
                ("etc/b", file(6, 6)),
                ("usr/f", file(7, 7)),
            ],
            &["etc/a", "etc/b"],
        );
        let db = Db { package: "p".into(), old, new };
        let tree = db.new_tree();
        assert_eq!(tree.get(Path::new("etc/a")), file(1, 1), "the old conffile stays");
        assert_eq!(tree.get(Path::new("etc/a.dpkg-new")), file(5, 5));
        assert_eq!(
            tree.get(Path::new("etc/b")),
            Content::Absent,
            "a new conffile is only .dpkg-new"
        );
        assert!(tree.0.contains_key(Path::new("etc/b")), "and its absence is checked");
        assert_eq!(tree.get(Path::new("etc/b.dpkg-new")), file(6, 6));
        assert_eq!(tree.get(Path::new("etc/gone")), file(2, 2), "an obsolete conffile stays");
        assert_eq!(tree.get(Path::new("usr/f")), file(7, 7));
        assert_eq!(tree.get(Path::new("usr/x")), Content::Absent, "a dropped file goes");
        assert_eq!(db.old_tree(), db.old.tree);
    }

    #[test]
    fn what_dpkg_registers_for_a_version() {
        let v = version(
            "1",
            &[
                ("etc", Content::Dir),
                ("etc/a", file(1, 1)),
                ("usr/l", Content::Symlink("a".into())),
                ("usr/f", file(2, 2)),
            ],
            &["etc/a"],
        );
        let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(v.list(), set(&["/.", "/etc", "/etc/a", "/usr/f", "/usr/l"]));
        assert_eq!(v.md5sum_paths(), set(&["etc/a", "usr/f"]));
        assert_eq!(v.conffile_list(), set(&["/etc/a"]));
    }

    #[test]
    fn conffile_lines_of_dpkg_verify_are_told_apart() {
        assert!(is_conffile_line("??5?????? c /etc/ct/ct.conf"));
        assert!(!is_conffile_line("??5??????   /usr/share/ct/f"));
        assert!(!is_conffile_line("missing     /usr/share/ct/f"));
    }

    #[test]
    fn tool_output_is_reported_on_one_line() {
        assert_eq!(
            one_line("The following packages\n are broken:\n\n pkg   x\n"),
            "The following packages | are broken: | pkg   x"
        );
    }

    #[test]
    fn control_fields_are_changed_removed_and_added() {
        let control = "Package: p\nVersion: 1\nMulti-Arch: same\nDescription: d\n long\n";
        let yes = |_: Option<&str>| Some("yes".to_string());
        let bump = |v: Option<&str>| Some(format!("{}~older", v.unwrap_or_default()));
        let none = |_: Option<&str>| None;
        let edited =
            edit_fields(control, &[("Version", &bump), ("Multi-Arch", &none), ("Essential", &yes)]);
        assert_eq!(edited, "Package: p\nVersion: 1~older\nDescription: d\n long\nEssential: yes\n");
    }
}
