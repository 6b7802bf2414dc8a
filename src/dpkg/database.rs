//! The state of database mode for one call: the root's admin directory, locked and read
//! ([`Locked`], then [`Database`]), and the packages of the call as they are begun
//! ([`Incoming`]).
//!
//! Its behaviour lives with the concept each part belongs to: what `dpkg --unpack` does entry by
//! entry and what the transaction then writes ([`super::install`]), and the maintainer scripts
//! of the unpack phase ([`super::scripts::phase`]); each adds an `impl Database` of its own and
//! imports this file, which imports neither. Nothing here writes.

use super::admin::{self, Admin, Installed};
use super::depcon::Choices;
use super::format::deb822::Stanza;
use super::format::status::{Package, State};
use super::format::version::Relation;
use super::lock::{self, DpkgLocks};
use super::scripts::runner::{Call, Runner};
use crate::error::Result;
use crate::events::{self, Event, EventFn};
use crate::fs::root::Root;
use crate::options::PathFilter;
use crate::read::control::ControlArchive;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An installed package a package of the call deconfigures, by index, with the conflictor
/// whose removal is the reason (its prerm's `removing CONFLICTOR VERSION`).
pub(super) type Deconfigure = (usize, Option<usize>);

/// A package of the call.
pub(super) struct Incoming {
    /// Its file, which messages name.
    pub(super) package: PathBuf,
    pub(super) control: Stanza,
    pub(super) archive: ControlArchive,
    pub(super) name: String,
    pub(super) arch: String,
    pub(super) multi_arch_same: bool,
    /// The installed package it upgrades (or whose config files it finds), by index.
    pub(super) old: Option<usize>,
    /// The stanza its own replaces: `old`'s, or a `not-installed` one of its name and
    /// architecture.
    pub(super) slot: Option<usize>,
    /// The installed packages it deconfigures, as dpkg does (src/main/unpack.c): the other
    /// instances of a Multi-Arch: same set it takes out of sync, what it breaks, what the
    /// removal of a conflictor leaves without a dependency (that conflictor given); left
    /// `half-configured`, their `prerm deconfigure in-favour` run.
    pub(super) deconfigures: Vec<Deconfigure>,
    /// The installed packages it removes: they conflict with it and it replaces them
    /// ([`super::depcon`]), removed in its transaction ([`super::conflictors`]).
    pub(super) conflictors: Vec<usize>,
    /// Every path its `conffiles` member names, in order, `remove-on-upgrade` ones included.
    pub(super) conffiles: Vec<PathBuf>,
    /// Those marked `remove-on-upgrade`: never shipped, removed after the unpack.
    pub(super) remove_on_upgrade: HashSet<PathBuf>,
    pub(super) replaces: Vec<Relation>,
    /// The package's paths as dpkg lists them, in archive order.
    pub(super) list: Vec<PathBuf>,
    pub(super) listed: HashSet<PathBuf>,
    /// What each archive path was written as, when not itself (diverted, `.dpkg-new`): for
    /// hard links to such files.
    pub(super) written_as: HashMap<PathBuf, PathBuf>,
    /// Computed while writing when the package has no md5sums member.
    pub(super) md5sums: Option<Vec<(String, PathBuf)>>,
    /// Paths it lists that the path filters kept from being written ([`super::filter`]).
    pub(super) filtered: HashSet<PathBuf>,
    /// Paths it takes from other installed packages' lists.
    pub(super) taken: Vec<Taken>,
    /// Its conffiles an installed package that replaces it keeps: recorded obsolete, as dpkg
    /// records them, and not listed.
    pub(super) kept_conffiles: HashSet<PathBuf>,
    /// The calls that undo what its scripts did so far, in order (Policy 6.6's error
    /// unwinding), for when the call fails before its commit.
    pub(super) unwind: Vec<Call>,
    /// One of its scripts ran (database mode records a failure then, as dpkg does).
    pub(super) scripts_ran: bool,
}

