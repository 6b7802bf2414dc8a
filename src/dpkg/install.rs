//! Database mode: what `dpkg --unpack` does to a root's files and database, done inside the
//! engine's one transaction.
//!
//! For each package of the call, [`Database::begin`] finds what is installed of it and
//! [`Database::map_entry`] decides, entry by entry, what dpkg would: the file another installed
//! package owns is a conflict (exit 1) unless the new package `Replaces` it (its ownership
//! moves) or the owner replaces the new one (the entry is skipped); a diverted path is written
//! at its divert-to name unless the package is the diverter; a conffile is written as
//! `NAME.dpkg-new` beside the old file; `statoverride` wins over the archive's owner and mode.
//! [`Database::finish`] then hands the transaction what is left: the files the old version
//! listed that nothing ships any more (removed after the renames, in the journal), and every
//! database file (the info files, the other packages' lists that lost paths, `status`) as new
//! files under temporary names, renamed with the package's own. So after any crash and
//! recovery the database and the tree agree: all old or all new.
//!
//! It never writes anything itself, and never decides about dependencies (Depends,
//! Pre-Depends, Conflicts, Breaks are apt's business, as unpack(1) says). It does not run
//! maintainer scripts.

use super::admin::{self, Installed};
use super::database::{Database, Deconfigure, Incoming, Taken};
use super::depcon;
use super::format::deb822::Stanza;
use super::format::list;
use super::format::status::{self, Conffile, Flag, State, StatusField, Want};
use super::format::version::{parse_relations, Relation, Version};
use crate::error::{escape, Error, Result};
use crate::events::{Event, EventFn};
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use crate::report::DatabaseReport;
use crate::txn::transaction::{OnDisk, Transaction};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What [`Database::finish`] gathers over the call's packages before the status file.
#[derive(Default)]
pub(super) struct Finished {
    reports: Vec<DatabaseReport>,
    /// Installed packages replaced by a new version, or disappeared.
    gone: HashSet<usize>,
    new_stanzas: Vec<Stanza>,
    /// Listed paths the upgrades remove: they activate file triggers too.
    dropped: Vec<(String, PathBuf)>,
    pub(super) removals: Vec<PathBuf>,
    /// Installed packages that disappear, with the package of the call that took their last
    /// file.
    disappearing: Vec<(usize, usize)>,
    /// Conflictors removed, with their new stanza (`None`: forgotten).
    pub(super) conflicted: Vec<(usize, Option<Stanza>)>,
    /// Listed paths the conflictors' removal removes: they activate file triggers, with no
    /// package awaiting them.
    pub(super) conflict_removed: Vec<PathBuf>,
}

/// What to do with an entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Write it (at the path [`Database::map_entry`] may have changed); `hash`: its md5 goes
    /// into the md5sums dpkg computes for a package that ships none.
    Write { hash: bool },
    /// Do not write it: an installed package that replaces this one keeps the path, or a
    /// Multi-Arch: same sibling of this call wrote the shared file already.
    Skip,
    /// Do not write it, but check that it is what the installed Multi-Arch: same instances of
    /// the package, all of the new version, have there (src/main/archives.c
    /// tarobject_matches): the same is left as it is, as dpkg leaves it; one that differs is
    /// refused (exit 1).
    Shared { hash: bool, expect: Shared },
}

/// What a shared file of Multi-Arch: same instances must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// What is at its final name now: the same symlink target, or a regular file of the same
    /// md5.
    OnDisk,
    /// A conffile: the md5 an installed instance's `Conffiles` records for it.
    Md5(String),
}

impl Database {
    /// A package of the call starts: its control archive is kept (its scripts and info files).
    pub fn begin(&mut self, package: &Path, archive: ControlArchive) -> Result<()> {
        let control = admin::control_stanza(package, &archive.text)?;
        self.admit(package, &control, &archive)?;
        let name = archive.control.name.to_ascii_lowercase();
        let arch = archive.control.architecture.clone();
        if !super::format::valid_package_name(&name) || !super::format::valid_arch(&arch) {
            return Err(Error::bad(
                package,
                format!(
                    "control: '{}' of architecture '{}' is no name dpkg accepts",
                    escape(&name),
                    escape(&arch)
                ),
            ));
        }
        let version = Version::parse(&archive.control.version)
            .map_err(|e| Error::bad(package, format!("control: Version: {e}")))?;
        let multi_arch_same =
            control.get("Multi-Arch").is_some_and(|m| m.eq_ignore_ascii_case("same"));
        if self
            .incoming
            .iter()
            .any(|i| i.name == name && (i.arch == arch || !(i.multi_arch_same && multi_arch_same)))
        {
            return Err(Error::Usage(format!(
                "{}: {name} is already in this call",
                escape(package)
            )));
        }
        let old = self.installed.packages.iter().position(|p| {
            p.name == name
                && p.status.state != State::NotInstalled
                && (p.arch == arch || !(p.multi_arch_same && multi_arch_same))
        });
        // A `not-installed` stanza of its name and architecture (a failed first install leaves
        // one) is the slot it takes, as dpkg reuses it (lib/dpkg/parse.c parse_find_pkg_slot).
        let slot = old.or_else(|| {
            self.installed.packages.iter().position(|p| {
                p.name == name && p.arch == arch && p.status.state == State::NotInstalled
            })
        });
        let conffiles = match archive.members.iter().find(|m| m.name == "conffiles") {
            Some(m) => list::parse_conffiles_member(&m.bytes)
                .map_err(|e| Error::bad(package, format!("conffiles: {e}")))?,
            None => Vec::new(),
        };
        let replaces = match control.get("Replaces") {
            Some(v) => parse_relations(v)
                .map_err(|e| Error::bad(package, format!("control: Replaces: {e}")))?
                .into_iter()
                .flatten()
                .collect(),
            None => Vec::new(),
        };
        let md5sums = (!archive.members.iter().any(|m| m.name == "md5sums")).then(Vec::new);
        let (deconfigures, conflictors) =
            self.dependencies(package, &control, &version, old, slot)?;
        self.incoming.push(Incoming {
            package: package.to_path_buf(),
            control,
            archive,
            name,
            arch,
            multi_arch_same,
            old,
            slot,
            deconfigures,
            conflictors,
            remove_on_upgrade: conffiles
                .iter()
                .filter(|c| c.remove_on_upgrade)
                .map(|c| c.path.clone())
                .collect(),
            conffiles: conffiles.into_iter().map(|c| c.path).collect(),
            replaces,
            list: Vec::new(),
            listed: HashSet::new(),
            written_as: HashMap::new(),
            md5sums,
            taken: Vec::new(),
            filtered: HashSet::new(),
            kept_conffiles: HashSet::new(),
            unwind: Vec::new(),
            scripts_ran: false,
        });
        self.emit_unpacking(self.incoming.len() - 1);
        Ok(())
    }

