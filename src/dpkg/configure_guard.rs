//! The configure guard: what the real dpkg's `--configure` does to conffiles, made to survive a
//! power cut.
//!
//! dpkg's configure (src/main/configure.c, `deferred_configure_conffile`) moves each new
//! conffile from `NAME.dpkg-new` into place with a rename it never syncs, then records the new
//! conffile's hash in its status with an fsync of that file alone. On a filesystem whose fsync
//! flushes only the file (btrfs), a power cut can keep the record and lose the rename: the old
//! configuration stays at `NAME`, the new one beside it, and dpkg believes the new one is in
//! place (`dpkg --audit` is silent; `dpkg --configure -a` of a package still `unpacked` even
//! deletes `NAME.dpkg-new`, taking the record's word that the administrator kept the old one).
//! The crash test of an `apt-get upgrade` found it in 22 to 54 of 200 states on btrfs.
//!
//! `unpack-dpkg` hands every `--configure` to the real dpkg unchanged, between the two halves
//! of a [`Guard`]:
//! - [`Guard::prepare`], under the root's lock and dpkg's: for each conffile that the
//!   configure may move (a package `unpacked`, its `NAME.dpkg-new` a regular file), the hash
//!   the status records for it now, before dpkg changes it, in the state file
//!   `var/lib/unpack/configure`, made durable before dpkg runs;
//! - [`Guard::finish`], after dpkg: the directories of those conffiles fsynced, so every
//!   rename dpkg made there is on disk, then the record removed.
//!
//! After a crash between the two, [`finish_lost`] (run by every engine call and
//! `unpack --recover` before anything else, and by the next guard) redoes what dpkg had decided
//! and recorded but the disk lost, and only that: a conffile whose `NAME.dpkg-new` is still
//! there though dpkg is done with it (its package, still at the recorded version, is past
//! `unpacked`, or its status already records the new hash), with the choice dpkg's own
//! decision table makes without asking anyone ([`choice`]): install the new one (the
//! administrator had not changed `NAME`: its hash is still the recorded old one; or `NAME`
//! missing for a conffile new to the package), or keep `NAME` and remove `NAME.dpkg-new` (the
//! two are the same, or only the administrator changed it). A conffile both had changed (dpkg
//! asked, or followed `--force-conf*`) cannot be told from what is on disk and is left as it
//! is, named.
//!
//! The record is read back from disk, so it is attacker input: it is a state file (checked as
//! the journal is), each line is validated, and it can only make recovery do what dpkg's own
//! database says was done. This module never writes a name but the record, that rename and
//! that removal.

use super::database::Locked;
use super::format::db_path;
use super::format::status::{self, Package, State, NEW_CONFFILE};
use super::md5;
use crate::durability::Directory;
use crate::error::{escape, Error, Result};
use crate::fs::names::CONFIGURE_RECORD;
use crate::fs::root::{
    create_state_file, open_state_file, remove_state_file, Create, Pending, Root, Stamp,
};
use crate::fs::syscalls::Syscalls;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The first line of a record, naming its format.
const MAGIC: &str = "unpack configure guard 1";

/// The most conffiles one record holds; a record that says more is not the engine's.
const MAX_ENTRIES: usize = 1 << 20;

/// The most bytes of a record read: a line is at most a package name, an architecture, a
/// version, a hash and a path of dpkg's, and a record of every conffile of a large system is a
/// few MiB; one longer is not the engine's, and is dropped without being read whole.
const MAX_BYTES: u64 = 64 << 20;

/// A conffile the configure may move: whose it is, and the hash the status recorded before.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    package: String,
    /// `-` when the stanza has none.
    arch: String,
    version: String,
    /// The hash the status recorded before the configure (an md5sum or [`NEW_CONFFILE`]).
    old_hash: String,
    /// Absolute, as the status lists it.
    path: PathBuf,
}