/// A path a package of the call writes that an installed package lists: it leaves that
/// package's list when the call commits (dpkg's `FNNF_ELIDE_OTHER_LISTS`), and where the new
/// entry is a conffile, the other package's conffile of that path is marked obsolete.
pub(super) struct Taken {
    /// The installed package, by index.
    pub(super) from: usize,
    pub(super) path: PathBuf,
    /// By the new package's Replaces (dpkg says "Replacing files in old package"), not
    /// silently from a package with only config files left or from an obsolete conffile.
    pub(super) replaced: bool,
}

/// What the checks of a package against the root ([`super::admission`]) keep over a call.
#[derive(Default)]
pub(super) struct Admission {
    /// The root's architectures, read at the first package.
    pub(super) arches: Option<Arches>,
    /// The package file of the package begun last, for the messages.
    pub(super) package: PathBuf,
    /// The diversions by their divert-to names, for the package of that index: made again for
    /// each package, whose preinst may have added a diversion.
    pub(super) divert_to: Option<(usize, DivertTo)>,
}

/// The diversions by their divert-to name: where each comes from, and who made it (`None`: the
/// administrator).
pub(super) type DivertTo = HashMap<PathBuf, (PathBuf, Option<String>)>;

/// The architectures a root accepts besides `all`.
pub(super) struct Arches {
    /// From the root's `dpkg` package; `None`: the call's own.
    pub(super) native: Option<String>,
    pub(super) foreign: Vec<String>,
}

/// A root's admin directory found and locked with dpkg's locks, for the whole call: before
/// recovery (which may finish a transaction that changed the database), then read.
pub struct Locked {
    admin: Admin,
    locks: DpkgLocks,
}

impl Locked {
    /// Finds the root's database (`admindir`, or `ROOT/var/lib/dpkg` when it has a status
    /// file) and takes dpkg's locks. `None`: no database, an extraction only.
    pub fn find(root: &mut Root, admindir: Option<&Path>, wait: bool) -> Result<Option<Locked>> {
        let Some(admin) = admin::find(root, admindir)? else {
            return Ok(None);
        };
        let locks = lock::lock(&admin.dir, root.path(), wait)?;
        Ok(Some(Locked { admin, locks }))
    }

    /// The admin directory, found.
    pub(super) fn admin(&self) -> &Admin {
        &self.admin
    }

    /// Reads the database. What an earlier call that was killed left of the new scripts'
    /// directory (`tmp.ci.unpack-new`, the engine's, under dpkg's lock) is removed first: no
    /// script of one call is ever run as another's.
    pub fn read(self, root: &mut Root) -> Result<Database> {
        super::scripts::runner::remove_new(&self.admin.dir)?;
        let installed = self.admin.read(root)?;
        Ok(Database {
            admin: self.admin,
            _locks: self.locks,
            installed,
            incoming: Vec::new(),
            scripts: None,
            disappearing: Vec::new(),
            conflicted: Vec::new(),
            conflict_failed: Vec::new(),
            status: Vec::new(),
            events: None,
            pended: Vec::new(),
            filters: Vec::new(),
            choices: Choices::default(),
            admission: Admission::default(),
        })
    }
}

/// A root's database for the length of one call, locked and read.
pub struct Database {
    pub(super) admin: Admin,
    _locks: DpkgLocks,
    pub(super) installed: Installed,
    pub(super) incoming: Vec<Incoming>,
    /// Runs maintainer scripts; `None` with `--no-scripts`.
    pub(super) scripts: Option<Runner>,
    /// Installed packages that disappear (by index), with the package of the call that took
    /// their last file: their postrm is called `disappear` after the commit.
    pub(super) disappearing: Vec<(usize, usize)>,
    /// The conflictors the call removed, by index: true when left `config-files`, false when
    /// forgotten. Their `postrm remove` runs after the commit.
    pub(super) conflicted: Vec<(usize, bool)>,
    /// The conflictors whose `postrm remove` failed after the commit.
    pub(super) conflict_failed: Vec<usize>,
    /// The status file the transaction writes, once [`Database::finish`] made it.
    pub(super) status: Vec<Stanza>,
    /// Told each event (a dpkg front end's status-fd and log).
    pub(super) events: Option<Arc<EventFn>>,
    /// The installed packages the call made `triggers-pending`, for the events after the
    /// commit: (index, the state they reached).
    pub(super) pended: Vec<(usize, State)>,
    /// dpkg's path filters, in order.
    pub(super) filters: Vec<PathFilter>,
    /// What the caller's `--force-*` options and `--auto-deconfigure` allow.
    pub(super) choices: Choices,
    /// What the checks against the root keep over the call.
    pub(super) admission: Admission,
}