    /// What the package begun asks of the installed ones, as dpkg decides it before its
    /// scripts ([`depcon`]): the packages it deconfigures (the out-of-sync Multi-Arch: same
    /// instances first) and the conflictors it removes. Refused: exit 1 with dpkg's reasons;
    /// dpkg's notices go to the events.
    fn dependencies(
        &self,
        package: &Path,
        control: &Stanza,
        version: &Version,
        old: Option<usize>,
        slot: Option<usize>,
    ) -> Result<(Vec<Deconfigure>, Vec<usize>)> {
        let name = control.get("Package").unwrap_or_default().to_ascii_lowercase();
        let arch = control.get("Architecture").unwrap_or_default();
        let mut deconfigures: Vec<Deconfigure> = self
            .out_of_sync(&name, old, control.get("Version").unwrap_or_default())
            .into_iter()
            .map(|o| (o, None))
            .collect();
        let newcomer = depcon::Newcomer {
            name: &name,
            arch,
            version,
            control,
            slot,
            file: &package.to_string_lossy(),
        };
        let verdict =
            depcon::check(&self.installed, &newcomer, &self.native_arch(arch), self.choices)
                .map_err(|reason| Error::Conflict { path: package.to_path_buf(), reason })?;
        for note in verdict.notes {
            self.emit(Event::Notice { message: note });
        }
        for d in verdict.deconfigure {
            if !deconfigures.iter().any(|(o, _)| *o == d.0) {
                deconfigures.push(d);
            }
        }
        Ok((deconfigures, verdict.conflictors))
    }

    /// The installed instances of `name` (not `old`, the one the package replaces) that a
    /// package of `version` takes out of sync: configured (or with triggers to run) at another
    /// version, and not deconfigured by an earlier package of the call already.
    fn out_of_sync(&self, name: &str, old: Option<usize>, version: &str) -> Vec<usize> {
        let taken: HashSet<usize> =
            self.incoming.iter().flat_map(|i| i.deconfigures.iter().map(|d| d.0)).collect();
        let configured = |p: &status::Package| {
            matches!(
                p.status.state,
                State::Installed | State::TriggersPending | State::TriggersAwaited
            )
        };
        (0..self.installed.packages.len())
            .filter(|&o| Some(o) != old && !taken.contains(&o))
            .filter(|&o| {
                let p = &self.installed.packages[o];
                p.name == name && configured(p) && p.version != version
            })
            .collect()
    }