/// A record's text: the magic line, one line per entry (`PACKAGE ARCH VERSION HASH PATH`, the
/// path last because it alone may hold spaces), and `end COUNT`, so a torn record is seen.
fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = format!("{MAGIC}\n").into_bytes();
    for e in entries {
        let head = format!("{} {} {} {} ", e.package, e.arch, e.version, e.old_hash);
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(e.path.as_os_str().as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(format!("end {}\n", entries.len()).as_bytes());
    out
}

/// A record read back, every line validated: names without spaces or control characters, a
/// hash dpkg could record, a path as dpkg's database holds them.
fn decode(bytes: &[u8]) -> std::result::Result<Vec<Entry>, String> {
    let mut lines = bytes.split(|&b| b == b'\n');
    if lines.next() != Some(MAGIC.as_bytes()) {
        return Err(format!("its first line is not '{MAGIC}'"));
    }
    let mut entries = Vec::new();
    for line in lines {
        if let Some(count) = line.strip_prefix(b"end ") {
            let said = std::str::from_utf8(count).ok().and_then(|c| c.parse::<usize>().ok());
            return match said {
                Some(n) if n == entries.len() => Ok(entries),
                _ => Err(format!("it ends with '{}' after {} entries", shown(line), entries.len())),
            };
        }
        if entries.len() == MAX_ENTRIES {
            return Err(format!("it has more than {MAX_ENTRIES} entries"));
        }
        let bad = |why: &str| format!("{why} in line '{}'", shown(line));
        let mut fields = line.splitn(5, |&b| b == b' ');
        let mut word = || -> std::result::Result<String, String> {
            let w = fields.next().ok_or_else(|| bad("a field missing"))?;
            let plain = !w.is_empty() && w.iter().all(|b| b.is_ascii_graphic());
            plain.then(|| String::from_utf8_lossy(w).into_owned()).ok_or_else(|| bad("a bad field"))
        };
        let (package, arch, version, old_hash) = (word()?, word()?, word()?, word()?);
        if !status::valid_hash(&old_hash) {
            return Err(bad("not a conffile hash"));
        }
        let path = db_path(fields.next().ok_or_else(|| bad("no path"))?).map_err(|e| bad(&e))?;
        if !path.is_absolute() || path.file_name().is_none() {
            return Err(bad("not a conffile's path"));
        }
        entries.push(Entry { package, arch, version, old_hash, path });
    }
    Err("it has no end line: torn".into())
}

/// `bytes` for a message: escaped and cut after 100 bytes.
fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(100)];
    escape(OsStr::from_bytes(cut)).to_string()
}

/// What a package's stanza records for its conffile `path`, and the package, if `entry`'s
/// package is still at `entry`'s version.
fn recorded<'p>(packages: &'p [Package], entry: &Entry) -> Option<(&'p Package, String)> {
    let package = packages.iter().find(|p| {
        p.name == entry.package && arch_field(p) == entry.arch && p.version == entry.version
    })?;
    let field = package.stanza.get("Conffiles")?;
    let conffiles = status::parse_conffiles_field(field).ok()?;
    let conffile = conffiles.into_iter().find(|c| c.path == entry.path)?;
    Some((package, conffile.hash))
}

fn arch_field(p: &Package) -> &str {
    if p.arch.is_empty() {
        "-"
    } else {
        &p.arch
    }
}

/// A conffile's directory in the root and its name there, without following a symlink at the
/// name itself (the directories on the way are resolved inside the root, as the engine
/// resolves a package's). `None` when its directory is gone.
fn locate(root: &mut Root, path: &Path) -> Option<(Directory, OsString)> {
    let name = path.file_name()?.to_os_string();
    let parent = path.parent()?.strip_prefix("/").ok()?;
    let nothing = |_: &Path| Pending::Nothing;
    let (_, dir) = root.resolve_dir(parent, Create::Never, &nothing).ok()?;
    Some((dir, name))
}

fn dpkg_new(name: &OsStr) -> OsString {
    let mut n = name.to_os_string();
    n.push(".dpkg-new");
    n
}

