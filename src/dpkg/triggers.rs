//! Triggers at unpack, as dpkg records them (lib/dpkg/triglib.c, src/main/trigproc.c): the
//! interests the call's packages declare replace their old versions' in `triggers/File` and
//! the explicit triggers' files; every path the call writes activates the file interests in
//! exactly that path, every path it drops those in the path and its parents; each package's
//! `activate` directives (its old version's and its new one's) activate theirs; and what the
//! unpack phase's maintainer scripts queued with `dpkg-trigger` in `triggers/Unincorp` is
//! incorporated, as dpkg incorporates it after each script. An activation marks each
//! interested installed package `triggers-pending` (`Triggers-Pending`, newest first) and, unless
//! the interest or the activation says `noawait`, leaves the activating package awaiting it
//! (`Triggers-Awaited`).
//!
//! Part of database mode's [`Database`]: it reads the trigger files through the admin
//! directory's confined handles and hands what changed to the transaction; it never writes a
//! name itself. Its work is linear in the paths and interests ([`FileTable`], and the status
//! stanzas indexed by name).

use super::admin;
use super::database::Database;
use super::format::deb822::Stanza;
use super::format::status::{self, State, StatusField};
use super::format::triggers::{self, Deferred, Directive, FileTable, Interest};
use super::format::ParseError;
use crate::durability::Directory;
use crate::error::{Error, Result};
use crate::txn::transaction::Transaction;
use std::collections::btree_map::{self, BTreeMap};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The largest trigger file read (`triggers/File`, an explicit trigger's, `Unincorp`).
const MAX_TRIGGER_FILE: u64 = 16 << 20;

/// The interests of the admin directory's `triggers/`, read, and as the call changes them.
struct Interests {
    /// `triggers/File` as it was, and its interests.
    file_before: Vec<u8>,
    file: Vec<Interest>,
    /// The explicit triggers' files the call touches, by name: as they were, and their
    /// interests.
    explicit: BTreeMap<String, (Vec<u8>, Vec<Interest>)>,
    /// `triggers/Unincorp` as it was (`None`: missing), and what it queued.
    unincorp_before: Option<Vec<u8>>,
    deferred: Vec<Deferred>,
}

/// The directives of each package of the call: its new version's, its old version's; and
/// each conflictor's the call removes (its interests go with it).
struct Directives {
    new: Vec<Vec<Directive>>,
    old: Vec<Vec<Directive>>,
    removed: Vec<Vec<Directive>>,
}

impl Database {
    /// Triggers as dpkg records them at unpack (see the module doc), into `stanzas` (the new
    /// packages' from `first_new` on, in call order) and the trigger files the transaction
    /// writes; `dropped` are the paths each package's upgrade removes (by package name),
    /// `removed` those the conflictors' removal removes.
    pub(super) fn record_triggers(
        &mut self,
        tx: &mut Transaction<'_>,
        stanzas: &mut [Stanza],
        first_new: usize,
        dropped: &[(String, PathBuf)],
        removed: &[PathBuf],
    ) -> Result<()> {
        let dir = self.triggers_dir()?;
        let directives = self.directives()?;
        let mut interests = self.read_interests(dir.as_ref(), &directives)?;
        self.replace_interests(&mut interests, &directives.new);
        let mut status = Statuses::new(stanzas);
        self.activate(&interests, &directives, &mut status, first_new, dropped);
        // A conflictor's removed paths activate the interests in them and their parents, as
        // dpkg's removal does (trig_path_activate); no package of the call awaits them.
        let table = FileTable::new(&interests.file);
        for path in removed {
            for i in table.at_or_above(path) {
                status.pend(&i.package, &i.path.to_string_lossy());
            }
        }
        self.incorporate(&interests, &mut status);
        let pended: Vec<(String, Option<String>, String)> = status
            .pended
            .iter()
            .map(|&i| {
                let s = &status.stanzas[i];
                let key = |f: &str| s.get(f).map(String::from);
                let state = key("Status").unwrap_or_default();
                (key("Package").unwrap_or_default(), key("Architecture"), state)
            })
            .collect();
        self.write_interests(tx, &interests)?;
        self.pended = pended
            .into_iter()
            .filter_map(|(name, arch, status)| {
                let o =
                    self.installed.packages.iter().position(|p| {
                        p.name == name && arch.as_deref().is_none_or(|a| a == p.arch)
                    })?;
                let state = StatusField::parse(&status).ok()?.state;
                Some((o, state))
            })
            .collect();
        Ok(())
    }

    /// The admin directory's `triggers/`, if it has one.
    fn triggers_dir(&self) -> Result<Option<Directory>> {
        let path = self.admin.dir.path().join("triggers");
        match rustix::fs::openat(
            self.admin.dir.fd(),
            "triggers",
            crate::fs::tree::DIR_FLAGS,
            rustix::fs::Mode::empty(),
        ) {
            Ok(fd) => {
                Directory::new(fd, path.clone()).map(Some).map_err(|e| Error::root(path, "stat", e))
            }
            Err(_) => Ok(None),
        }
    }

    /// Each package's `triggers` member, and its old version's (`info/PKG.triggers`).
    fn directives(&self) -> Result<Directives> {
        let mut directives = Directives { new: Vec::new(), old: Vec::new(), removed: Vec::new() };
        for inc in &self.incoming {
            directives.new.push(match inc.archive.members.iter().find(|m| m.name == "triggers") {
                Some(m) => triggers::parse_member(&m.bytes)
                    .map_err(|e| Error::bad(Path::new(&inc.name), format!("triggers: {e}")))?,
                None => Vec::new(),
            });
            directives.old.push(match inc.old {
                Some(o) => self.installed_directives(o)?,
                None => Vec::new(),
            });
            for &c in &inc.conflictors {
                directives.removed.push(self.installed_directives(c)?);
            }
        }
        Ok(directives)
    }

    /// Installed package `o`'s directives (`info/PKG.triggers`).
    fn installed_directives(&self, o: usize) -> Result<Vec<Directive>> {
        let file = format!("{}.triggers", self.installed.packages[o].info_name());
        match admin::read_file(&self.admin.info, &file, MAX_TRIGGER_FILE)? {
            Some(bytes) => triggers::parse_member(&bytes)
                .map_err(|e| admin::bad_db(&self.admin.info.path().join(&file), e)),
            None => Ok(Vec::new()),
        }
    }

    /// `triggers/File`, `triggers/Unincorp`, and the explicit triggers' files a new package
    /// names (to change or to activate), its old version did (to drop the old interest or to
    /// activate), or `Unincorp` activates.
    fn read_interests(
        &self,
        dir: Option<&Directory>,
        directives: &Directives,
    ) -> Result<Interests> {
        let read = |name: &str| -> Result<Option<Vec<u8>>> {
            match dir {
                Some(d) => admin::read_file(d, name, MAX_TRIGGER_FILE),
                None => Ok(None),
            }
        };
        let bad = |name: &str, e: ParseError| {
            admin::bad_db(&self.admin.dir.path().join("triggers").join(name), e)
        };
        let file_before = read("File")?.unwrap_or_default();
        let file = triggers::parse_file_interests(&file_before).map_err(|e| bad("File", e))?;
        let unincorp_before = read("Unincorp")?;
        let deferred = triggers::parse_unincorp(unincorp_before.as_deref().unwrap_or_default())
            .map_err(|e| bad("Unincorp", e))?;
        let names = directives
            .new
            .iter()
            .chain(&directives.old)
            .chain(&directives.removed)
            .flatten()
            .filter(|d| !d.is_file())
            .map(|d| d.name.as_str())
            .chain(deferred.iter().map(|d| d.trigger.as_str()).filter(|t| !t.starts_with('/')));
        let mut explicit = BTreeMap::new();
        for name in names {
            if let btree_map::Entry::Vacant(slot) = explicit.entry(name.to_string()) {
                let bytes = read(slot.key())?.unwrap_or_default();
                let parsed = triggers::parse_explicit(&bytes).map_err(|e| bad(slot.key(), e))?;
                slot.insert((bytes, parsed));
            }
        }
        Ok(Interests { file_before, file, explicit, unincorp_before, deferred })
    }

    /// Each new package's interests replace its old version's: every interest that names the
    /// package (its name, with or without an architecture, as the line's form may have
    /// changed) goes, then its new ones are added.
    fn replace_interests(&self, interests: &mut Interests, directives: &[Vec<Directive>]) {
        // A conflictor's interests go with it.
        for c in self.incoming.iter().flat_map(|i| i.conflictors.iter()) {
            let p = &self.installed.packages[*c];
            let theirs = |who: &str| {
                let (name, arch) = who.split_once(':').map_or((who, None), |(n, a)| (n, Some(a)));
                name == p.name && arch.is_none_or(|a| a == p.arch)
            };
            interests.file.retain(|i| !theirs(&i.package));
            for (_, list) in interests.explicit.values_mut() {
                list.retain(|i| !theirs(&i.package));
            }
        }
        for (inc, dirs) in self.incoming.iter().zip(directives) {
            let who = status::info_name(&inc.name, &inc.arch, inc.multi_arch_same);
            // The package's interests are found by package, whatever the line's form: its own
            // architecture's, or the instance it replaces (a cross-grade's).
            let old_arch = inc.old.map(|o| self.installed.packages[o].arch.as_str());
            let mine = |p: &str| {
                let (name, arch) = p.split_once(':').map_or((p, None), |(n, a)| (n, Some(a)));
                name == inc.name && arch.is_none_or(|a| a == inc.arch || Some(a) == old_arch)
            };
            interests.file.retain(|i| !mine(&i.package));
            for (_, list) in interests.explicit.values_mut() {
                list.retain(|i| !mine(&i.package));
            }
            for d in dirs.iter().filter(|d| d.interest) {
                let interest =
                    Interest { path: PathBuf::new(), package: who.clone(), noawait: d.noawait };
                if d.is_file() {
                    interests.file.push(Interest { path: PathBuf::from(&d.name), ..interest });
                } else if let Some((_, list)) = interests.explicit.get_mut(&d.name) {
                    list.push(interest);
                }
            }
        }
    }

    /// The activations of each package of the call: by the paths it writes (exactly) and its
    /// upgrade drops (with their parents), by its old and new versions' `activate`
    /// directives.
    fn activate(
        &self,
        interests: &Interests,
        directives: &Directives,
        status: &mut Statuses<'_>,
        first_new: usize,
        dropped: &[(String, PathBuf)],
    ) {
        let table = FileTable::new(&interests.file);
        let mut dropped_by: HashMap<&str, Vec<&Path>> = HashMap::new();
        for (by, path) in dropped {
            dropped_by.entry(by.as_str()).or_default().push(path);
        }
        for (k, inc) in self.incoming.iter().enumerate() {
            let mut awaited: Vec<String> = Vec::new();
            let mut pend_on = |i: &Interest, trigger: &str, awaits: bool| {
                if status.pend(&i.package, trigger)
                    && awaits
                    && !i.noawait
                    && !awaited.contains(&i.package)
                {
                    awaited.push(i.package.clone());
                }
            };
            // The directives activate before the package's scripts and files, when dpkg still
            // has it as it was: only a package that was there (beyond config-files) is left
            // awaiting (a new one's awaiting is dropped when it is first noted).
            let present = inc.old.is_some_and(|o| {
                !matches!(
                    self.installed.packages[o].status.state,
                    State::NotInstalled | State::ConfigFiles
                )
            });
            let activations = directives.old[k].iter().chain(&directives.new[k]);
            for d in activations.filter(|d| !d.interest) {
                let awaits = present && !d.noawait;
                if d.is_file() {
                    for i in table.at_or_above(Path::new(&d.name)) {
                        pend_on(i, &i.path.to_string_lossy(), awaits);
                    }
                } else if let Some((_, list)) = interests.explicit.get(&d.name) {
                    for i in list {
                        pend_on(i, &d.name, awaits);
                    }
                }
            }
            // Then its files as they are written, and the paths its upgrade drops after them
            // (`Triggers-Pending` is newest first, so the order shows).
            for path in &inc.list {
                for i in table.at(path) {
                    pend_on(i, &i.path.to_string_lossy(), true);
                }
            }
            for path in dropped_by.get(inc.name.as_str()).into_iter().flatten() {
                for i in table.at_or_above(path) {
                    pend_on(i, &i.path.to_string_lossy(), true);
                }
            }
            status.await_all(first_new + k, &awaited);
        }
    }

    /// What `dpkg-trigger` queued in `triggers/Unincorp` from the unpack phase's scripts, as
    /// dpkg incorporates it after each script: each trigger activated, each awaiter left
    /// awaiting the packages it made pending.
    fn incorporate(&self, interests: &Interests, status: &mut Statuses<'_>) {
        let table = FileTable::new(&interests.file);
        for deferred in &interests.deferred {
            let activated: Vec<(&Interest, String)> = if deferred.trigger.starts_with('/') {
                let path = Path::new(&deferred.trigger);
                table
                    .at_or_above(path)
                    .map(|i| (i, i.path.to_string_lossy().into_owned()))
                    .collect()
            } else {
                let list = interests.explicit.get(&deferred.trigger).map(|(_, l)| l.as_slice());
                list.unwrap_or_default().iter().map(|i| (i, deferred.trigger.clone())).collect()
            };
            let mut pending = Vec::new();
            for (i, trigger) in activated {
                if status.pend(&i.package, &trigger) && !i.noawait {
                    pending.push(i.package.clone());
                }
            }
            for awaiter in &deferred.awaiters {
                if let Some(index) = status.find(awaiter) {
                    status.await_all(index, &pending);
                }
            }
        }
    }

    /// The trigger files that changed, through the transaction: `File`, the explicit triggers'
    /// files (one left empty is removed, as dpkg removes it), and `Unincorp`, left empty once
    /// incorporated, as dpkg leaves it (made with `triggers/` where the root has none: a dpkg
    /// that found it missing would make every installed package's interests pending).
    fn write_interests(&self, tx: &mut Transaction<'_>, interests: &Interests) -> Result<()> {
        let triggers_rel = self.admin.rel.join("triggers");
        let missing = self.installed.triggers_missing;
        if missing {
            self.make_triggers_dir(tx)?;
        }
        let file_after = triggers::write_interests(&interests.file, true);
        if file_after != interests.file_before {
            tx.add_generated(&triggers_rel.join("File"), &file_after, 0o644)?;
        }
        let mut emptied = Vec::new();
        for (name, (before, list)) in &interests.explicit {
            let after = triggers::write_interests(list, false);
            if after.is_empty() && !before.is_empty() {
                emptied.push(triggers_rel.join(name));
            } else if &after != before {
                tx.add_generated(&triggers_rel.join(name), &after, 0o644)?;
            }
        }
        if !missing && interests.unincorp_before.as_deref().is_none_or(|b| !b.is_empty()) {
            tx.add_generated(&triggers_rel.join("Unincorp"), b"", 0o644)?;
        }
        tx.plan_removals(emptied)
    }

    /// `triggers/` where the root has none, as dpkg makes it on its first run, with an empty
    /// `Unincorp`: a dpkg that found that missing would make every installed package's
    /// interests pending (src/main/trigproc.c's transitional activation).
    pub(super) fn make_triggers_dir(&self, tx: &mut Transaction<'_>) -> Result<()> {
        let triggers_rel = self.admin.rel.join("triggers");
        tx.add_generated_dir(&triggers_rel, 0o755)?;
        tx.add_generated(&triggers_rel.join("Unincorp"), b"", 0o644)
    }
}

/// The status stanzas the triggers change, indexed by package name.
struct Statuses<'s> {
    stanzas: &'s mut [Stanza],
    by_name: HashMap<String, Vec<usize>>,
    /// The stanzas [`Statuses::pend`] changed, by index, for the events after the commit.
    pended: Vec<usize>,
}

