//! Entries written into the root under temporary names: the first half of a transaction.
//!
//! For each validated entry this module creates what the entry describes next to its final
//! name (`NAME.unpack-new`), with owner, mode and mtime applied through the descriptor, and
//! records the rename that will put it in place. A directory the root does not have yet starts
//! a new tree, made under a temporary name as well (`DIR.unpack-new`); everything below it is
//! made under its final name, since nobody can see it before the commit renames the tree's
//! top. An install into an empty root thus pays one rename per top directory instead of one
//! per file, and a crash before the commit leaves only names recovery knows to remove.
//!
//! It must never touch a final name that anyone can see: until [`crate::txn::commit`] runs, the
//! only changes to the root are new temporary names and what lies inside them, all removed by
//! [`Transaction`]'s rollback, which runs on any error and on drop.

use crate::durability::early_writeback::EarlyWriteback;
use crate::durability::{Directory, Strategy, TempFile};
use crate::error::{escape, Error, Result};
use crate::fs::names::{temp_name, INTENT, JOURNAL, JOURNAL_NEW, STATE_DIR};
use crate::fs::root::{Create, CreatedDir, Pending, ResolveError, Root, Stamp};
use crate::fs::syscalls::Syscalls;
use crate::options::{Phase, PhaseFn, StopFn};
use crate::read::entry::{Entry, Kind};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// What a file the engine writes for dpkg's database is called in errors, where a package's
/// file would be named.
const DATABASE: &str = "dpkg's database";

/// The archive's metadata for a directory the transaction made, applied in the commit phase
/// before the barrier. Directories that were already there have none: they keep their own.
#[derive(Debug)]
pub struct DirMeta {
    pub dir: Directory,
    pub canon: PathBuf,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, u32),
}

/// A name the commit removes after every rename (database mode: a file or directory an
/// upgraded package no longer ships), in a directory resolved inside the root.
#[derive(Debug)]
pub struct Removal {
    pub dir: Directory,
    pub name: OsString,
    /// Removed only if empty.
    pub directory: bool,
}

/// What the transaction holds at a canonical path.
#[derive(Debug, Clone)]
enum Slot {
    Dir,
    Symlink {
        rename: usize,
        target: OsString,
    },
    /// A regular file or a hard link to one.
    File {
        rename: usize,
    },
    Special {
        rename: usize,
    },
    /// Taken as it is on disk ([`Transaction::adopt`]): nothing to rename.
    Adopted,
}

/// Who the process is, read once.
#[derive(Debug, Clone, Copy)]
struct Identity {
    euid: u32,
    egid: u32,
    umask: u32,
}

/// What [`Transaction::on_disk`] finds at a final name.
pub enum OnDisk {
    Nothing,
    File(File),
    Symlink(PathBuf),
    Other,
}

/// A transaction in its write phase.
pub struct Transaction<'a> {
    pub(super) root: &'a mut Root,
    pub(super) strategy: &'a dyn Strategy,
    pub(super) calls: &'a Syscalls,
    slots: HashMap<PathBuf, (Slot, usize)>,
    /// Every name written, in the order written: what the commit renames (and the barrier
    /// flushes).
    pub(super) renames: Vec<TempFile>,
    /// Every temporary name made so far, recorded the moment it exists: rollback removes them.
    temps: Vec<(Directory, OsString)>,
    pub(super) created: Vec<CreatedDir>,
    pub(super) dir_meta: HashMap<PathBuf, DirMeta>,
    /// In the order to do them, after the renames.
    pub(super) removals: Vec<Removal>,
    identity: Identity,
    /// Set once the commit phase has started: from then on rollback must not run.
    pub(super) committing: bool,
    /// The engine's state directory, where the intent file and the journal live.
    pub(super) state: Directory,
    /// Asked between entries and buffers; `Some(signal)` stops the write phase.
    stop: Option<&'a StopFn>,
    /// Told each phase the transaction enters ([`Transaction::enter`]).
    phase: Option<&'a PhaseFn>,
    /// The package being written, for messages about paths two packages share.
    pkg: usize,
    /// Syncing in the background, for strategies that ask for it: started at the first file's
    /// data, not before (a transaction that runs a preinst or writes only small files should
    /// not pay a flush per tick for nothing of its own), stopped at the barrier.
    pub(super) early: Option<EarlyWriteback>,
    early_started: bool,
    /// Database mode: dpkg's admin directory (canonical), where no package writes a file; only
    /// [`Transaction::add_generated`] does.
    admin: Option<PathBuf>,
    generating: bool,
}