    /// Decides about one entry of the package begun last, and changes its path, owner and mode
    /// where dpkg would write it elsewhere or otherwise.
    ///
    /// A symlink meeting a directory, or a symlink that leads to the same directory, is listed
    /// and left as it is, whoever else lists the path, as dpkg leaves it
    /// ([`Transaction::keeps_existing_dir`]).
    pub fn map_entry(&mut self, tx: &mut Transaction<'_>, entry: &mut Entry) -> Result<Action> {
        self.admit_entry(entry, &list_path(&entry.path))?;
        let Some(inc) = self.incoming.last_mut() else {
            return Err(Error::Internal("an entry before its package".into()));
        };
        let db = &self.installed;
        let listed = list_path(&entry.path);
        if inc.remove_on_upgrade.contains(&listed) {
            return Err(Error::bad(
                &inc.package,
                format!(
                    "conffile '{}' marked for removal on upgrade, shipped in package",
                    escape(&listed)
                ),
            ));
        }
        let mut target = divert(db, &listed, &inc.name);
        let existing_dir = match &entry.kind {
            Kind::Symlink { target: link } => tx.keeps_existing_dir(&relative(&target), link),
            _ => false,
        };
        if entry.kind != Kind::Dir && !existing_dir {
            for &o in db.owners_of(&listed) {
                match ownership(db, inc, o, &listed) {
                    Ownership::Shared => {}
                    // As dpkg with --force-overwrite: its warning, and the path taken from the
                    // owner's list as from a package the new one Replaces.
                    Ownership::Conflict if self.choices.force.overwrite => {
                        inc.taken.push(Taken { from: o, path: listed.clone(), replaced: false });
                        warn_overwrite(self.events.as_deref(), &listed, &db.packages[o]);
                    }
                    Ownership::Taken { replaced } => {
                        inc.taken.push(Taken { from: o, path: listed.clone(), replaced })
                    }
                    Ownership::KeptByOwner => {
                        if inc.conffiles.contains(&listed) {
                            inc.kept_conffiles.insert(listed);
                        }
                        return Ok(Action::Skip);
                    }
                    Ownership::Conflict => return Err(conflict(inc, &db.packages[o], listed)),
                }
            }
        }
        if inc.listed.insert(listed.clone()) {
            inc.list.push(listed.clone());
        }
        if existing_dir {
            return Ok(Action::Skip);
        }
        // A Multi-Arch: same sibling earlier in this call wrote the shared file already.
        let (name, same) = (inc.name.clone(), inc.multi_arch_same);
        if entry.kind != Kind::Dir
            && same
            && self
                .incoming
                .iter()
                .rev()
                .skip(1)
                .any(|i| i.multi_arch_same && i.name == name && i.listed.contains(&listed))
        {
            return Ok(Action::Skip);
        }
        let Some(inc) = self.incoming.last_mut() else {
            return Err(Error::Internal("an entry before its package".into()));
        };
        if entry.path.as_os_str().is_empty() {
            return Ok(Action::Write { hash: false });
        }
        if entry.kind != Kind::Dir && inc.conffiles.contains(&listed) {
            let mut name = target.clone().into_os_string();
            name.push(".dpkg-new");
            target = PathBuf::from(name);
        }
        // Keyed on the package's path, applied to what is written for it (its divert-to name,
        // its `.dpkg-new`), as dpkg applies it (src/main/archives.c, tarobject).
        let shared = Database::shared_check(db, inc, &listed, &entry.kind);
        if let Some(&(uid, gid, mode)) = db.overrides.get(&listed) {
            (entry.uid, entry.gid, entry.mode) = (uid, gid, mode);
        }
        if let Kind::Hardlink { target: link } = &mut entry.kind {
            let link_listed = list_path(link);
            // A hard link has its target's content: dpkg lists its md5 too.
            if let Some(sums) = inc.md5sums.as_mut() {
                if let Some((md5, _)) = sums.iter().rev().find(|(_, p)| *p == link_listed) {
                    let md5 = md5.clone();
                    sums.push((md5, listed.clone()));
                }
            }
            if let Some(to) = inc.written_as.get(&link_listed) {
                *link = relative(to);
            }
        }
        if target != listed {
            entry.path = relative(&target);
            inc.written_as.insert(listed, target);
        }
        let hash = inc.md5sums.is_some() && matches!(entry.kind, Kind::File { .. });
        match shared {
            Some(expect) => Ok(Action::Shared { hash, expect }),
            None => Ok(Action::Write { hash }),
        }
    }

    /// Whether `path` of package `inc` is a file its installed Multi-Arch: same instances share
    /// and must find it the same, and with what: when every other instance present (beyond
    /// config-files) has the new version (dpkg's pkgset_getting_in_sync) and one lists the path
    /// (not a directory). A conffile is held to the hash an instance recorded for it.
    fn shared_check(db: &Installed, inc: &Incoming, path: &Path, kind: &Kind) -> Option<Shared> {
        if !inc.multi_arch_same || matches!(kind, Kind::Dir) {
            return None;
        }
        let siblings: Vec<usize> = db
            .packages
            .iter()
            .enumerate()
            .filter(|(o, p)| {
                Some(*o) != inc.old
                    && p.name == inc.name
                    && p.multi_arch_same
                    && !matches!(p.status.state, State::NotInstalled | State::ConfigFiles)
            })
            .map(|(o, _)| o)
            .collect();
        let in_sync = !siblings.is_empty()
            && siblings.iter().all(|&o| db.packages[o].version == inc.archive.control.version);
        let lists = |o: &usize| db.owners_of(path).contains(o);
        let owner = siblings.iter().find(|o| lists(o)).filter(|_| in_sync)?;
        if !inc.conffiles.iter().any(|c| c == path) {
            return Some(Shared::OnDisk);
        }
        let conffiles = db.packages[*owner].stanza.get("Conffiles")?;
        let recorded = status::parse_conffiles_field(conffiles).ok()?;
        recorded.into_iter().find(|c| c.path == path).map(|c| Shared::Md5(c.hash))
    }

    /// Forgets what [`Database::map_entry`] learned of the entries of the package begun last,
    /// for them to be mapped again from the first (the bootstrap's second stage, which reads a
    /// package again where it could not adopt the first stage's files).
    pub fn restart_package(&mut self) {
        if let Some(inc) = self.incoming.last_mut() {
            inc.list.clear();
            inc.listed.clear();
            inc.written_as.clear();
            inc.taken.clear();
            inc.kept_conffiles.clear();
            if let Some(sums) = inc.md5sums.as_mut() {
                sums.clear();
            }
        }
    }

