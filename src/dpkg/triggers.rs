//! Triggers at unpack, as dpkg records them (lib/dpkg/triggers.c, src/main/trigproc.c): the
//! interests the call's packages declare replace their old versions' in `triggers/File` and
//! the explicit triggers' files, and every path the call writes or drops, and every `activate`
//! directive, marks the interested installed packages `triggers-pending` (the new package
//! awaiting them unless the interest is `noawait`).
//!
//! Part of database mode's [`Database`]: it reads the trigger files through the admin
//! directory's confined handles and hands what changed to the transaction; it never writes a
//! name itself.

use super::admin;
use super::database::Database;
use super::format::deb822::Stanza;
use super::format::status::{self, State, StatusField};
use super::format::triggers::{self, Directive, Interest};
use super::format::ParseError;
use crate::durability::Directory;
use crate::error::{Error, Result};
use crate::txn::transaction::Transaction;
use std::collections::btree_map::{self, BTreeMap};
use std::path::{Path, PathBuf};

/// The interests of the admin directory's `triggers/`, read, and as the call changes them.
struct Interests {
    /// `triggers/File` as it was, and its interests.
    file_before: Vec<u8>,
    file: Vec<Interest>,
    /// The explicit triggers' files the call touches, by name: as they were, and their
    /// interests.
    explicit: BTreeMap<String, (Vec<u8>, Vec<Interest>)>,
}