impl<'s> Statuses<'s> {
    fn new(stanzas: &'s mut [Stanza]) -> Statuses<'s> {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in stanzas.iter().enumerate() {
            by_name.entry(s.get("Package").unwrap_or_default().to_string()).or_default().push(i);
        }
        Statuses { stanzas, by_name, pended: Vec::new() }
    }

    /// The stanza of `who` (`NAME` or `NAME:ARCH`).
    fn find(&self, who: &str) -> Option<usize> {
        let (name, arch) = who.split_once(':').map_or((who, None), |(n, a)| (n, Some(a)));
        let candidates = self.by_name.get(name)?;
        candidates
            .iter()
            .copied()
            .find(|&i| arch.is_none_or(|a| self.stanzas[i].get("Architecture") == Some(a)))
    }

    /// Marks `who` as having `trigger` pending, as dpkg does for a package that is configured
    /// or already waits on triggers (the trigger put first, the package `triggers-pending`, or
    /// `triggers-awaited` if it awaits some itself): true when it did (false for a package in
    /// another state, which dpkg leaves for its configure).
    fn pend(&mut self, who: &str, trigger: &str) -> bool {
        let Some(i) = self.find(who) else { return false };
        let stanza = &mut self.stanzas[i];
        let Some(mut st) = stanza.get("Status").and_then(|v| StatusField::parse(v).ok()) else {
            return false;
        };
        if !matches!(st.state, State::Installed | State::TriggersPending | State::TriggersAwaited) {
            return false;
        }
        let mut pending: Vec<String> = stanza
            .get("Triggers-Pending")
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if !pending.iter().any(|p| p == trigger) {
            pending.insert(0, trigger.to_string());
            if !self.pended.contains(&i) {
                self.pended.push(i);
            }
        }
        status::set_known(stanza, "Triggers-Pending", pending.join(" "));
        if st.state == State::Installed {
            let awaits = stanza.get("Triggers-Awaited").is_some_and(|a| !a.trim().is_empty());
            st.state = if awaits { State::TriggersAwaited } else { State::TriggersPending };
            status::set_known(stanza, "Status", st.to_string());
        }
        true
    }

    /// Leaves the package of stanza `index` awaiting each of `packages` (appended, once
    /// each); a configured or pending one becomes `triggers-awaited`.
    fn await_all(&mut self, index: usize, packages: &[String]) {
        if packages.is_empty() {
            return;
        }
        let stanza = &mut self.stanzas[index];
        let mut awaited: Vec<String> = stanza
            .get("Triggers-Awaited")
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        for p in packages {
            if !awaited.contains(p) {
                awaited.push(p.clone());
            }
        }
        status::set_known(stanza, "Triggers-Awaited", awaited.join(" "));
        if let Some(mut st) = stanza.get("Status").and_then(|v| StatusField::parse(v).ok()) {
            if matches!(st.state, State::Installed | State::TriggersPending) {
                st.state = State::TriggersAwaited;
                status::set_known(stanza, "Status", st.to_string());
            }
        }
    }
}