    /// The md5 of a regular file just written, for a package that ships no md5sums: `path` is
    /// the entry's path in the archive (dpkg lists it there, not where a diversion or
    /// `.dpkg-new` put it).
    pub fn file_hashed(&mut self, path: &Path, md5: String) {
        if let Some(sums) = self.incoming.last_mut().and_then(|i| i.md5sums.as_mut()) {
            sums.push((md5, list_path(path)));
        }
    }

    /// Checks a shared file of Multi-Arch: same instances, `archive_path` of the package begun
    /// last, against what is at its final name `written`: `md5` is what the archive has (for a
    /// regular file), `kind` what the entry is. One that differs from what the other instances
    /// have is refused, as dpkg refuses it ("trying to overwrite shared ..."): exit 1, the call
    /// rolled back.
    pub fn check_shared(
        &self,
        tx: &mut Transaction<'_>,
        archive_path: &Path,
        written: &Path,
        kind: &Kind,
        md5: Option<&str>,
        expect: &Shared,
    ) -> Result<()> {
        let same = match (expect, kind) {
            (Shared::Md5(hash), _) => md5 == Some(hash.as_str()),
            (Shared::OnDisk, Kind::Symlink { target }) => {
                matches!(tx.on_disk(written)?, OnDisk::Symlink(t) if t == *target)
            }
            (Shared::OnDisk, Kind::File { .. }) => match tx.on_disk(written)? {
                OnDisk::File(file) => {
                    let sum = super::md5::of_reader(&file)
                        .map_err(|e| Error::root(tx.root().display(written), "reading", e))?;
                    md5 == Some(sum.as_str())
                }
                OnDisk::Nothing => true,
                _ => false,
            },
            (Shared::OnDisk, _) => true,
        };
        if same {
            return Ok(());
        }
        let Some(inc) = self.incoming.last() else {
            return Err(Error::Internal("a shared file before its package".into()));
        };
        Err(Error::Conflict {
            path: list_path(archive_path),
            reason: format!(
                "{} ({}) would overwrite a shared file which is different from other instances of package {}",
                inc.name, inc.archive.control.version, inc.name
            ),
        })
    }

    /// Hands the transaction the rest of the work: the files to remove after the renames and
    /// every database file. Returns what each package's report says about the database.
    pub fn finish(&mut self, tx: &mut Transaction<'_>) -> Result<Vec<DatabaseReport>> {
        let all_new: HashSet<&PathBuf> = self.incoming.iter().flat_map(|i| i.list.iter()).collect();
        let mut done = Finished::default();
        for (index, inc) in self.incoming.iter().enumerate() {
            self.finish_package(tx, index, inc, &all_new, &mut done)?;
        }
        self.finish_losers(tx, &all_new, &mut done)?;
        self.remove_conflictors(tx, &all_new, &mut done)?;
        let db = &self.installed;
        let deconfigured: HashSet<usize> =
            self.incoming.iter().flat_map(|i| i.deconfigures.iter().map(|d| d.0)).collect();
        let mut stanzas: Vec<Stanza> = Vec::with_capacity(db.packages.len() + 1);
        for i in (0..db.packages.len()).filter(|i| !done.gone.contains(i)) {
            match done.conflicted.iter().find(|(c, _)| *c == i) {
                Some((_, Some(removed))) => stanzas.push(removed.clone()),
                Some((_, None)) => {}
                None => stanzas.push(self.installed_stanza(i, &deconfigured)?),
            }
        }
        let first_new = stanzas.len();
        stanzas.extend(done.new_stanzas);
        self.record_triggers(tx, &mut stanzas, first_new, &done.dropped, &done.conflict_removed)?;
        let refs: Vec<&Stanza> = stanzas.iter().collect();
        let admin_rel = &self.admin.rel;
        tx.add_generated(&admin_rel.join("status"), &status::write_status(&refs), 0o644)?;
        if self.installed.format_missing {
            tx.add_generated(&admin_rel.join("info/format"), b"1\n", 0o644)?;
        }
        done.removals.extend(self.record_paths());
        tx.plan_removals(done.removals)?;
        self.disappearing = done.disappearing;
        self.conflicted = done.conflicted.iter().map(|(c, s)| (*c, s.is_some())).collect();
        self.status = stanzas;
        Ok(done.reports)
    }