impl Database {
    /// Triggers as dpkg records them at unpack: the packages' interests into `triggers/File`
    /// and the explicit triggers' files, and the activations by the paths written and `dropped`
    /// (by package name) and by the packages' own `activate` directives into `stanzas` (the new
    /// packages' from `first_new` on, in call order).
    pub(super) fn record_triggers(
        &self,
        tx: &mut Transaction<'_>,
        stanzas: &mut [Stanza],
        first_new: usize,
        dropped: &[(String, PathBuf)],
    ) -> Result<()> {
        let dir = self.triggers_dir()?;
        let directives: Vec<Vec<Directive>> = self
            .incoming
            .iter()
            .map(|inc| match inc.archive.members.iter().find(|m| m.name == "triggers") {
                Some(m) => triggers::parse_member(&m.bytes)
                    .map_err(|e| Error::bad(Path::new(&inc.name), format!("triggers: {e}"))),
                None => Ok(Vec::new()),
            })
            .collect::<Result<_>>()?;
        let mut interests = self.read_interests(dir.as_ref(), &directives)?;
        self.replace_interests(&mut interests, &directives);
        self.activate(&interests, &directives, stanzas, first_new, dropped);
        self.write_interests(tx, &interests)
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

    /// `triggers/File`, and the explicit triggers' files a new package names (to change or to
    /// activate) or its old version did (to drop the old interest).
    fn read_interests(
        &self,
        dir: Option<&Directory>,
        directives: &[Vec<Directive>],
    ) -> Result<Interests> {
        let read = |name: &str| -> Result<Vec<u8>> {
            match dir {
                Some(d) => Ok(admin::read_file(d, name, 16 << 20)?.unwrap_or_default()),
                None => Ok(Vec::new()),
            }
        };
        let bad = |name: &str, e: ParseError| {
            admin::bad_db(&self.admin.dir.path().join("triggers").join(name), e)
        };
        let file_before = read("File")?;
        let file = triggers::parse_file_interests(&file_before).map_err(|e| bad("File", e))?;
        let mut names: Vec<String> =
            directives.iter().flatten().filter(|d| !d.is_file()).map(|d| d.name.clone()).collect();
        for inc in &self.incoming {
            let Some(o) = inc.old else { continue };
            let old_file = format!("{}.triggers", self.installed.packages[o].info_name());
            if let Some(bytes) = admin::read_file(&self.admin.info, &old_file, 16 << 20)? {
                let old = triggers::parse_member(&bytes)
                    .map_err(|e| admin::bad_db(&self.admin.info.path().join(&old_file), e))?;
                names
                    .extend(old.into_iter().filter(|d| d.interest && !d.is_file()).map(|d| d.name));
            }
        }
        let mut explicit = BTreeMap::new();
        for name in names {
            if let btree_map::Entry::Vacant(slot) = explicit.entry(name) {
                let bytes = read(slot.key())?;
                let parsed = triggers::parse_explicit(&bytes).map_err(|e| bad(slot.key(), e))?;
                slot.insert((bytes, parsed));
            }
        }
        Ok(Interests { file_before, file, explicit })
    }

    /// Each new package's interests replace its old version's.
    fn replace_interests(&self, interests: &mut Interests, directives: &[Vec<Directive>]) {
        for (inc, dirs) in self.incoming.iter().zip(directives) {
            let who = status::info_name(&inc.name, &inc.arch, inc.multi_arch_same);
            let old = inc.old.map(|o| self.installed.packages[o].info_name());
            let mine = |p: &str| p == who || Some(p) == old.as_deref();
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

    /// The activations: by the paths each new package writes or its upgrade drops, and by its
    /// explicit `activate` directives.
    fn activate(
        &self,
        interests: &Interests,
        directives: &[Vec<Directive>],
        stanzas: &mut [Stanza],
        first_new: usize,
        dropped: &[(String, PathBuf)],
    ) {
        for (k, (inc, dirs)) in self.incoming.iter().zip(directives).enumerate() {
            let mut awaited: Vec<String> = Vec::new();
            let touched = inc
                .list
                .iter()
                .chain(dropped.iter().filter(|(by, _)| *by == inc.name).map(|(_, p)| p));
            for path in touched {
                for i in interests.file.iter().filter(|i| triggers::activates(&i.path, path)) {
                    let trigger = i.path.to_string_lossy();
                    if pend(stanzas, &i.package, &trigger)
                        && !i.noawait
                        && !awaited.contains(&i.package)
                    {
                        awaited.push(i.package.clone());
                    }
                }
            }
            for d in dirs.iter().filter(|d| !d.interest && !d.is_file()) {
                for i in interests.explicit.get(&d.name).map(|(_, l)| l.clone()).unwrap_or_default()
                {
                    pend(stanzas, &i.package, &d.name);
                }
            }
            if !awaited.is_empty() {
                status::set_known(
                    &mut stanzas[first_new + k],
                    "Triggers-Awaited",
                    awaited.join(" "),
                );
            }
        }
    }

    /// The interest files that changed, through the transaction.
    fn write_interests(&self, tx: &mut Transaction<'_>, interests: &Interests) -> Result<()> {
        let triggers_rel = self.admin.rel.join("triggers");
        let file_after = triggers::write_interests(&interests.file, true);
        if file_after != interests.file_before {
            tx.add_generated(&triggers_rel.join("File"), &file_after, 0o644)?;
        }
        for (name, (before, list)) in &interests.explicit {
            let after = triggers::write_interests(list, false);
            if &after != before && !after.is_empty() {
                tx.add_generated(&triggers_rel.join(name), &after, 0o644)?;
            }
        }
        Ok(())
    }
}

/// Marks the installed package `who` (`NAME` or `NAME:ARCH`) of `stanzas` as having `trigger`
/// pending, as dpkg does for a package that is configured or already waits on triggers: true
/// when it did (false for a package in another state, which dpkg leaves for its configure).
fn pend(stanzas: &mut [Stanza], who: &str, trigger: &str) -> bool {
    let (name, arch) = who.split_once(':').map_or((who, None), |(n, a)| (n, Some(a)));
    let Some(i) = stanzas.iter().position(|s| {
        s.get("Package") == Some(name) && arch.is_none_or(|a| s.get("Architecture") == Some(a))
    }) else {
        return false;
    };
    let Some(mut st) = stanzas[i].get("Status").and_then(|v| StatusField::parse(v).ok()) else {
        return false;
    };
    if !matches!(st.state, State::Installed | State::TriggersPending | State::TriggersAwaited) {
        return false;
    }
    let mut pending: Vec<String> = stanzas[i]
        .get("Triggers-Pending")
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if !pending.iter().any(|p| p == trigger) {
        pending.push(trigger.to_string());
    }
    status::set_known(&mut stanzas[i], "Triggers-Pending", pending.join(" "));
    if st.state == State::Installed {
        st.state = State::TriggersPending;
        status::set_known(&mut stanzas[i], "Status", st.to_string());
    }
    true
}