impl Database {
    /// Reads the database again for the next transaction of the call (dpkg's locks kept):
    /// what the last one committed, for the next package to see.
    pub fn refresh(&mut self, root: &mut Root) -> Result<()> {
        self.installed = self.admin.read(root)?;
        self.incoming.clear();
        self.disappearing.clear();
        self.conflicted.clear();
        self.conflict_failed.clear();
        self.status.clear();
        self.pended.clear();
        Ok(())
    }

    /// The admin directory's canonical path inside the root: no package writes a file there.
    pub fn admin_rel(&self) -> &Path {
        &self.admin.rel
    }

    /// How many packages the database lists as present in some state: not the `not-installed`
    /// ones a failed first install leaves, nor the `half-installed` ones an interrupted call
    /// recorded before their scripts ([`super::updates`]), whose files never got in.
    pub fn package_count(&self) -> usize {
        let present =
            |p: &&Package| !matches!(p.status.state, State::NotInstalled | State::HalfInstalled);
        self.installed.packages.iter().filter(present).count()
    }
}

impl Database {
    /// The `--force-*` options and `--auto-deconfigure` of the call, from now on.
    pub fn set_choices(&mut self, force: &crate::options::Force, auto_deconfigure: bool) {
        self.choices = Choices { force: *force, auto_deconfigure };
    }

    /// Tells the events of the call to `events` from now on.
    pub fn set_events(&mut self, events: Option<Arc<EventFn>>) {
        self.events = events;
    }

    /// dpkg's path filters of the call, from now on.
    pub fn set_filters(&mut self, filters: &[PathFilter]) {
        self.filters = filters.to_vec();
    }

    pub(super) fn emit(&self, event: Event) {
        if let Some(events) = &self.events {
            events(&event);
        }
    }

    /// A package of the database, as an event names it.
    fn installed_id(&self, o: usize) -> events::Package {
        let p = &self.installed.packages[o];
        events::Package::new(&p.name, &p.arch, p.multi_arch_same)
    }

    /// Package `index` of the call, as an event names it.
    fn incoming_id(&self, index: usize) -> events::Package {
        let inc = &self.incoming[index];
        events::Package::new(&inc.name, &inc.arch, inc.multi_arch_same)
    }

    fn status_event(&self, package: events::Package, state: State, version: &str) {
        let (state, version) = (state.word().to_string(), version.to_string());
        self.emit(Event::Status { package, state, version });
    }

    /// Package `index` of the call starts: `install`, or `upgrade` named as the installed
    /// instance is (its architecture's, in a cross-grade), as dpkg names it.
    pub(super) fn emit_unpacking(&self, index: usize) {
        let inc = &self.incoming[index];
        let upgraded =
            inc.old.filter(|&o| self.installed.packages[o].status.state != State::ConfigFiles);
        let old = upgraded.map(|o| self.installed.packages[o].version.clone());
        let package = upgraded.map_or_else(|| self.incoming_id(index), |o| self.installed_id(o));
        let version = inc.archive.control.version.clone();
        self.emit(Event::Unpacking { package, old, version });
    }

    /// What dpkg notes of package `index` and the packages it deconfigures before its files:
    /// a configured old version `half-configured` then `unpacked` (around its prerm), each
    /// deconfigured instance `half-configured`, then the package `half-installed`.
    pub(super) fn emit_before_files(&self, index: usize) {
        let inc = &self.incoming[index];
        if let Some(o) = inc.old {
            let old = &self.installed.packages[o];
            if configured(old.status.state) {
                for state in [State::HalfConfigured, State::Unpacked] {
                    self.status_event(self.installed_id(o), state, &old.version);
                }
            }
        }
        for &(d, _) in &inc.deconfigures {
            let version = &self.installed.packages[d].version;
            self.status_event(self.installed_id(d), State::HalfConfigured, version);
        }
        for &c in &inc.conflictors {
            let p = &self.installed.packages[c];
            if configured(p.status.state) {
                for state in [State::HalfConfigured, State::HalfInstalled] {
                    self.status_event(self.installed_id(c), state, &p.version);
                }
            }
        }
        let version =
            inc.old.map_or(&inc.archive.control.version, |o| &self.installed.packages[o].version);
        let package = inc.old.map_or_else(|| self.incoming_id(index), |o| self.installed_id(o));
        self.status_event(package, State::HalfInstalled, version);
    }

