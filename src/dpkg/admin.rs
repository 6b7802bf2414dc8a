//! dpkg's admin directory in a root, read: where it is, its locks, and what it says is
//! installed (status, the info files, diversions, statoverride).
//!
//! A root's database is attacker input, exactly like a package: a container image's rootfs, or
//! a root another user prepared. So the admin directory is found through the root's confined
//! resolution (symlinks followed only inside ROOT), every file is opened without following a
//! symlink and without blocking, must be a regular file, and is read only up to a bound; every
//! name built from what it says (a package's info files) is a validated package name, and every
//! path it holds is validated ([`super::format::db_path`]) before the engine resolves it, again inside
//! ROOT. A parse error is exit 4 naming the file and the line. This module never writes: what
//! changes in the database goes through the transaction ([`super::install`]).

use super::format::deb822::Stanza;
use super::format::diversions::Diversion;
use super::format::status::{Package, State};
use super::format::{control, deb822, diversions, list, statoverride, status};
use crate::durability::Directory;
use crate::error::{escape, Error, Result};
use crate::fs::root::{Create, Pending, Root};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where dpkg keeps its database in a root unless told otherwise.
pub const DEFAULT_ADMINDIR: &str = "var/lib/dpkg";

/// Bounds on what is read: a status file of 30,000 packages is about 60 MB; a list of
/// linux-headers' 17,000 paths about 1.5 MB.
const MAX_STATUS: u64 = 256 << 20;
const MAX_LIST: u64 = 64 << 20;
const MAX_SMALL: u64 = 16 << 20;

/// The longest name of a record of `updates/` dpkg reads (lib/dpkg/dbmodify.c, IMPORTANTMAXLEN).
const MAX_RECORD_NAME: usize = 10;

/// The admin directory of a root, found and opened.
pub struct Admin {
    pub dir: Directory,
    /// Its canonical path inside the root.
    pub rel: PathBuf,
    pub info: Directory,
}

/// What the database says, read.
pub struct Installed {
    pub packages: Vec<Package>,
    /// The names of the records in `updates/`, read over `status`: the transaction that
    /// writes `status` next removes them, as dpkg does once it has written them into it.
    pub records: Vec<String>,
    /// Each package's `.list` (empty for a package not installed), by index into `packages`.
    pub lists: Vec<Vec<PathBuf>>,
    /// Which packages list each path: [`Installed::owners_of`].
    owners: HashMap<PathBuf, Owners>,
    /// By the path diverted.
    pub diversions: HashMap<PathBuf, Diversion>,
    /// (uid, gid, mode) by path.
    pub overrides: HashMap<PathBuf, (u32, u32, u32)>,
    /// The names in the info directory.
    pub info_names: Vec<String>,
    /// `info/format` is missing: dpkg writes "1" (the multiarch layout) when it first writes.
    pub format_missing: bool,
    /// `triggers/` is missing: dpkg makes it on its first run, even one without triggers.
    pub triggers_missing: bool,
}

impl Installed {
    /// The packages (indices into `packages`) whose lists name `path`, in the order read.
    pub fn owners_of(&self, path: &Path) -> &[usize] {
        self.owners.get(path).map_or(&[], Owners::as_slice)
    }
}

/// The packages whose lists name one path. Nearly always one, so held without an allocation of
/// its own until a second comes: a system's lists hold tens of thousands of paths, and they are
/// read at every call.
#[derive(Debug, Clone)]
enum Owners {
    One(usize),
    Many(Vec<usize>),
}

impl Owners {
    fn push(&mut self, i: usize) {
        match self {
            Owners::One(first) => *self = Owners::Many(vec![*first, i]),
            Owners::Many(all) => all.push(i),
        }
    }

    fn as_slice(&self) -> &[usize] {
        match self {
            Owners::One(one) => std::slice::from_ref(one),
            Owners::Many(all) => all,
        }
    }
}