impl<'a> Transaction<'a> {
    /// Starts a transaction: marks it in progress with the intent file in `state` (a checked
    /// state directory, from [`Root::state_dir`]).
    pub fn new(
        root: &'a mut Root,
        state: Directory,
        strategy: &'a dyn Strategy,
        calls: &'a Syscalls,
        stop: Option<&'a StopFn>,
    ) -> Result<Transaction<'a>> {
        root.forget_dirs();
        let intent_path = state.path().join(INTENT);
        let intent = crate::fs::root::create_state_file(&state, INTENT)?;
        intent
            .set_len(0)
            .map_err(|e| Error::root(&intent_path, "truncating the intent file", e))?;
        // Durable before anything of the transaction can be: recovery rolls back only what an
        // intent on disk says was in progress. On ext4 a later fsync would carry it along (one
        // journal); on btrfs an fsync covers only its own inode, and a crash kept the package's
        // fsynced files and directories without the intent (the crash test showed it).
        if strategy.is_durable() {
            calls
                .fsync(&intent)
                .map_err(|e| Error::root(&intent_path, "fsync of the intent file", e))?;
        }
        let umask = rustix::process::umask(Mode::empty());
        rustix::process::umask(umask);
        let identity = Identity {
            euid: rustix::process::geteuid().as_raw(),
            egid: rustix::process::getegid().as_raw(),
            umask: umask.bits(),
        };
        Ok(Transaction {
            early: None,
            early_started: false,
            root,
            strategy,
            calls,
            slots: HashMap::new(),
            renames: Vec::new(),
            temps: Vec::new(),
            created: Vec::new(),
            dir_meta: HashMap::new(),
            removals: Vec::new(),
            identity,
            committing: false,
            state,
            stop,
            phase: None,
            pkg: 0,
            admin: None,
            generating: false,
        })
    }

    /// Database mode: `admin` (canonical inside the root) holds dpkg's database.
    pub fn set_admin(&mut self, admin: &Path) {
        self.admin = Some(admin.to_path_buf());
    }

    /// The caller's phase callback ([`Options::phase`](crate::options::Options::phase)).
    pub fn set_phase(&mut self, phase: Option<&'a PhaseFn>) {
        self.phase = phase;
    }

    /// Tells the caller the transaction enters `phase`.
    pub fn enter(&self, phase: Phase<'_>) {
        if let Some(f) = self.phase {
            f(phase);
        }
    }

    /// Writes a file of dpkg's database (`path` inside the root, its directory existing) with
    /// `bytes`, through the transaction like any package file: a temporary name now, the
    /// rename at commit, recovery's to finish or roll back.
    pub fn add_generated(&mut self, path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
        self.generate(path, Kind::File { size: bytes.len() as u64 }, mode, bytes, DATABASE)
    }

    /// A directory of dpkg's database, made through the transaction as a new tree.
    pub fn add_generated_dir(&mut self, path: &Path, mode: u32) -> Result<()> {
        self.generate(path, Kind::Dir, mode, &[], DATABASE)
    }

    /// Whether the strategy makes what it writes durable (the engine's own records too).
    pub fn durable(&self) -> bool {
        self.strategy.is_durable()
    }

    /// The call's counted system calls.
    pub fn calls(&self) -> &Syscalls {
        self.calls
    }

    /// Fails when a name the commit would rename is gone: a maintainer script removed it, or
    /// the directory it is in, while the call had it pending (a later package's preinst that
    /// removes a directory an earlier package of the call writes into). Checked before the
    /// journal, so that such a call rolls back as any failure does instead of writing a
    /// journal whose renames could never be done.
    pub fn check_pending(&self) -> Result<()> {
        for r in self.renames.iter().filter(|r| r.is_renamed()) {
            let dir_gone = rustix::fs::fstat(r.dir.fd()).map(|st| st.st_nlink == 0);
            let temp = rustix::fs::statat(r.dir.fd(), r.temp_name(), AtFlags::SYMLINK_NOFOLLOW);
            if dir_gone.unwrap_or(true) || temp.is_err() {
                return Err(Error::Conflict {
                    path: r.path(),
                    reason: "a maintainer script of the call removed it, or its directory, while it was pending: the call is rolled back".into(),
                });
            }
        }
        Ok(())
    }

    /// The root this transaction writes, to look at what it holds.
    pub fn root(&self) -> &Root {
        self.root
    }

    /// A directory or symlink of the root's layout that no package ships (the bootstrap's
    /// merged /usr: `usr/bin`, and `bin` -> `usr/bin`), through the transaction.
    pub fn add_layout(&mut self, path: &Path, kind: Kind) -> Result<()> {
        let mode = if matches!(kind, Kind::Dir) { 0o755 } else { 0o777 };
        self.generate(path, kind, mode, &[], "the merged-/usr layout")
    }

    fn generate(
        &mut self,
        path: &Path,
        kind: Kind,
        mode: u32,
        bytes: &[u8],
        origin: &str,
    ) -> Result<()> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let (uid, gid) = (self.identity.euid, self.identity.egid);
        let entry = Entry {
            path: path.to_path_buf(),
            kind,
            mode,
            uid,
            gid,
            mtime: (now.as_secs() as i64, now.subsec_nanos()),
        };
        self.generating = true;
        let added = self.add(self.pkg, Path::new(origin), &entry, &mut &bytes[..]);
        self.generating = false;
        added
    }

    /// Database mode: `paths` (relative to the root) to remove after the renames, the files an
    /// upgrade drops. What is not there, does not resolve inside the root, or is a name this
    /// transaction writes (through another name of its directory: a symlinked directory) is
    /// left out. Files first, in the order given, then directories deepest first, each removed
    /// only if empty by then.
    pub fn plan_removals(&mut self, paths: Vec<PathBuf>) -> Result<()> {
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        for path in paths {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { continue };
            let slots = &self.slots;
            let overlay = |p: &Path| pending(slots, p);
            let Ok((canon_dir, dir)) = self.root.resolve_dir(parent, Create::Never, &overlay)
            else {
                continue;
            };
            let canon = canon_dir.join(name);
            if self.slots.contains_key(&canon) || canon.starts_with(STATE_DIR) || dir.staged {
                continue;
            }
            match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(Error::root(self.root.display(&canon), "stat", e)),
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                    dirs.push((canon, Removal { dir, name: name.to_os_string(), directory: true }))
                }
                Ok(_) => files.push(Removal { dir, name: name.to_os_string(), directory: false }),
            }
        }
        dirs.sort_by_key(|(canon, _)| std::cmp::Reverse(canon.components().count()));
        self.removals.extend(files);
        self.removals.extend(dirs.into_iter().map(|(_, r)| r));
        Ok(())
    }

    /// Fails with [`Error::Interrupted`] once a stop was asked for.
    pub fn check_stop(&self) -> Result<()> {
        match self.stop.and_then(|f| f()) {
            Some(signal) => {
                Err(Error::Interrupted { signal, root: self.root.path().to_path_buf() })
            }
            None => Ok(()),
        }
    }

    /// Writes one entry of package number `pkg` (its file is `package`), reading a regular
    /// file's bytes from `data`.
    pub fn add(
        &mut self,
        pkg: usize,
        package: &Path,
        entry: &Entry,
        data: &mut dyn BufRead,
    ) -> Result<()> {
        self.pkg = pkg;
        if entry.path.as_os_str().is_empty() {
            // `./`: the root's own metadata belongs to whoever made the root.
            return Ok(());
        }
        let (Some(parent_path), Some(name)) = (entry.path.parent(), entry.path.file_name()) else {
            return Ok(());
        };
        let (canon_dir, dir) = self.resolve(parent_path, true, package)?;
        let canon = canon_dir.join(name);
        self.check_claim(pkg, package, entry, &canon)?;
        if entry.kind == Kind::Dir {
            return self.add_dir(pkg, package, entry, (&dir, &canon));
        }
        if let Kind::Symlink { target } = &entry.kind {
            if self.keeps_existing_dir(&entry.path, target) {
                return Ok(());
            }
        }
        let display = self.root.display(&canon);
        let clears_name = !dir.staged && self.check_final_name(&dir, name, &display)?;
        // In a new tree the final name is the name on disk: the tree is what gets renamed.
        let temp = if dir.staged { name.to_os_string() } else { temp_name(name) };
        let rename = self.renames.len();
        let slot = match &entry.kind {
            Kind::File { size } => {
                self.write_file(package, entry, *size, &dir, &temp, &display, data)?;
                Slot::File { rename }
            }
            Kind::Symlink { target } => {
                create_temp(&dir, &temp, || {
                    rustix::fs::symlinkat(target.as_os_str(), dir.fd(), &temp)
                })
                .map_err(|e| Error::root(&display, "creating symlink", e))?;
                self.temps.push((dir.clone(), temp.clone()));
                self.set_metadata_at(entry, &dir, &temp, &display, (FileType::Symlink, 0))?;
                Slot::Symlink { rename, target: target.clone() }
            }
            Kind::Hardlink { target } => {
                self.link(package, entry, target, &dir, &temp, &display)?;
                Slot::File { rename }
            }
            Kind::Fifo => {
                self.make_node(package, entry, (FileType::Fifo, 0), &dir, &temp, &display)?;
                Slot::Special { rename }
            }
            Kind::CharDevice { major, minor } => {
                let node = (FileType::CharacterDevice, rustix::fs::makedev(*major, *minor));
                self.make_node(package, entry, node, &dir, &temp, &display)?;
                Slot::Special { rename }
            }
            Kind::BlockDevice { major, minor } => {
                let node = (FileType::BlockDevice, rustix::fs::makedev(*major, *minor));
                self.make_node(package, entry, node, &dir, &temp, &display)?;
                Slot::Special { rename }
            }
            Kind::Dir => return self.add_dir(pkg, package, entry, (&dir, &canon)),
        };
        let regular = matches!(entry.kind, Kind::File { .. });
        let in_place = dir.staged;
        self.renames.push(TempFile {
            dir,
            name: name.to_os_string(),
            regular,
            in_place,
            clears_name,
        });
        self.slots.insert(canon, (slot, pkg));
        Ok(())
    }

    /// Whether a symlink entry at `path` to `target` leaves what is there as it is, as dpkg
    /// leaves it (src/main/archives.c, tarobject's `existingdir`): a directory, or a symlink
    /// that leads to the directory the new one would lead to (`linktosameexistingdir`), such
    /// as merged /usr's `bin -> usr/bin` shipped by a package where the root has it already.
    /// Both are resolved inside the root, seeing what the transaction holds already (never the
    /// host's `/`, which dpkg's `stat` follows an absolute link to under `--root`); what does
    /// not resolve to a directory is no directory, and the entry is written.
    pub fn keeps_existing_dir(&mut self, path: &Path, target: &OsStr) -> bool {
        let slots = &self.slots;
        let overlay = |p: &Path| pending(slots, p);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let Ok((parent, dir)) = self.root.resolve_dir(parent, Create::Never, &overlay) else {
            return false;
        };
        let canon = parent.join(name);
        match overlay(&canon) {
            Pending::Dir => return true,
            Pending::NotDir => return false,
            Pending::Symlink(_) => {}
            Pending::Nothing => {
                match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))
                {
                    Ok(FileType::Directory) => return true,
                    Ok(FileType::Symlink) => {}
                    _ => return false,
                }
            }
        }
        let old = self.root.resolve_dir(&canon, Create::Never, &overlay);
        let new = self.root.resolve_dir(&parent.join(target), Create::Never, &overlay);
        matches!((old, new), (Ok((old, _)), Ok((new, _))) if old == new)
    }

    /// Whether package number `pkg` may have `entry` at `canon`: not in the engine's state
    /// directory, not in dpkg's database (only [`Transaction::add_generated`] writes there), not
    /// a path the transaction holds already (a directory may come again).
    fn check_claim(&self, pkg: usize, package: &Path, entry: &Entry, canon: &Path) -> Result<()> {
        if canon.starts_with(STATE_DIR) {
            return Err(in_state_dir(package, &entry.path, canon));
        }
        if let Some(admin) = self
            .admin
            .as_ref()
            .filter(|a| canon.starts_with(a) && entry.kind != Kind::Dir && !self.generating)
        {
            return Err(Error::bad(
                package,
                format!(
                    "'{}': dpkg's database {}/ is dpkg's and this engine's to write, no package's",
                    escape(&entry.path),
                    escape(admin)
                ),
            ));
        }
        if let Some((slot, owner)) = self.slots.get(canon) {
            let ok_again = matches!(slot, Slot::Dir) && entry.kind == Kind::Dir;
            if !ok_again {
                let whose = if *owner == pkg {
                    "this package".to_string()
                } else {
                    format!("package #{} of this transaction", owner + 1)
                };
                return Err(Error::bad(
                    package,
                    format!("entry '{}': the path is already in {whose}", escape(&entry.path)),
                ));
            }
        }
        Ok(())
    }

    /// What is at `path` now, as the transaction resolves it ([`Root::stamp`]).
    pub fn stamp(&mut self, path: &Path) -> Option<(PathBuf, Stamp)> {
        let slots = &self.slots;
        self.root.stamp(path, &|p| pending(slots, p))
    }

    /// What is at the final name `path` on disk now, as the transaction has not changed it:
    /// a regular file opened for reading, a symlink's target, something else, or nothing. Only
    /// read: a shared file of Multi-Arch: same instances is compared with it ([`crate::dpkg`]).
    pub fn on_disk(&mut self, path: &Path) -> Result<OnDisk> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(OnDisk::Nothing);
        };
        let slots = &self.slots;
        let Ok((_, dir)) = self.root.resolve_dir(parent, Create::Never, &|p| pending(slots, p))
        else {
            return Ok(OnDisk::Nothing);
        };
        let shown = self.root.display(path);
        let st = match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(OnDisk::Nothing),
            Err(e) => return Err(Error::root(&shown, "stat", e)),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => rustix::fs::readlinkat(dir.fd(), name, Vec::new())
                .map(|t| OnDisk::Symlink(PathBuf::from(OsString::from_vec(t.into_bytes()))))
                .map_err(|e| Error::root(&shown, "readlink", e)),
            FileType::RegularFile => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                let fd = rustix::fs::openat(dir.fd(), name, flags, Mode::empty())
                    .map_err(|e| Error::root(&shown, "opening", e))?;
                Ok(OnDisk::File(File::from(fd)))
            }
            _ => Ok(OnDisk::Other),
        }
    }

    /// Whether `path` leads to a directory, symlinks followed inside the root (dpkg's `stat`
    /// of a path a removal meets), as the transaction would leave it.
    pub fn leads_to_dir(&mut self, path: &Path) -> bool {
        let slots = &self.slots;
        self.root.resolve_dir(path, Create::Never, &|p| pending(slots, p)).is_ok()
    }

    /// The names in the directory `path` leads to on disk now (symlinks followed inside the
    /// root), `.` and `..` left out; `None` where it leads to no directory.
    pub fn dir_names(&mut self, path: &Path) -> Result<Option<Vec<OsString>>> {
        let slots = &self.slots;
        let Ok((canon, dir)) = self.root.resolve_dir(path, Create::Never, &|p| pending(slots, p))
        else {
            return Ok(None);
        };
        let shown = self.root.display(&canon);
        let fd = rustix::fs::openat(
            dir.fd(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::root(&shown, "opening directory", e))?;
        let mut names = Vec::new();
        for e in rustix::fs::Dir::read_from(&fd)
            .map_err(|e| Error::root(&shown, "reading directory", e))?
        {
            let e = e.map_err(|e| Error::root(&shown, "reading directory", e))?;
            let name = e.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name.to_vec()));
            }
        }
        Ok(Some(names))
    }

    /// Takes `entry` (not a directory) of package number `pkg` as it is on disk, written by an
    /// earlier transaction whose commit made it durable: the path is claimed as [`Transaction::add`]
    /// claims it (a second package writing it is refused), and nothing is written, flushed or
    /// renamed. `stamp` is what the earlier transaction left there; anything else at the path
    /// now (a script or another process changed it since the caller looked) fails the call.
    pub fn adopt(
        &mut self,
        pkg: usize,
        package: &Path,
        entry: &Entry,
        stamp: &Stamp,
    ) -> Result<()> {
        self.pkg = pkg;
        let now = self.stamp(&entry.path);
        let Some((canon, _)) = now.filter(|(_, found)| found == stamp) else {
            return Err(Error::Conflict {
                path: self.root.display(&entry.path),
                reason: "the bootstrap's first stage wrote it and it changed while the second stage took it over; run the bootstrap again".into(),
            });
        };
        self.check_claim(pkg, package, entry, &canon)?;
        self.slots.insert(canon, (Slot::Adopted, pkg));
        Ok(())
    }

    /// Resolves a directory of the package inside the root, creating what is missing.
    fn resolve(
        &mut self,
        path: &Path,
        create: bool,
        package: &Path,
    ) -> Result<(PathBuf, Directory)> {
        let slots = &self.slots;
        let overlay = |p: &Path| pending(slots, p);
        let before = self.created.len();
        let created = if create { Create::Staged(&mut self.created) } else { Create::Never };
        let resolved = self.root.resolve_dir(path, created, &overlay);
        self.record_created(before, false);
        resolved.map_err(|e| self.resolve_error(e, package, path))
    }

    /// Takes the directories made since `before` into the transaction; `clears_name`: the top
    /// one replaces a symlink, removed at commit.
    fn record_created(&mut self, before: usize, clears_name: bool) {
        for d in &self.created[before..] {
            // A directory made for entries under it is the package's from now on: a later
            // entry that is not a directory at this path contradicts the package (exit 3).
            self.slots.entry(d.canon.clone()).or_insert((Slot::Dir, self.pkg));
            // The top of a new tree is renamed at commit; every new directory's entry is
            // flushed by the per-file strategies before the journal.
            let name = d.canon.file_name().unwrap_or_default().to_os_string();
            self.renames.push(TempFile {
                dir: d.parent.clone(),
                name,
                regular: false,
                in_place: !d.top,
                clears_name: clears_name && d.top,
            });
        }
    }

    fn resolve_error(&self, e: ResolveError, package: &Path, path: &Path) -> Error {
        match e {
            ResolveError::Loop(p) => {
                Error::bad(package, format!("'{}': too many levels of symbolic links", escape(&p)))
            }
            ResolveError::NotDir { path, pending: true } => Error::bad(
                package,
                format!("'{}' is not a directory in this package", escape(&path)),
            ),
            ResolveError::NotDir { path, pending: false } => Error::Conflict {
                path: self.root.display(&path),
                reason: "the package needs a directory here, the root has something else".into(),
            },
            ResolveError::Io { path: p, action, source } => Error::root(p, action, source),
            ResolveError::StateDir(canon) => in_state_dir(package, path, &canon),
        }
    }

    /// Whether the directory entry at `canon` (a name in `parent`) replaces a symlink the root
    /// has there, as dpkg replaces it (src/main/archives.c, tarobject: a directory entry keeps
    /// what `stat` finds to be a directory, anything else is moved aside): a symlink on disk
    /// that leads to no directory inside the root (dangling, such as `var/lock -> /run/lock`
    /// with `/run` an empty mount point, a loop, or a link to a file). One that leads to a
    /// directory stays, and the package's entries go where it leads (merged /usr's `bin`).
    fn replaces_symlink(&mut self, parent: &Directory, canon: &Path) -> bool {
        let Some(name) = canon.file_name() else { return false };
        let slots = &self.slots;
        let overlay = |p: &Path| pending(slots, p);
        if parent.staged || !matches!(overlay(canon), Pending::Nothing) {
            return false;
        }
        let is_symlink = rustix::fs::statat(parent.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
        is_symlink && self.root.resolve_dir(canon, Create::Never, &overlay).is_err()
    }

    /// A directory entry. Only a directory this transaction made takes the archive's owner,
    /// mode and mtime (set before the barrier, see [`crate::txn::commit`]): one the root already has
    /// keeps all of its own, as with dpkg, so that a package shipping `./tmp/` 0755 or `./etc/`
    /// 0777 owned by a user changes neither. Its mtime is what the renames into it leave.
    fn add_dir(
        &mut self,
        pkg: usize,
        package: &Path,
        entry: &Entry,
        (parent, canon): (&Directory, &Path),
    ) -> Result<()> {
        if self.replaces_symlink(parent, canon) {
            let before = self.created.len();
            let staged = self.root.stage_dir_over(parent, canon, &mut self.created);
            self.record_created(before, true);
            staged.map_err(|e| self.resolve_error(e, package, &entry.path))?;
        }
        let (resolved, dir) = self.resolve(&entry.path, true, package)?;
        // Through a symlink already in the root (merged /usr's `bin -> usr/bin`), the directory
        // belongs to the symlink's target: not made here, so it keeps its metadata too.
        if resolved == canon && dir.staged {
            self.dir_meta.insert(
                resolved.clone(),
                DirMeta {
                    dir,
                    canon: resolved,
                    mode: entry.mode,
                    uid: entry.uid,
                    gid: entry.gid,
                    mtime: entry.mtime,
                },
            );
        }
        self.slots.insert(canon.to_path_buf(), (Slot::Dir, pkg));
        Ok(())
    }

    /// What the root has at the final name: nothing or a non-directory is fine (the rename
    /// replaces it), an empty directory is removed at commit, anything else is a conflict.
    fn check_final_name(&self, dir: &Directory, name: &OsStr, display: &Path) -> Result<bool> {
        match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(Error::root(display, "stat", e)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::Directory => Ok(false),
            Ok(_) => {
                let fd = rustix::fs::openat(
                    dir.fd(),
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| Error::root(display, "opening directory", e))?;
                let entries = rustix::fs::Dir::read_from(&fd)
                    .map_err(|e| Error::root(display, "reading directory", e))?;
                for e in entries {
                    let e = e.map_err(|e| Error::root(display, "reading directory", e))?;
                    if e.file_name().to_bytes() != b"." && e.file_name().to_bytes() != b".." {
                        return Err(Error::Conflict {
                            path: display.to_path_buf(),
                            reason:
                                "the package has a file here, the root has a non-empty directory"
                                    .into(),
                        });
                    }
                }
                Ok(true)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_file(
        &mut self,
        package: &Path,
        entry: &Entry,
        size: u64,
        dir: &Directory,
        temp: &OsStr,
        display: &Path,
        data: &mut dyn BufRead,
    ) -> Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = create_temp(dir, temp, || {
            rustix::fs::openat(dir.fd(), temp, flags, Mode::from_raw_mode(entry.mode & 0o777))
        })
        .map_err(|e| Error::root(display, "creating temporary file", e))?;
        // Recorded before the first byte so that any failure below removes it.
        self.temps.push((dir.clone(), temp.to_os_string()));
        if !self.early_started && self.strategy.writes_back_early() {
            self.early_started = true;
            self.early = EarlyWriteback::start(self.root.dir().fd());
        }
        let mut file = File::from(fd);
        let mut written = 0u64;
        loop {
            let chunk = match data.fill_buf() {
                Ok([]) => break,
                Ok(chunk) => chunk,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::bad(
                        package,
                        format!("entry '{}': {e}", escape(&entry.path)),
                    ))
                }
            };
            file.write_all(chunk).map_err(|e| Error::root(display, "writing", e))?;
            let n = chunk.len();
            data.consume(n);
            written += n as u64;
            self.check_stop()?;
        }
        if written != size {
            return Err(Error::bad(
                package,
                format!(
                    "entry '{}': archive ends after {written} of {size} bytes",
                    escape(&entry.path)
                ),
            ));
        }
        self.set_metadata_fd(entry, &file, display)?;
        self.strategy.after_file(&file, display, self.calls)
    }

    /// Owner first (chown clears setuid), then the mode where creation could not give it,
    /// then times; all through the descriptor.
    fn set_metadata_fd(&self, entry: &Entry, file: &File, display: &Path) -> Result<()> {
        if let Some((uid, gid)) = self.owner_change(entry) {
            rustix::fs::fchown(file, Some(uid), Some(gid))
                .map_err(|e| Error::root(display, "chown", e))?;
        }
        let mode = self.mode_for(entry.mode, entry.uid, entry.gid);
        let created_mode = entry.mode & 0o777 & !self.identity.umask;
        if mode != created_mode || self.owner_change(entry).is_some() {
            rustix::fs::fchmod(file, Mode::from_raw_mode(mode))
                .map_err(|e| Error::root(display, "chmod", e))?;
        }
        rustix::fs::futimens(file, &timestamps(entry.mtime))
            .map_err(|e| Error::root(display, "setting mtime", e))
    }

    /// The same for what cannot be opened for reading or writing (symlinks, devices, FIFOs),
    /// `made` (its type and device number) a moment ago as `temp` in `dir`. Never by that name:
    /// a user who can write the directory can put a symlink or a hard link to a root-only file
    /// there in between, and fchmodat follows symlinks (tar-rs's RUSTSEC-2021-0080; chown and
    /// utimensat without following still reach a hard link's file). So the name is opened once,
    /// O_PATH|O_NOFOLLOW (which opens neither a device nor a symlink's target), the descriptor is
    /// checked to be what was made (type, device number, this process's, one link: no other name
    /// reaches it), and owner, mode and times are set through it. Making the node in a
    /// directory no other user can write would instead need a private directory on the same
    /// filesystem beside every directory a package writes into.
    fn set_metadata_at(
        &self,
        entry: &Entry,
        dir: &Directory,
        temp: &OsStr,
        display: &Path,
        made: (FileType, u64),
    ) -> Result<()> {
        let fd = rustix::fs::openat(
            dir.fd(),
            temp,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::root(display, "opening what was just made", e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::root(display, "stat", e))?;
        let found = (FileType::from_raw_mode(st.st_mode), st.st_rdev);
        if found != made || st.st_uid != self.identity.euid || st.st_nlink != 1 {
            return Err(Error::Conflict {
                path: display.to_path_buf(),
                reason: "replaced by someone else while it was being made (another user can write this directory)".into(),
            });
        }
        if let Some((uid, gid)) = self.owner_change(entry) {
            rustix::fs::chownat(&fd, c"", Some(uid), Some(gid), AtFlags::EMPTY_PATH)
                .map_err(|e| Error::root(display, "chown", e))?;
        }
        if made.0 != FileType::Symlink {
            let mode = self.mode_for(entry.mode, entry.uid, entry.gid);
            on_inode(fd.as_fd(), |dirfd, path, flags| chmodat(dirfd, path, mode, flags))
                .map_err(|e| Error::root(display, "chmod", e))?;
        }
        let times = timestamps(entry.mtime);
        on_inode(fd.as_fd(), |dirfd, path, flags| rustix::fs::utimensat(dirfd, path, &times, flags))
            .map_err(|e| Error::root(display, "setting mtime", e))
    }

    /// The owner to set, if the archive's differs from what a new file gets anyway. A process
    /// that is not root cannot give files away and keeps them, as tar does for users.
    fn owner_change(&self, entry: &Entry) -> Option<(rustix::fs::Uid, rustix::fs::Gid)> {
        self.owner_differs(entry.uid, entry.gid)
            .then(|| (rustix::fs::Uid::from_raw(entry.uid), rustix::fs::Gid::from_raw(entry.gid)))
    }

    /// The archive's `mode`, less a set-user-ID or set-group-ID bit whose owner the file will
    /// not have: a process that is not root keeps the files it writes (`owner_change`), and a
    /// set-id bit on them would lend its own identity to whoever runs them. GNU tar drops the
    /// bits for users too; as root every owner is given and every bit kept.
    pub(crate) fn mode_for(&self, mode: u32, uid: u32, gid: u32) -> u32 {
        let id = self.identity;
        let mut mode = mode;
        if id.euid != 0 && uid != id.euid {
            mode &= !0o4000;
        }
        if id.euid != 0 && gid != id.egid {
            mode &= !0o2000;
        }
        mode
    }

    /// True when `uid:gid` must be set explicitly: it differs from the process's and the
    /// process may give files away.
    pub(crate) fn owner_differs(&self, uid: u32, gid: u32) -> bool {
        let id = self.identity;
        (uid != id.euid || gid != id.egid) && id.euid == 0
    }

    fn link(
        &mut self,
        package: &Path,
        entry: &Entry,
        target: &Path,
        dir: &Directory,
        temp: &OsStr,
        display: &Path,
    ) -> Result<()> {
        let refuse = |why: &str| {
            Error::bad(
                package,
                format!("hard link '{}' -> '{}': {why}", escape(&entry.path), escape(target)),
            )
        };
        let (Some(tparent), Some(tname)) = (target.parent(), target.file_name()) else {
            return Err(refuse("the target is the root"));
        };
        let (tcanon_dir, _) = self
            .resolve(tparent, false, package)
            .map_err(|_| refuse("the target is not an earlier entry of this transaction"))?;
        let rename = match self.slots.get(&tcanon_dir.join(tname)) {
            Some((Slot::File { rename }, _))
            | Some((Slot::Symlink { rename, .. }, _))
            | Some((Slot::Special { rename }, _)) => *rename,
            Some((Slot::Dir, _)) => return Err(refuse("the target is a directory")),
            Some((Slot::Adopted, _)) => {
                return Err(refuse("the target was adopted from the first stage, not written"))
            }
            None => return Err(refuse("the target is not an earlier entry of this transaction")),
        };
        let source = &self.renames[rename];
        create_temp(dir, temp, || {
            rustix::fs::linkat(
                source.dir.fd(),
                source.disk_name(),
                dir.fd(),
                temp,
                AtFlags::empty(),
            )
        })
        .map_err(|e| Error::root(display, "creating hard link", e))?;
        self.temps.push((dir.clone(), temp.to_os_string()));
        Ok(())
    }

    fn make_node(
        &mut self,
        package: &Path,
        entry: &Entry,
        (file_type, dev): (FileType, u64),
        dir: &Directory,
        temp: &OsStr,
        display: &Path,
    ) -> Result<()> {
        // A permission the caller lacks, not a bad package: exit 4, as for any other.
        if file_type != FileType::Fifo && self.identity.euid != 0 {
            let why = format!("device nodes need root (an entry of {})", escape(package));
            let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
            return Err(Error::root(display, "creating a device node", denied));
        }
        create_temp(dir, temp, || {
            rustix::fs::mknodat(
                dir.fd(),
                temp,
                file_type,
                Mode::from_raw_mode(entry.mode & 0o777),
                dev,
            )
        })
        .map_err(|e| Error::root(display, "creating special file", e))?;
        self.temps.push((dir.clone(), temp.to_os_string()));
        self.set_metadata_at(entry, dir, temp, display, (file_type, dev))
    }

    /// Undoes the write phase: removes every temporary name and every new tree it created.
    /// Best effort; it must not fail, it runs on the way out of an error already reported.
    pub(crate) fn rollback(&mut self) {
        // Nothing is left to write back; the helper must not outlive the transaction.
        drop(self.early.take());
        let mut parents: HashMap<PathBuf, Directory> = HashMap::new();
        // Through the descriptors the transaction holds, so that a rollback needs none of its
        // own: the error it cleans up after may be that there are none left (EMFILE). A
        // directory the archive made 0500 is given its owner's write permission back first, or
        // a process that is not root could not empty it; it is the transaction's own.
        if !rustix::process::geteuid().is_root() {
            for d in &self.created {
                if let Some(dir) = self.root.cached(&d.canon) {
                    let _ = rustix::fs::fchmod(dir.fd(), Mode::from_raw_mode(0o700));
                }
            }
        }
        for (dir, temp) in self.temps.drain(..).rev() {
            let _ = rustix::fs::unlinkat(dir.fd(), &temp, AtFlags::empty());
            if !dir.staged {
                parents.entry(dir.path.to_path_buf()).or_insert(dir);
            }
        }
        // Made parents first, so removed children first.
        for d in self.created.drain(..).rev() {
            let removed = rustix::fs::unlinkat(d.parent.fd(), &d.name, AtFlags::REMOVEDIR);
            if removed.is_err() && d.top {
                // What the list does not know of (a leftover nobody recorded): the same
                // removal as recovery's.
                let _ = crate::fs::tree::remove_tree(d.parent.fd(), &d.name, &mut (0, 0));
            }
            if d.top {
                parents.entry(d.parent.path.to_path_buf()).or_insert(d.parent);
            }
        }
        for name in [JOURNAL, JOURNAL_NEW] {
            let _ = rustix::fs::unlinkat(self.state.fd(), name, AtFlags::empty());
        }
        self.finish();
        // Adding and removing names changed the mtimes of the directories that were there
        // before, the state directory's too (the intent file came and went); put them back, so
        // that a failed transaction leaves the tree as it found it (the fuzz harness checks).
        parents.entry(self.state.path.to_path_buf()).or_insert_with(|| self.state.clone());
        for dir in parents.values() {
            let _ = rustix::fs::futimens(dir.fd(), &dir.times_before);
        }
    }

    /// Removes the intent file: the transaction is over, committed or rolled back.
    pub(crate) fn finish(&mut self) {
        let _ = rustix::fs::unlinkat(self.state.fd(), INTENT, AtFlags::empty());
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.committing {
            self.rollback();
        }
    }
}

/// The refusal of a package path that leads (as `canon`, once resolved) to the engine's state
/// directory or below it: the lock, the intent and the journal are the engine's, and a package
/// that wrote them could break every later unpack, or have a later recovery rename what it
/// likes.
fn in_state_dir(package: &Path, path: &Path, canon: &Path) -> Error {
    let what = if path == canon {
        format!("'{}'", path.display())
    } else {
        format!("'{}' leads to '{}'", path.display(), canon.display())
    };
    Error::bad(package, format!("{what}: the engine's state directory {STATE_DIR}/ and what it holds are no package's to write"))
}

/// What the transaction holds at `path`, for the resolver.
fn pending(slots: &HashMap<PathBuf, (Slot, usize)>, path: &Path) -> Pending {
    match slots.get(path) {
        None => Pending::Nothing,
        Some((Slot::Dir, _)) => Pending::Dir,
        // On disk as it will stay: the resolver finds it there.
        Some((Slot::Adopted, _)) => Pending::Nothing,
        Some((Slot::Symlink { target, .. }, _)) => Pending::Symlink(target.clone()),
        Some(_) => Pending::NotDir,
    }
}

/// Creates a temporary name with `create`. The suffix is the engine's own, so a name already
/// there is a leftover of an interrupted run: it is removed and the creation tried once more.
/// Trying first and cleaning up only on EEXIST saves a system call per file.
fn create_temp<T>(
    dir: &Directory,
    temp: &OsStr,
    create: impl Fn() -> rustix::io::Result<T>,
) -> rustix::io::Result<T> {
    match create() {
        Err(Errno::EXIST) => {
            rustix::fs::unlinkat(dir.fd(), temp, AtFlags::empty())?;
            create()
        }
        other => other,
    }
}

/// Calls `call` on the inode that `fd` (an O_PATH descriptor) holds, never on a name: as
/// `call(fd, "", AT_EMPTY_PATH)`, or where the kernel does not take that form (fchmodat2 came in
/// Linux 6.6, utimensat's AT_EMPTY_PATH in 5.8; a container's seccomp filter may refuse an
/// unknown call with EPERM) as `call(AT_FDCWD, "/proc/self/fd/N", 0)`, a magic link that leads
/// to the descriptor's inode whatever name it has now, and that needs /proc.
fn on_inode(
    fd: BorrowedFd<'_>,
    call: impl Fn(BorrowedFd<'_>, &CStr, AtFlags) -> rustix::io::Result<()>,
) -> rustix::io::Result<()> {
    match call(fd, c"", AtFlags::EMPTY_PATH) {
        Err(Errno::NOSYS | Errno::INVAL | Errno::PERM) => {
            let magic = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .map_err(|_| Errno::INVAL)?;
            call(rustix::fs::CWD, &magic, AtFlags::empty())
        }
        done => done,
    }
}

/// `fchmodat(dirfd, path, mode, flags)`, by fchmodat2 when there are flags: the older call has
/// no flags argument, and rustix wraps only that one.
fn chmodat(
    dirfd: BorrowedFd<'_>,
    path: &CStr,
    mode: u32,
    flags: AtFlags,
) -> rustix::io::Result<()> {
    if flags.is_empty() {
        return rustix::fs::chmodat(dirfd, path, Mode::from_raw_mode(mode), flags);
    }
    // SAFETY: a system call on a borrowed descriptor and a NUL-terminated string.
    let rc = unsafe {
        libc::syscall(libc::SYS_fchmodat2, dirfd.as_raw_fd(), path.as_ptr(), mode, flags.bits())
    };
    match rc {
        0 => Ok(()),
        _ => Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        )),
    }
}

