//! The state of database mode for one call: the root's admin directory, locked and read
//! ([`Locked`], then [`Database`]), and the packages of the call as they are begun
//! ([`Incoming`]).
//!
//! Its behaviour lives with the concept each part belongs to: what `dpkg --unpack` does entry by
//! entry and what the transaction then writes ([`super::install`]), and the maintainer scripts
//! of the unpack phase ([`super::scripts::phase`]); each adds an `impl Database` of its own and
//! imports this file, which imports neither. Nothing here writes.

use super::admin::{self, Admin, Installed};
use super::format::deb822::Stanza;
use super::format::status::State;
use super::format::version::Relation;
use super::lock::{self, DpkgLocks};
use super::scripts::runner::{Call, Runner};
use crate::error::Result;
use crate::fs::root::Root;
use crate::options::Force;
use crate::read::control::ControlArchive;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A package of the call.
pub(super) struct Incoming {
    pub(super) control: Stanza,
    pub(super) archive: ControlArchive,
    pub(super) name: String,
    pub(super) arch: String,
    pub(super) multi_arch_same: bool,
    /// The installed package it upgrades (or whose config files it finds), by index.
    pub(super) old: Option<usize>,
    pub(super) conffiles: Vec<PathBuf>,
    pub(super) replaces: Vec<Relation>,
    /// The package's paths as dpkg lists them, in archive order.
    pub(super) list: Vec<PathBuf>,
    pub(super) listed: HashSet<PathBuf>,
    /// What each archive path was written as, when not itself (diverted, `.dpkg-new`): for
    /// hard links to such files.
    pub(super) written_as: HashMap<PathBuf, PathBuf>,
    /// Computed while writing when the package has no md5sums member.
    pub(super) md5sums: Option<Vec<(String, PathBuf)>>,
    /// Paths taken over from other installed packages, by their index.
    pub(super) taken: Vec<(usize, PathBuf)>,
    /// The calls that undo what its scripts did so far, in order (Policy 6.6's error
    /// unwinding), for when the call fails before its commit.
    pub(super) unwind: Vec<Call>,
    /// One of its scripts ran (database mode records a failure then, as dpkg does).
    pub(super) scripts_ran: bool,
}

/// What the checks of a package against the root ([`super::admission`]) keep over a call.
#[derive(Default)]
pub(super) struct Admission {
    /// dpkg's `--force-*` options that turn these refusals into warnings.
    pub(super) force: Force,
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

    /// Reads the database; `force`: the refusals dpkg's `--force-*` options let through.
    pub fn read(self, root: &mut Root, force: Force) -> Result<Database> {
        let installed = self.admin.read(root)?;
        Ok(Database {
            admin: self.admin,
            _locks: self.locks,
            installed,
            incoming: Vec::new(),
            scripts: None,
            disappearing: Vec::new(),
            status: Vec::new(),
            admission: Admission { force, ..Admission::default() },
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
    /// The status file the transaction writes, once [`Database::finish`] made it.
    pub(super) status: Vec<Stanza>,
    /// What the checks against the root keep over the call.
    pub(super) admission: Admission,
}

impl Database {
    /// The admin directory's canonical path inside the root: no package writes a file there.
    pub fn admin_rel(&self) -> &Path {
        &self.admin.rel
    }

    /// How many packages the database lists as present in some state (`not-installed` ones,
    /// which a failed first install leaves, are not).
    pub fn package_count(&self) -> usize {
        self.installed.packages.iter().filter(|p| p.status.state != State::NotInstalled).count()
    }
}