/// The regular file `name` in `dir`, opened to read, `None` when there is none. A symlink, a
/// FIFO or a device there is an error: never followed, never opened (`O_NOFOLLOW`, and the
/// type checked again on the descriptor, which no rename can change).
fn open_regular(dir: &Directory, name: &OsStr) -> Result<Option<OwnedFd>> {
    let path = || dir.path().join(name);
    let not_regular = || Error::root(path(), "a conffile that is not a regular file", Errno::INVAL);
    let st = match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(Error::root(path(), "stat", e)),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(not_regular());
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), name, flags, Mode::empty())
        .map_err(|e| Error::root(path(), "opening", e))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::root(path(), "stat", e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(not_regular());
    }
    Ok(Some(fd))
}

/// The md5sum of the regular file `name` in `dir`, as dpkg hashes a conffile; `None` when there
/// is none ([`open_regular`]'s checks).
fn hash_of(dir: &Directory, name: &OsStr) -> Result<Option<String>> {
    let Some(fd) = open_regular(dir, name)? else { return Ok(None) };
    md5::of_reader(std::fs::File::from(fd))
        .map(Some)
        .map_err(|e| Error::root(dir.path().join(name), "reading", e))
}

/// What dpkg's configure does with a conffile, by its decision table (configure.c
/// `conffoptcells`), where it asks no one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// `NAME.dpkg-new` renamed over `NAME` (CFO_INSTALL, CFO_NEW_CONFF).
    Install,
    /// `NAME` kept, `NAME.dpkg-new` removed (CFO_KEEP, CFO_IDENTICAL).
    Keep,
    /// dpkg asks, or follows `--force-conf*`: not known from the disk.
    Asked,
}

/// dpkg's choice for a conffile, given the hash the status recorded before the configure
/// (`old`, or [`NEW_CONFFILE`]), the hash of what is at `NAME` (`current`, `None`: nothing)
/// and of `NAME.dpkg-new` (`new`).
pub(crate) fn choice(old: &str, current: Option<&str>, new: &str) -> Choice {
    let Some(current) = current else {
        // Missing: new to the package, installed; else the administrator deleted it.
        return if old == NEW_CONFFILE { Choice::Install } else { Choice::Asked };
    };
    if current == new {
        return Choice::Keep;
    }
    if old == NEW_CONFFILE {
        return Choice::Asked;
    }
    // `current` differs from `new` here: unchanged by the administrator means the upgrade's,
    // unchanged by the upgrade means the administrator's, both changed means dpkg asks.
    if current == old {
        Choice::Install
    } else if old == new {
        Choice::Keep
    } else {
        Choice::Asked
    }
}

/// Reads the record left in `state`, if any. A damaged one is dropped: it was being written
/// when the crash came, before the configure it guards ran.
fn read_record(state: &Directory) -> Result<Option<(Vec<Entry>, Option<String>)>> {
    let Some(mut file) = open_state_file(state, CONFIGURE_RECORD)? else {
        return Ok(None);
    };
    let path = state.path().join(CONFIGURE_RECORD);
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::root(&path, "reading", e))?;
    let decoded = if bytes.len() as u64 > MAX_BYTES {
        Err(format!("longer than {MAX_BYTES} bytes"))
    } else {
        decode(&bytes)
    };
    Ok(Some(match decoded {
        Ok(entries) => (entries, None),
        Err(why) => (Vec::new(), Some(format!("{}: dropped: {why}", escape(&path)))),
    }))
}

/// What recovery of a configure guard's record did: the conffiles whose move (or removal of `NAME.dpkg-new`) it
/// redid, and what it left and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Finished {
    pub moved: Vec<PathBuf>,
    pub left: Vec<String>,
}

impl Finished {
    /// One sentence for people; `None` when there was nothing to do.
    pub fn describe(&self) -> Option<String> {
        if self.moved.is_empty() && self.left.is_empty() {
            return None;
        }
        let mut text = format!(
            "finished {} conffile moves that dpkg's configure had recorded and a crash lost",
            self.moved.len()
        );
        for path in &self.moved {
            text += &format!(" ({})", escape(path));
        }
        for why in &self.left {
            text += &format!("; left {why}");
        }
        Some(text)
    }
}