    /// One package of the call, finished: its conffiles and list, the paths its old version
    /// drops, its info files and its status stanza.
    fn finish_package(
        &self,
        tx: &mut Transaction<'_>,
        index: usize,
        inc: &Incoming,
        all_new: &HashSet<&PathBuf>,
        done: &mut Finished,
    ) -> Result<()> {
        let old = inc.old.map(|o| &self.installed.packages[o]);
        let (conffiles, list) = self.conffiles_and_list(tx, inc)?;
        if let Some(slot) = inc.slot {
            done.gone.insert(slot);
        }
        let removed = match inc.old {
            Some(o) => self.drop_old_paths(inc, o, &list, all_new, done),
            None => 0,
        };
        self.remove_on_upgrade(tx, index, inc, &conffiles, done)?;
        self.write_info_files(tx, inc, &list, done)?;
        let status = StatusField { want: Want::Install, flag: Flag::Ok, state: State::Unpacked };
        let config_version = old.and_then(status::Package::config_version);
        done.new_stanzas.push(status::status_stanza(
            &inc.control,
            &status,
            &conffiles,
            config_version,
        ));
        let upgraded = old.filter(|o| o.status.state != State::ConfigFiles);
        done.reports.push(DatabaseReport {
            action: if upgraded.is_some() { "upgraded" } else { "installed" }.into(),
            previous_version: upgraded.map(|o| o.version.clone()),
            removed,
            conffiles_new: conffiles
                .iter()
                .filter(|c| !c.obsolete)
                .map(|c| c.path.to_string_lossy().into_owned())
                .collect(),
            replaced: Vec::new(),
            disappeared: Vec::new(),
            scripts_run: self.scripts.is_some(),
        });
        Ok(())
    }

    /// The package's conffiles as its status stanza records them (the new ones with the old
    /// version's hash where it had them, the old ones it no longer ships obsolete) and its
    /// list (those obsolete ones included, as dpkg lists them). An old conffile is obsolete
    /// only where the old version's list still names it (not taken by another package), it is
    /// still on disk and not a directory, and the new version does not ship the path at all,
    /// in the reverse of the old list's order, as dpkg decides (src/main/unpack.c
    /// pkg_remove_old_files, which walks the old list newest first): one a preinst
    /// removed or moved away (`dpkg-maintscript-helper rm_conffile`, `mv_conffile`) is
    /// forgotten, and one the new version ships as a plain file is one of its files.
    fn conffiles_and_list(
        &self,
        tx: &mut Transaction<'_>,
        inc: &Incoming,
    ) -> Result<(Vec<Conffile>, Vec<PathBuf>)> {
        let old = inc.old.map(|o| &self.installed.packages[o]);
        let old_conffiles = match old.and_then(|o| o.stanza.get("Conffiles")) {
            Some(v) => status::parse_conffiles_field(v)
                .map_err(|e| admin::bad_db(&self.admin.dir.path().join("status"), e))?,
            None => Vec::new(),
        };
        let mut conffiles: Vec<Conffile> = inc
            .conffiles
            .iter()
            .filter(|p| {
                inc.listed.contains(*p)
                    || inc.kept_conffiles.contains(*p)
                    || inc.remove_on_upgrade.contains(*p)
            })
            .map(|p| Conffile {
                path: p.clone(),
                hash: old_conffiles
                    .iter()
                    .find(|c| &c.path == p)
                    .map(|c| c.hash.clone())
                    .or_else(|| self.owners_hash(inc, p))
                    .unwrap_or_else(|| status::NEW_CONFFILE.to_string()),
                obsolete: inc.kept_conffiles.contains(p),
                remove_on_upgrade: inc.remove_on_upgrade.contains(p),
            })
            .collect();
        let mut list = inc.list.clone();
        // dpkg walks the old version's list, newest entry first, and keeps each conffile of it
        // that disappears: one the old list no longer names (taken by another package) is
        // forgotten, and the kept ones come in that reverse order.
        let old_list: &[PathBuf] = inc.old.map_or(&[], |o| &self.installed.lists[o]);
        let dropped =
            old_list.iter().rev().filter_map(|p| old_conffiles.iter().find(|c| &c.path == p));
        for c in dropped.filter(|c| !inc.conffiles.contains(&c.path)) {
            if inc.listed.contains(&c.path) {
                continue;
            }
            let on_disk = relative(&divert(&self.installed, &c.path, &inc.name));
            if tx.stamp(&on_disk).is_none_or(|(_, stamp)| stamp.is_dir()) {
                continue;
            }
            conffiles.push(Conffile { obsolete: true, remove_on_upgrade: false, ..c.clone() });
            list.push(c.path.clone());
        }
        Ok((conffiles, list))
    }

    /// The package's `remove-on-upgrade` conffiles, as dpkg treats them after the unpack
    /// (src/main/unpack.c pkg_remove_conffile_on_upgrade), unless another package lists the
    /// path: its `.dpkg-dist` removed; the file removed where it is what the package's
    /// previous version shipped (its recorded hash), otherwise kept as `PATH.dpkg-old` (a copy
    /// with its owner, mode and mtime, renamed in with the package's files, the file itself
    /// removed after). Only a regular file is looked at: dpkg follows a symlink there to the
    /// file it leads to, this leaves it.
    fn remove_on_upgrade(
        &self,
        tx: &mut Transaction<'_>,
        index: usize,
        inc: &Incoming,
        conffiles: &[Conffile],
        done: &mut Finished,
    ) -> Result<()> {
        let db = &self.installed;
        for c in conffiles.iter().filter(|c| c.remove_on_upgrade) {
            if db.owners_of(&c.path).iter().any(|&o| Some(o) != inc.old) {
                continue;
            }
            let at = relative(&divert(db, &c.path, &inc.name));
            done.removals.push(suffixed(&at, ".dpkg-dist"));
            let OnDisk::File(file) = tx.on_disk(&at)? else { continue };
            let shown = tx.root().display(&at);
            let hash =
                super::md5::of_reader(&file).map_err(|e| Error::root(&shown, "reading", e))?;
            done.removals.push(at.clone());
            if hash == c.hash {
                continue;
            }
            let st = rustix::fs::fstat(&file).map_err(|e| Error::root(&shown, "stat", e))?;
            let copy = Entry {
                path: suffixed(&at, ".dpkg-old"),
                kind: Kind::File { size: st.st_size as u64 },
                mode: st.st_mode & 0o7777,
                uid: st.st_uid,
                gid: st.st_gid,
                mtime: (st.st_mtime, st.st_mtime_nsec as u32),
            };
            let mut reader = std::io::BufReader::new(&file);
            std::io::Seek::rewind(&mut reader).map_err(|e| Error::root(&shown, "reading", e))?;
            tx.add(index, &inc.package, &copy, &mut reader)?;
        }
        Ok(())
    }