/// Finds the admin directory: `explicit` (a path that must lead inside `root`, else exit 2),
/// or `ROOT/var/lib/dpkg` when it holds a `status` file. `None`: no database, extraction only.
pub fn find(root: &mut Root, explicit: Option<&Path>) -> Result<Option<Admin>> {
    let rel = match explicit {
        Some(dir) => {
            let canon = |p: &Path| {
                std::fs::canonicalize(p)
                    .map_err(|e| Error::Usage(format!("--admindir {}: {e}", escape(p))))
            };
            let (dir_c, root_c) = (canon(dir)?, canon(root.path())?);
            let Ok(rel) = dir_c.strip_prefix(&root_c) else {
                return Err(Error::Usage(format!(
                    "--admindir {}: not inside the root {}: a transaction lives in one tree",
                    escape(dir),
                    escape(root.path())
                )));
            };
            rel.to_path_buf()
        }
        None => PathBuf::from(DEFAULT_ADMINDIR),
    };
    let nothing = |_: &Path| Pending::Nothing;
    let dir = match root.resolve_dir(&rel, Create::Never, &nothing) {
        Ok((canon, dir)) => (canon, dir),
        Err(_) if explicit.is_none() => return Ok(None),
        Err(_) => {
            return Err(Error::Usage(format!(
                "--admindir {}: not a directory inside the root",
                escape(&rel)
            )))
        }
    };
    let (rel, dir) = dir;
    match rustix::fs::statat(dir.fd(), "status", rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => {}
        Err(Errno::NOENT) if explicit.is_none() => return Ok(None),
        Err(_) => {
            return Err(Error::Usage(format!(
                "--admindir {}: not dpkg's admin directory (no status file)",
                escape(dir.path())
            )))
        }
    }
    let info_rel = rel.join("info");
    let (_, info) = root
        .resolve_dir(&info_rel, Create::Never, &nothing)
        .map_err(|_| bad_db(&dir.path().join("info"), "dpkg's database has no info directory"))?;
    Ok(Some(Admin { dir, rel, info }))
}

impl Admin {
    /// Reads the database: `status`, with the records of `updates/` over it as dpkg reads them
    /// (a dpkg, or this engine, that was interrupted left them: each holds a package's stanza
    /// as it was noted before a maintainer script).
    pub fn read(&self, root: &mut Root) -> Result<Installed> {
        let (packages, records) = self.status()?;
        let info_names = self.info_names()?;
        let mut lists = Vec::with_capacity(packages.len());
        for p in &packages {
            let name = format!("{}.list", p.info_name());
            let path = self.info.path().join(&name);
            let paths = match read_file(&self.info, &name, MAX_LIST)? {
                Some(bytes) => list::parse_list(&bytes).map_err(|e| bad_db(&path, e))?,
                // A fresh install noted half-installed before its preinst has no list yet.
                None if matches!(
                    p.status.state,
                    State::NotInstalled | State::ConfigFiles | State::HalfInstalled
                ) =>
                {
                    Vec::new()
                }
                None => {
                    return Err(bad_db(
                        &path,
                        format!(
                            "missing, for {} which status says is {}: run dpkg --audit",
                            p.name, p.status
                        ),
                    ))
                }
            };
            lists.push(paths);
        }
        // Sized once: a system's lists hold tens of thousands of paths, read at every call and
        // before every archive of one, and growing the table step by step rehashed them all
        // (a sixth of the instructions of a small unpack into a 300-package system).
        let mut owners: HashMap<PathBuf, Owners> =
            HashMap::with_capacity(lists.iter().map(Vec::len).sum());
        for (i, paths) in lists.iter().enumerate() {
            for path in paths {
                match owners.entry(path.clone()) {
                    Entry::Occupied(mut o) => o.get_mut().push(i),
                    Entry::Vacant(v) => {
                        v.insert(Owners::One(i));
                    }
                }
            }
        }
        let diversions = self.diversions()?;
        let overrides = self.overrides(root)?;
        Ok(Installed {
            packages,
            records,
            lists,
            owners,
            diversions,
            overrides,
            format_missing: !info_names.iter().any(|n| n == "format"),
            triggers_missing: matches!(
                rustix::fs::statat(
                    self.dir.fd(),
                    "triggers",
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW
                ),
                Err(Errno::NOENT)
            ),
            info_names,
        })
    }