/// Redoes, from the record a guard left, the conffile renames dpkg's configure had decided and
/// recorded but a crash lost (see the module's documentation), syncs them, and removes the
/// record. Under the root's lock and dpkg's (`locked`); nothing to do without a record.
pub(crate) fn finish_lost(root: &mut Root, locked: &Locked) -> Result<Finished> {
    let Some(state) = root.existing_state_dir()? else {
        return Ok(Finished::default());
    };
    let Some((entries, damaged)) = read_record(&state)? else {
        return Ok(Finished::default());
    };
    let mut finished = Finished { left: damaged.into_iter().collect(), ..Finished::default() };
    if !entries.is_empty() {
        let packages = locked.admin().packages()?;
        for entry in &entries {
            match finish_one(root, &packages, entry) {
                Ok(Some(path)) => finished.moved.push(path),
                Ok(None) => {}
                Err(why) => finished.left.push(why),
            }
        }
    }
    remove_state_file(&state, CONFIGURE_RECORD)?;
    Ok(finished)
}

/// One entry of a record: the conffile moved into place and synced when dpkg had decided and
/// recorded that, `None` when there is nothing to redo, and what was left and why otherwise.
fn finish_one(
    root: &mut Root,
    packages: &[Package],
    entry: &Entry,
) -> std::result::Result<Option<PathBuf>, String> {
    let Some((dir, name)) = locate(root, &entry.path) else { return Ok(None) };
    let left = |e: Error| format!("{}.dpkg-new: {e}", escape(&entry.path));
    let Some(new) = hash_of(&dir, &dpkg_new(&name)).map_err(left)? else { return Ok(None) };
    let Some((package, now)) = recorded(packages, entry) else { return Ok(None) };
    // dpkg records the new hash once it is done with the conffile, and moves the package past
    // `unpacked` once it is done with them all; before that the configure is still to come
    // (`dpkg --configure -a` does it). A conffile the package did not change keeps its hash.
    let past_unpacked = !matches!(
        package.status.state,
        State::NotInstalled | State::ConfigFiles | State::HalfInstalled | State::Unpacked
    );
    if now != new || !(past_unpacked || now != entry.old_hash) {
        return Ok(None);
    }
    let current = hash_of(&dir, &name).map_err(left)?;
    match choice(&entry.old_hash, current.as_deref(), &new) {
        Choice::Install => move_into_place(&dir, &name).map_err(left)?,
        Choice::Keep => rustix::fs::unlinkat(dir.fd(), dpkg_new(&name), AtFlags::empty())
            .map_err(|e| left(Error::root(dir.path().join(dpkg_new(&name)), "removing", e)))?,
        Choice::Asked => {
            return Err(format!(
                "{}.dpkg-new: dpkg's choice for a conffile the administrator changed is not known",
                escape(&entry.path)
            ))
        }
    }
    dir.fsync(&Syscalls::default()).map_err(left)?;
    Ok(Some(entry.path.clone()))
}

/// `NAME.dpkg-new` renamed over `NAME`, with `NAME`'s owner and mode first, as dpkg gives it.
/// The owner and mode go through a descriptor ([`open_regular`]): a symlink swapped in after
/// the hash was taken is refused, never followed out of the root.
fn move_into_place(dir: &Directory, name: &OsStr) -> Result<()> {
    let new = dpkg_new(name);
    let path = dir.path().join(&new);
    let Some(fd) = open_regular(dir, &new)? else {
        return Err(Error::root(&path, "renaming into place", Errno::NOENT));
    };
    if let Ok(st) = rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        let uid = rustix::fs::Uid::from_raw(st.st_uid);
        let gid = rustix::fs::Gid::from_raw(st.st_gid);
        rustix::fs::fchown(&fd, Some(uid), Some(gid))
            .map_err(|e| Error::root(&path, "chown", e))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(st.st_mode & 0o7777))
            .map_err(|e| Error::root(&path, "chmod", e))?;
    }
    rustix::fs::renameat(dir.fd(), &new, dir.fd(), name)
        .map_err(|e| Error::root(&path, "renaming into place", e))
}