    /// The hash another installed package that lists `path` records for it as its conffile:
    /// a conffile taken over (by Replaces, from a package with only config files left, from an
    /// obsolete conffile, between Multi-Arch: same instances) keeps the hash its previous
    /// owner had, as dpkg keeps it (src/main/unpack.c deb_parse_conffiles), so that
    /// `dpkg --configure` sees an unchanged file as the distributor's, not as one "created by
    /// you or by a script". Several such owners are rare; dpkg then takes one of them ("at
    /// random"), this the first in the database's order.
    fn owners_hash(&self, inc: &Incoming, path: &Path) -> Option<String> {
        let db = &self.installed;
        db.owners_of(path).iter().filter(|&&o| Some(o) != inc.old).find_map(|&o| {
            let field = db.packages[o].stanza.get("Conffiles")?;
            let recorded = status::parse_conffiles_field(field).ok()?;
            recorded.into_iter().find(|c| c.path == path).map(|c| c.hash)
        })
    }

    /// The paths installed package `o`, which `inc` upgrades, listed and the new version does
    /// not keep (`list`), nor any other package has: removed after the renames. Returns how
    /// many.
    fn drop_old_paths(
        &self,
        inc: &Incoming,
        o: usize,
        list: &[PathBuf],
        all_new: &HashSet<&PathBuf>,
        done: &mut Finished,
    ) -> u64 {
        let db = &self.installed;
        let kept: HashSet<&PathBuf> = list.iter().collect();
        // An installed package another package of the call upgrades keeps a path only if its
        // new version lists it, which `all_new` says: a directory several upgrades all drop
        // goes.
        let upgraded: HashSet<usize> = self.incoming.iter().filter_map(|i| i.old).collect();
        let mut removed = 0;
        for p in db.lists[o].iter().rev().filter(|p| !inc.remove_on_upgrade.contains(*p)) {
            let others = db.owners_of(p).iter().any(|&x| {
                x != o
                    && !upgraded.contains(&x)
                    && db.packages[x].status.state != State::NotInstalled
            });
            // A path the filters kept from being written is not the new version's on disk.
            let shipped = (kept.contains(p) || all_new.contains(p)) && !inc.filtered.contains(p);
            if shipped || others || p.as_os_str() == "/." {
                continue;
            }
            done.removals.push(relative(&divert(db, p, &inc.name)));
            done.dropped.push((inc.name.clone(), p.clone()));
            removed += 1;
        }
        removed
    }