    /// The call failed before its commit: dpkg's error, which it reports before unwinding.
    pub fn emit_failed(&self, error: &crate::error::Error) {
        self.emit(Event::Failed { reason: crate::error::one_line(error) });
    }

    /// After a failed call was unwound and recorded: the states dpkg's unwinding notes, last
    /// package first (src/main/cleanup.c): a new package `not-installed`, one over config files
    /// `config-files`, an upgrade back to its old state (a configured one `unpacked`, then, once
    /// its postinst abort-upgrade ran, configured again), each conflictor it was removing and
    /// each package it deconfigured back to its state. The database holds the same: nothing of the call, or what
    /// [`Database::failure_state`] recorded.
    pub fn emit_unwound(&self) {
        for (index, inc) in self.incoming.iter().enumerate().rev() {
            let old = inc.old.map(|o| (o, &self.installed.packages[o]));
            let back = |o: usize, state: State| {
                self.status_event(self.installed_id(o), state, &self.installed.packages[o].version)
            };
            match old {
                None => self.status_event(self.incoming_id(index), State::NotInstalled, ""),
                Some((o, p)) if configured(p.status.state) => back(o, State::Unpacked),
                Some((_, p)) if p.status.state == State::HalfInstalled => {}
                Some((o, p)) => back(o, p.status.state),
            }
            // A conflictor is noted only when its prerm ran (it was configured), as above.
            for &c in inc.conflictors.iter().rev() {
                let state = self.installed.packages[c].status.state;
                if configured(state) {
                    back(c, state);
                }
            }
            for &(d, _) in inc.deconfigures.iter().rev() {
                back(d, self.installed.packages[d].status.state);
            }
            if let Some((o, p)) = old.filter(|(_, p)| configured(p.status.state)) {
                back(o, p.status.state);
            }
        }
    }

    /// After both postrms of the upgrades `failed` failed behind the commit: the error, then
    /// those packages `half-installed`, as [`Database::postrm_failure_state`] records them.
    pub fn emit_postrm_failed(&self, failed: &[usize], error: &crate::error::Error) {
        self.emit_failed(error);
        for &index in failed {
            let version = &self.incoming[index].archive.control.version;
            self.status_event(self.incoming_id(index), State::HalfInstalled, version);
        }
    }

    /// What dpkg notes once the call's packages are in place: the packages it made
    /// triggers-pending, the packages that disappeared (`not-installed`), and each package of
    /// the call `unpacked`.
    pub fn emit_committed(&self) {
        for &(o, state) in &self.pended {
            self.status_event(self.installed_id(o), state, &self.installed.packages[o].version);
        }
        for &(o, _) in &self.disappearing {
            let version = self.installed.packages[o].version.clone();
            self.emit(Event::Disappeared { package: self.installed_id(o), version });
            // Its record blanked, as dpkg blanks it: no version.
            self.status_event(self.installed_id(o), State::NotInstalled, "");
        }
        for (index, inc) in self.incoming.iter().enumerate() {
            self.status_event(
                self.incoming_id(index),
                State::Unpacked,
                &inc.archive.control.version,
            );
        }
        for &(c, kept) in &self.conflicted {
            let p = &self.installed.packages[c];
            if !configured(p.status.state) && p.status.state != State::HalfInstalled {
                self.status_event(self.installed_id(c), State::HalfInstalled, &p.version);
            }
            let state = if kept { State::ConfigFiles } else { State::NotInstalled };
            self.status_event(self.installed_id(c), state, &p.version);
        }
    }
}

/// A state in which dpkg runs a package's prerm before it upgrades, deconfigures or removes it.
pub(super) fn configured(state: State) -> bool {
    matches!(
        state,
        State::HalfConfigured | State::TriggersAwaited | State::TriggersPending | State::Installed
    )
}