    /// `status` with the records of `updates/` over it: the packages, and the records' names.
    fn status(&self) -> Result<(Vec<Package>, Vec<String>)> {
        let status_path = self.dir.path().join("status");
        let bytes = read_file(&self.dir, "status", MAX_STATUS)?.unwrap_or_default();
        let mut stanzas = deb822::parse(&bytes).map_err(|e| bad_db(&status_path, e))?;
        let records = self.read_updates(&mut stanzas)?;
        let packages = status::packages(stanzas).map_err(|e| bad_db(&status_path, e))?;
        Ok((packages, records))
    }

    /// What `status` and `updates/` say of each package, and nothing else of the database: for
    /// a reader that needs no list (the configure guard, before and after each configure).
    pub fn packages(&self) -> Result<Vec<Package>> {
        self.status().map(|(packages, _)| packages)
    }

    /// `diversions`, by the path diverted. Read again after each preinst, which may add one
    /// (`dpkg-divert --rename` in a preinst is how a package diverts a file it ships).
    pub fn diversions(&self) -> Result<HashMap<PathBuf, Diversion>> {
        let path = self.dir.path().join("diversions");
        let list = match read_file(&self.dir, "diversions", MAX_SMALL)? {
            Some(bytes) => diversions::parse(&bytes).map_err(|e| bad_db(&path, e))?,
            None => Vec::new(),
        };
        Ok(list.into_iter().map(|d| (d.from.clone(), d)).collect())
    }

    /// `statoverride`, its user and group names looked up in the root's /etc/passwd and
    /// /etc/group (the root's users, not the host's: a container's ids).
    fn overrides(&self, root: &mut Root) -> Result<HashMap<PathBuf, (u32, u32, u32)>> {
        let path = self.dir.path().join("statoverride");
        let Some(bytes) = read_file(&self.dir, "statoverride", MAX_SMALL)? else {
            return Ok(HashMap::new());
        };
        let entries = statoverride::parse(&bytes).map_err(|e| bad_db(&path, e))?;
        let mut etc: HashMap<&str, Vec<u8>> = HashMap::new();
        let mut resolve = |id: &statoverride::Id,
                           file: &'static str,
                           root: &mut Root|
         -> Result<u32> {
            match id {
                statoverride::Id::Num(n) => Ok(*n),
                statoverride::Id::Name(name) => {
                    if !etc.contains_key(file) {
                        etc.insert(file, read_etc(root, file)?);
                    }
                    statoverride::lookup_id(&etc[file], name).ok_or_else(|| {
                        bad_db(
                            &path,
                            format!("'{}' is in no /etc/{file} of the root", escape(name.as_str())),
                        )
                    })
                }
            }
        };
        let mut out = HashMap::new();
        for o in entries {
            let uid = resolve(&o.user, "passwd", root)?;
            let gid = resolve(&o.group, "group", root)?;
            out.insert(o.path, (uid, gid, o.mode));
        }
        Ok(out)
    }