    /// The package's info files: every control member dpkg keeps, the list, the md5sums; and
    /// the old version's info files the new one does not have, removed.
    fn write_info_files(
        &self,
        tx: &mut Transaction<'_>,
        inc: &Incoming,
        list: &[PathBuf],
        done: &mut Finished,
    ) -> Result<()> {
        let info_rel = self.admin.rel.join("info");
        let info_name = status::info_name(&inc.name, &inc.arch, inc.multi_arch_same);
        let mut written: HashSet<String> = HashSet::new();
        let mut write = |tx: &mut Transaction<'_>, kind: &str, bytes: &[u8], mode: u32| {
            let file = format!("{info_name}.{kind}");
            written.insert(file.clone());
            tx.add_generated(&info_rel.join(&file), bytes, mode)
        };
        for m in inc.archive.members.iter().filter(|m| keeps_member(&m.name)) {
            write(tx, &m.name, &m.bytes, m.mode & 0o777)?;
        }
        write(tx, "list", &list::write_list(list), 0o644)?;
        if let Some(sums) = &inc.md5sums {
            write(tx, "md5sums", &list::write_md5sums(sums), 0o644)?;
        }
        let old_info = inc.old.map(|o| self.installed.packages[o].info_name());
        for n in &self.installed.info_names {
            let owner = n.rsplit_once('.').map(|(stem, _)| stem);
            if owner.is_some()
                && (owner == old_info.as_deref() || owner == Some(info_name.as_str()))
                && !written.contains(n)
            {
                done.removals.push(info_rel.join(n));
            }
        }
        Ok(())
    }

    /// The installed packages the call took files from: their lists shrink, or, left with no
    /// file, they disappear (their info files removed, their postrm called after the commit).
    fn finish_losers(
        &self,
        tx: &mut Transaction<'_>,
        all_new: &HashSet<&PathBuf>,
        done: &mut Finished,
    ) -> Result<()> {
        let db = &self.installed;
        let info_rel = self.admin.rel.join("info");
        // By loser: the paths taken, and the package of the call that took the first.
        let mut taken_from: HashMap<usize, (HashSet<&PathBuf>, usize)> = HashMap::new();
        for (by, inc) in self.incoming.iter().enumerate() {
            for t in &inc.taken {
                taken_from.entry(t.from).or_insert_with(|| (HashSet::new(), by)).0.insert(&t.path);
                if t.replaced && !done.reports[by].replaced.contains(&db.packages[t.from].name) {
                    done.reports[by].replaced.push(db.packages[t.from].name.clone());
                }
            }
        }
        let mut losers: Vec<_> = taken_from.into_iter().collect();
        losers.sort_by_key(|(o, _)| *o);
        let conflictors: HashSet<usize> =
            self.incoming.iter().flat_map(|i| i.conflictors.iter().copied()).collect();
        for (o, (taken, by)) in losers {
            if done.gone.contains(&o) || conflictors.contains(&o) {
                continue;
            }
            let other = &db.packages[o];
            if disappears(db, o, all_new, &self.incoming[by]) {
                done.gone.insert(o);
                done.reports[by].disappeared.push(other.name.clone());
                done.disappearing.push((o, by));
                let stem = other.info_name();
                done.removals.extend(
                    db.info_names
                        .iter()
                        .filter(|n| n.rsplit_once('.').map(|(s, _)| s) == Some(stem.as_str()))
                        .map(|n| info_rel.join(n)),
                );
            } else {
                let left: Vec<PathBuf> =
                    db.lists[o].iter().filter(|p| !taken.contains(p)).cloned().collect();
                tx.add_generated(
                    &info_rel.join(format!("{}.list", other.info_name())),
                    &list::write_list(&left),
                    0o644,
                )?;
            }
        }
        Ok(())
    }

    /// The stanza of installed package `i` as the commit leaves it: a conffile of it that a
    /// package of the call now ships as its own conffile is marked obsolete (dpkg's
    /// conffile_mark_obsolete), and a deconfigured package is half-configured.
    fn installed_stanza(&self, i: usize, deconfigured: &HashSet<usize>) -> Result<Stanza> {
        let p = &self.installed.packages[i];
        let mut stanza = p.stanza.clone();
        let now_theirs: HashSet<&PathBuf> = self
            .incoming
            .iter()
            .flat_map(|inc| inc.taken.iter().filter(move |t| inc.conffiles.contains(&t.path)))
            .filter(|t| t.from == i)
            .map(|t| &t.path)
            .collect();
        if let (false, Some(field)) = (now_theirs.is_empty(), p.stanza.get("Conffiles")) {
            let mut conffiles = status::parse_conffiles_field(field)
                .map_err(|e| admin::bad_db(&self.admin.dir.path().join("status"), e))?;
            for c in conffiles.iter_mut().filter(|c| now_theirs.contains(&c.path)) {
                c.obsolete = true;
            }
            status::set_known(&mut stanza, "Conffiles", status::conffiles_field(&conffiles));
        }
        if deconfigured.contains(&i) {
            if let Some(version) = p.config_version() {
                status::set_known(&mut stanza, "Config-Version", version.to_string());
            }
            let half = StatusField { state: State::HalfConfigured, ..p.status };
            status::set_known(&mut stanza, "Status", half.to_string());
        }
        Ok(stanza)
    }
}

/// A file of package `inc` that `other` owns and `inc` does not Replace.
fn conflict(inc: &Incoming, other: &status::Package, path: PathBuf) -> Error {
    Error::Conflict {
        reason: format!(
            "{} ({}) would overwrite it, and it is in package {} ({}), which {0} does not Replace",
            inc.name, inc.archive.control.version, other.name, other.version
        ),
        path,
    }
}

/// dpkg's warning when `--force-overwrite` lets package `owner`'s `path` be overwritten
/// (src/main/archives.c, tarobject), told to `events` as a notice.
fn warn_overwrite(events: Option<&EventFn>, path: &Path, owner: &status::Package) {
    if let Some(events) = events {
        let problem = overwrite_message(path, owner);
        events(&Event::Notice {
            message: format!(
                "warning: overriding problem because --force enabled:\nwarning: {problem}"
            ),
        });
    }
}

/// dpkg's words for a file another package owns (src/main/archives.c, tarobject).
fn overwrite_message(path: &Path, owner: &status::Package) -> String {
    let name = if owner.multi_arch_same {
        format!("{}:{}", owner.name, owner.arch)
    } else {
        owner.name.clone()
    };
    format!(
        "trying to overwrite '{}', which is also in package {name} {}",
        escape(path),
        crate::dpkg_log::shown(&owner.version)
    )
}

/// How an installed package's claim on a path weighs against the new package's.
enum Ownership {
    /// No conflict, and the path stays in the owner's list too: the same package, a
    /// Multi-Arch: same sibling, a diversion one of them made.
    Shared,
    /// Ownership moves to the new package: it replaces the owner, or (not `replaced`) takes
    /// the path silently from a package with only config files left or from one whose
    /// obsolete conffile it ships as a conffile.
    Taken {
        replaced: bool,
    },
    /// The owner replaces the new package: the path stays the owner's, the entry is skipped.
    KeptByOwner,
    Conflict,
}