pub(crate) fn timestamps((secs, nanos): (i64, u32)) -> Timestamps {
    let t = Timespec { tv_sec: secs, tv_nsec: nanos as _ };
    Timestamps { last_access: t, last_modification: t }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The way older kernels take (no fchmodat2, no AT_EMPTY_PATH for utimensat): through
    /// /proc/self/fd, the FIFO's mode and the symlink's own times change, not its target's.
    #[test]
    fn on_inode_without_the_empty_path_form_goes_through_proc_to_the_descriptor_s_inode() {
        let dir = tempfile::tempdir().unwrap();
        let (fifo, link, target) =
            (dir.path().join("fifo"), dir.path().join("link"), dir.path().join("target"));
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .unwrap();
        std::fs::write(&target, b"x").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        fn old_kernel(
            call: impl Fn(BorrowedFd<'_>, &CStr, AtFlags) -> rustix::io::Result<()>,
        ) -> impl Fn(BorrowedFd<'_>, &CStr, AtFlags) -> rustix::io::Result<()> {
            move |fd, path, flags| {
                if flags.is_empty() {
                    call(fd, path, flags)
                } else {
                    Err(Errno::NOSYS)
                }
            }
        }
        let path_fd = |p: &Path| {
            rustix::fs::open(p, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
                .unwrap()
        };
        let fd = path_fd(&fifo);
        on_inode(fd.as_fd(), old_kernel(|d, p, f| chmodat(d, p, 0o4751, f))).unwrap();
        assert_eq!(rustix::fs::lstat(&fifo).unwrap().st_mode & 0o7777, 0o4751);
        let fd = path_fd(&link);
        let times = timestamps((1_234_567_890, 5));
        on_inode(fd.as_fd(), old_kernel(|d, p, f| rustix::fs::utimensat(d, p, &times, f))).unwrap();
        assert_eq!(rustix::fs::lstat(&link).unwrap().st_mtime, 1_234_567_890);
        assert_ne!(rustix::fs::lstat(&target).unwrap().st_mtime, 1_234_567_890);
        // And the form this kernel has, for comparison.
        on_inode(fd.as_fd(), |d, p, f| {
            rustix::fs::utimensat(d, p, &timestamps((1_111_111_111, 0)), f)
        })
        .unwrap();
        assert_eq!(rustix::fs::lstat(&link).unwrap().st_mtime, 1_111_111_111);
    }
}