/// A configure of the real dpkg, guarded: [`Guard::prepare`] before it, [`Guard::finish`] after.
pub struct Guard {
    /// The directories of the conffiles the configure may move, to fsync after it.
    dirs: Vec<Directory>,
    /// The state directory and the record's stamp, to remove it and no other.
    record: Option<(Directory, Stamp)>,
    root: Root,
}

impl Guard {
    /// Before a configure of the real dpkg in `root` (its database at `admindir`): finishes
    /// what a crash left of an earlier one ([`finish_lost`]), then records the conffiles this
    /// one may move, durably. Under the root's lock and dpkg's, both let go on return, for
    /// dpkg to take. A root without dpkg's database needs no guard: `Ok(None)`.
    pub fn prepare(root: &Path, admindir: &Path) -> Result<(Option<Guard>, Finished)> {
        let mut root = Root::open(root)?;
        let lock = root.lock(false)?;
        let Some(locked) = Locked::find(&mut root, Some(admindir), false)? else {
            return Ok((None, Finished::default()));
        };
        let finished = finish_lost(&mut root, &locked)?;
        let packages = locked.admin().packages()?;
        let mut entries = Vec::new();
        let mut dirs: Vec<Directory> = Vec::new();
        let unpacked: Vec<&Package> =
            packages.iter().filter(|p| p.status.state == State::Unpacked).collect();
        // Diversions are read only where a conffile may move: most configure calls have none.
        let diversions =
            if unpacked.is_empty() { HashMap::new() } else { locked.admin().diversions()? };
        for package in unpacked {
            for (dir, entry) in pending(&mut root, package, &diversions)? {
                if !dirs.iter().any(|d| d.path() == dir.path()) {
                    dirs.push(dir);
                }
                entries.push(entry);
            }
        }
        if entries.is_empty() {
            drop((locked, lock));
            return Ok((Some(Guard { dirs, record: None, root }), finished));
        }
        let state = root.state_dir()?;
        let path = state.path().join(CONFIGURE_RECORD);
        let mut file = create_state_file(&state, CONFIGURE_RECORD)?;
        file.set_len(0).map_err(|e| Error::root(&path, "truncating", e))?;
        file.write_all(&encode(&entries)).map_err(|e| Error::root(&path, "writing", e))?;
        file.sync_all().map_err(|e| Error::root(&path, "fsync", e))?;
        state.fsync(&Syscalls::default())?;
        let stamp =
            Stamp::of(&rustix::fs::fstat(&file).map_err(|e| Error::root(&path, "stat", e))?);
        drop((locked, lock));
        Ok((Some(Guard { dirs, record: Some((state, stamp)), root }), finished))
    }

    /// After the configure: every directory holding a conffile it may have moved fsynced
    /// (what dpkg renamed, linked or removed there is then on disk: ext4's and XFS's journals
    /// commit the directory's changes, btrfs logs its entries), then the record removed (under
    /// the root's lock; only the record this guard wrote). Not a syncfs: that would flush all
    /// the maintainer scripts wrote too, which nothing here needs.
    pub fn finish(self) -> Result<()> {
        let Some((state, stamp)) = self.record else { return Ok(()) };
        let calls = Syscalls::default();
        for dir in &self.dirs {
            dir.fsync(&calls)?;
        }
        // Waiting: dpkg's work is done and synced, only the record is left to remove.
        let _lock = self.root.lock(true)?;
        match rustix::fs::statat(state.fd(), CONFIGURE_RECORD, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if Stamp::of(&st) == stamp => remove_state_file(&state, CONFIGURE_RECORD),
            _ => Ok(()),
        }
    }
}