/// dpkg's rules (src/main/archives.c, tarobject) for a non-directory `path` that installed
/// package `o` lists.
fn ownership(db: &Installed, inc: &Incoming, o: usize, path: &Path) -> Ownership {
    let other = &db.packages[o];
    if Some(o) == inc.old || other.status.state == State::NotInstalled {
        return Ownership::Shared;
    }
    if other.name == inc.name && other.multi_arch_same && inc.multi_arch_same {
        return Ownership::Shared;
    }
    if let Some(d) = db.diversions.get(path) {
        if d.by.as_deref().is_some_and(|by| by == other.name || by == inc.name) {
            return Ownership::Shared;
        }
    }
    if other.status.state == State::ConfigFiles {
        return Ownership::Taken { replaced: false };
    }
    let obsolete_conffile = other
        .stanza
        .get("Conffiles")
        .and_then(|v| status::parse_conffiles_field(v).ok())
        .is_some_and(|cs| cs.iter().any(|c| c.obsolete && c.path == path));
    if obsolete_conffile && inc.conffiles.iter().any(|c| c == path) {
        return Ownership::Taken { replaced: false };
    }
    let other_version = Version::parse(&other.version).ok();
    if other_version
        .as_ref()
        .is_some_and(|v| inc.replaces.iter().any(|r| r.satisfied_by(&other.name, v)))
    {
        return Ownership::Taken { replaced: true };
    }
    let other_replaces: Vec<Relation> = other
        .stanza
        .get("Replaces")
        .and_then(|v| parse_relations(v).ok())
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let new_version = Version::parse(&inc.archive.control.version).ok();
    if new_version
        .as_ref()
        .is_some_and(|v| other_replaces.iter().any(|r| r.satisfied_by(&inc.name, v)))
    {
        return Ownership::KeptByOwner;
    }
    Ownership::Conflict
}

/// Whether installed package `o`, some of whose files `inc` took, disappears as dpkg makes it
/// disappear (src/main/unpack.c, pkg_disappear_others): every path it lists but the root is in
/// the new packages or another package's too, none is diverted by it or by `inc`, and no
/// installed package depends on it or on what it provides. (dpkg asks whether such a
/// dependency would still be satisfied without it; this asks only whether one names it, so it
/// keeps a package dpkg might let go, never the other way round.)
fn disappears(db: &Installed, o: usize, all_new: &HashSet<&PathBuf>, inc: &Incoming) -> bool {
    let other = &db.packages[o];
    if other.status.state == State::ConfigFiles
        || other.stanza.get("Essential").is_some_and(|e| e.eq_ignore_ascii_case("yes"))
    {
        return false;
    }
    let files: Vec<&PathBuf> = db.lists[o].iter().filter(|p| p.as_os_str() != "/.").collect();
    if files.is_empty() {
        return false;
    }
    let saves = |p: &PathBuf| {
        if db
            .diversions
            .get(p)
            .and_then(|d| d.by.as_deref())
            .is_some_and(|by| by == other.name || by == inc.name)
        {
            return true;
        }
        if all_new.contains(p) {
            return false;
        }
        !db.owners_of(p)
            .iter()
            .any(|&x| x != o && db.packages[x].status.state != State::NotInstalled)
    };
    if files.into_iter().any(saves) {
        return false;
    }
    let mut names = vec![other.name.clone()];
    if let Some(provides) = other.stanza.get("Provides").and_then(|v| parse_relations(v).ok()) {
        names.extend(provides.into_iter().flatten().map(|r| r.name));
    }
    !db.packages.iter().enumerate().any(|(i, p)| {
        i != o
            && !matches!(p.status.state, State::NotInstalled | State::ConfigFiles)
            && ["Depends", "Pre-Depends", "Recommends"].iter().any(|f| {
                p.stanza
                    .get(f)
                    .and_then(|v| parse_relations(v).ok())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|r| names.contains(&r.name))
            })
    })
}

/// The control members dpkg keeps in its info directory: all but `control` itself and names
/// with a dot (src/main/unpack.c, pkg_infodb_update); `list` is the engine's to write.
fn keeps_member(name: &str) -> bool {
    name != "control"
        && name != "list"
        && !name.contains('.')
        && name.len() <= 100
        && !name.is_empty()
}

/// Where an old file of package `name` is on disk: its divert-to name when someone else
/// diverted it.
pub(super) fn divert(db: &Installed, path: &Path, name: &str) -> PathBuf {
    match db.diversions.get(path) {
        Some(d) if d.by.as_deref() != Some(name) => d.to.clone(),
        _ => path.to_path_buf(),
    }
}

/// The archive path `usr/bin/x` as dpkg lists it: `/usr/bin/x`; the root is `/.`.
fn list_path(path: &Path) -> PathBuf {
    if path.as_os_str().is_empty() {
        return PathBuf::from("/.");
    }
    let mut bytes = b"/".to_vec();
    bytes.extend_from_slice(path.as_os_str().as_bytes());
    PathBuf::from(OsString::from_vec(bytes))
}

/// `path` with `suffix` added to its last name.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// A listed path relative to the root, as entries are.
pub(super) fn relative(path: &Path) -> PathBuf {
    path.strip_prefix("/").map(Path::to_path_buf).unwrap_or_else(|_| path.to_path_buf())
}