    /// The records of dpkg's journal, `updates/NNNN` (names of digits, all of one length, as
    /// lib/dpkg/dbmodify.c reads them; other names are dpkg's or this engine's temporary
    /// files), each one stanza that replaces the package's in `stanzas` (or joins them), in
    /// the order of their numbers. Returns their names.
    fn read_updates(&self, stanzas: &mut Vec<Stanza>) -> Result<Vec<String>> {
        let path = self.dir.path().join("updates");
        let dir = match rustix::fs::openat(
            self.dir.fd(),
            "updates",
            crate::fs::tree::DIR_FLAGS,
            Mode::empty(),
        ) {
            Ok(fd) => {
                Directory::new(fd, path.clone()).map_err(|e| Error::root(&path, "stat", e))?
            }
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(Error::root(&path, "opening", e)),
        };
        let (files, _) = crate::fs::tree::entries(dir.fd())
            .map_err(|e| Error::root(&path, "reading directory", e))?;
        let mut names: Vec<String> = files
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        names.sort();
        if let Some(n) = names.iter().find(|n| n.len() > MAX_RECORD_NAME) {
            return Err(bad_db(&path.join(n), "a record name longer than dpkg's 10 digits"));
        }
        if names.windows(2).any(|w| w[0].len() != w[1].len()) {
            return Err(bad_db(&path, "records whose names are of different lengths"));
        }
        for name in &names {
            let record = path.join(name);
            let bytes = read_file(&dir, name, MAX_SMALL)?.unwrap_or_default();
            let mut parsed = deb822::parse(&bytes).map_err(|e| bad_db(&record, e))?;
            let (Some(stanza), None) = (parsed.pop(), parsed.pop()) else {
                return Err(bad_db(&record, "not one stanza, as dpkg writes a record"));
            };
            // Checked alone first, so that an error names the record, not status.
            status::packages(vec![stanza.clone()]).map_err(|e| bad_db(&record, e))?;
            let key = |s: &Stanza| {
                (
                    s.get("Package").map(str::to_ascii_lowercase),
                    s.get("Architecture").map(String::from),
                )
            };
            match stanzas.iter_mut().find(|s| key(s) == key(&stanza)) {
                Some(old) => *old = stanza,
                None => stanzas.push(stanza),
            }
        }
        Ok(names)
    }

    fn info_names(&self) -> Result<Vec<String>> {
        let (files, _) = crate::fs::tree::entries(self.info.fd())
            .map_err(|e| Error::root(self.info.path(), "reading directory", e))?;
        // A name that is not UTF-8 is no package's (package names are ASCII).
        Ok(files.into_iter().filter_map(|n| n.into_string().ok()).collect())
    }
}

/// The root's `/etc/passwd` or `/etc/group` (empty if it has none).
fn read_etc(root: &mut Root, file: &str) -> Result<Vec<u8>> {
    let nothing = |_: &Path| Pending::Nothing;
    match root.resolve_dir(Path::new("etc"), Create::Never, &nothing) {
        Ok((_, etc)) => Ok(read_file(&etc, file, MAX_SMALL)?.unwrap_or_default()),
        Err(_) => Ok(Vec::new()),
    }
}

/// The bytes of `name` in `dir`, `None` if there is none: a regular file, opened without
/// following a symlink or blocking, and no bigger than `max`.
pub fn read_file(dir: &Directory, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
    let path = dir.path().join(name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir.fd(), OsStr::new(name), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(bad_db(&path, "a symlink, where dpkg keeps a file")),
        Err(e) => return Err(Error::root(&path, "opening", e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::root(&path, "stat", e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(bad_db(&path, "not a regular file"));
    }
    if st.st_size as u64 > max {
        return Err(bad_db(
            &path,
            format!("{} bytes, more than the {max} this engine reads", st.st_size),
        ));
    }
    let mut bytes = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::root(&path, "reading", e))?;
    if bytes.len() as u64 > max {
        return Err(bad_db(&path, format!("more than the {max} bytes this engine reads")));
    }
    Ok(Some(bytes))
}

/// A database file that cannot be used as it is: exit 4, naming the file and why.
pub fn bad_db(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::root(path, "reading dpkg's database", std::io::Error::other(why.to_string()))
}

/// A package's control file checked as dpkg checks it ([`control::check`]: exit 3 naming the
/// package, the line and the field), its stanza as the status file gets it.
pub fn control_stanza(package: &Path, text: &str) -> Result<Stanza> {
    control_checked(package, text).map(|c| c.stanza)
}

/// [`control_stanza`] with dpkg's warnings.
pub fn control_checked(package: &Path, text: &str) -> Result<control::Control> {
    control::check(text.as_bytes()).map_err(|e| Error::bad(package, format!("control: {e}")))
}