/// The conffiles of `package` (`unpacked`) that its configure may move: each one's
/// `NAME.dpkg-new` a regular file and `NAME` a regular file or nothing (dpkg follows a symlink
/// there, which this guard does not), not diverted, not obsolete or removed on upgrade.
fn pending(
    root: &mut Root,
    package: &Package,
    diversions: &HashMap<PathBuf, super::format::diversions::Diversion>,
) -> Result<Vec<(Directory, Entry)>> {
    let Some(field) = package.stanza.get("Conffiles") else { return Ok(Vec::new()) };
    let Ok(conffiles) = status::parse_conffiles_field(field) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for c in conffiles {
        if c.obsolete || c.remove_on_upgrade || diversions.contains_key(&c.path) {
            continue;
        }
        let Some((dir, name)) = locate(root, &c.path) else { continue };
        let kind = |n: &OsStr| {
            rustix::fs::statat(dir.fd(), n, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
        };
        let new_is_file = matches!(kind(&dpkg_new(&name)), Ok(FileType::RegularFile));
        let name_plain = matches!(kind(&name), Ok(FileType::RegularFile) | Err(Errno::NOENT));
        if !new_is_file || !name_plain {
            continue;
        }
        let entry = Entry {
            package: package.name.clone(),
            arch: arch_field(package).to_string(),
            version: package.version.clone(),
            old_hash: c.hash,
            path: c.path,
        };
        out.push((dir, entry));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> Entry {
        Entry {
            package: "al-00".into(),
            arch: "all".into(),
            version: "1.0".into(),
            old_hash: "0123456789abcdef0123456789abcdef".into(),
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn a_record_reads_back_as_written_and_a_torn_or_bad_one_is_refused() {
        let entries = vec![entry("/etc/al-00.conf"), entry("/etc/a file with spaces")];
        let bytes = encode(&entries);
        assert_eq!(decode(&bytes).unwrap(), entries);
        let torn = &bytes[..bytes.len() - 7];
        assert!(decode(torn).unwrap_err().contains("end"), "{:?}", decode(torn));
        let miscounted = String::from_utf8(bytes.clone()).unwrap().replace("end 2", "end 3");
        assert!(decode(miscounted.as_bytes()).is_err());
        for bad in [
            "al-00 all 1.0 nothash /etc/x",
            "al-00 all 1.0 0123456789abcdef0123456789abcdef etc/relative",
            "al-00 all 1.0 0123456789abcdef0123456789abcdef /",
            "al-00 all 1.0",
            "al-00  1.0 0123456789abcdef0123456789abcdef /etc/x",
        ] {
            let text = format!("{MAGIC}\n{bad}\nend 1\n");
            assert!(decode(text.as_bytes()).is_err(), "{bad}");
        }
        assert!(decode(b"something else\nend 0\n").is_err());
    }

    #[test]
    fn only_dpkgs_choices_that_ask_no_one_are_redone() {
        let (old, new, edited) = ("a".repeat(32), "b".repeat(32), "c".repeat(32));
        // Not changed by the administrator, changed by the package: dpkg installs the new one.
        assert_eq!(choice(&old, Some(&old), &new), Choice::Install);
        // New to the package, nothing at NAME.
        assert_eq!(choice(NEW_CONFFILE, None, &new), Choice::Install);
        // The same content at both (the package did not change it, or the administrator made
        // the package's change): dpkg removes NAME.dpkg-new.
        assert_eq!(choice(&old, Some(&new), &new), Choice::Keep);
        assert_eq!(choice(&old, Some(&old), &old), Choice::Keep);
        assert_eq!(choice(NEW_CONFFILE, Some(&new), &new), Choice::Keep);
        // Changed by the administrator alone: kept.
        assert_eq!(choice(&old, Some(&edited), &old), Choice::Keep);
        // Changed by both (dpkg asked, or followed --force-conf*), or deleted.
        assert_eq!(choice(&old, Some(&edited), &new), Choice::Asked);
        assert_eq!(choice(&old, None, &new), Choice::Asked);
        assert_eq!(choice(NEW_CONFFILE, Some(&edited), &new), Choice::Asked);
    }
}
