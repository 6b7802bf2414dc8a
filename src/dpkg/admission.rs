//! Whether a root admits a package: the checks `dpkg --unpack` makes of a package against what
//! the root holds, each a conflict with the root (exit 1), and the checks of a package that need
//! the package's entries (exit 3).
//!
//! Against the root, with dpkg's verdicts and messages:
//! - **architecture** (src/main/unpack.c process_archive): `all`, the root's native
//!   architecture, or a foreign one the admin directory's `arch` file lists (`dpkg
//!   --add-architecture`). The native one is the `Architecture` of the root's installed `dpkg`
//!   package; a root without one (`--bootstrap`'s, or one being built from outside) has the
//!   call's own: its first package that is not `Architecture: all`. Never the host's: the root
//!   may be a foreign architecture's image. dpkg's `--force-architecture` lets it through.
//! - **co-installability** (lib/dpkg/parse.c parse_find_pkg_slot): a package that is not
//!   `Multi-Arch: same` while its name has several installed instances.
//! - **another package's divert-to name** (src/main/archives.c tarobject): a path that a
//!   diversion sends another path to ("trying to overwrite '%s', which is the diverted version
//!   of '%s'"); dpkg's `--force-overwrite-diverted` lets it through.
//!
//! Of the package, per entry: a directory its `conffiles` member lists is refused (exit 3):
//! dpkg unpacks it and then cannot configure it, a stricter verdict documented in
//! docs/database.md.
//!
//! Every check comes before the package's first file is written, the architecture and
//! co-installability before its maintainer scripts run. This module never writes, and reads
//! only the admin directory's `arch` file, through the root's confined resolution
//! ([`admin::read_file`]); what it reads is attacker input like any file of the root.

use super::admin;
use super::database::{Arches, Database};
use super::format::deb822::Stanza;
use super::format::status::State;
use super::format::triggers;
use crate::error::{escape, Error, Result};
use crate::events::Event;
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use std::path::Path;

/// The most bytes of `arch` read (dpkg's has a line per architecture).
const MAX_ARCH_FILE: u64 = 1 << 20;

impl Database {
    /// The checks of a package begun (`control`, its stanza as [`admin::control_stanza`] checked
    /// it, from `archive`) against the root; dpkg's warnings about its control file told as notices.
    pub(super) fn admit(
        &mut self,
        package: &Path,
        control: &Stanza,
        archive: &ControlArchive,
    ) -> Result<()> {
        self.admission.package = package.to_path_buf();
        for warning in admin::control_checked(package, &archive.text)?.warnings {
            let message = format!("warning: {}: control: {warning}", escape(package));
            self.emit(Event::Notice { message });
        }
        // dpkg reads the triggers member before the preinst (lib/dpkg/triglib.c trig_parse_ci).
        if let Some(m) = archive.members.iter().find(|m| m.name == "triggers") {
            triggers::parse_member(&m.bytes)
                .map_err(|e| Error::bad(package, format!("triggers: {e}")))?;
        }
        let field = |name: &str| control.get(name).unwrap_or_default();
        let (name, arch) = (field("Package").to_ascii_lowercase(), field("Architecture"));
        let multi_arch = match field("Multi-Arch").to_ascii_lowercase() {
            m if m.is_empty() => "no".to_string(),
            m => m,
        };
        let instances = self
            .installed
            .packages
            .iter()
            .filter(|p| p.name == name && p.status.state != State::NotInstalled)
            .count();
        if instances > 1 && multi_arch != "same" {
            return Err(self.conflict(format!(
                "package {name}:{arch} ({}) with field 'Multi-Arch: {multi_arch}' is not co-installable with {name} which has multiple installed instances",
                field("Version")
            )));
        }
        self.admit_arch(arch)
    }

    fn admit_arch(&mut self, arch: &str) -> Result<()> {
        if self.admission.arches.is_none() {
            self.admission.arches = Some(self.arches()?);
        }
        let Some(arches) = &self.admission.arches else { return Ok(()) };
        let native = self.native_arch(arch);
        if arch == "all" || arch == native || arches.foreign.iter().any(|f| f == arch) {
            return Ok(());
        }
        let foreign = match arches.foreign.as_slice() {
            [] => "none".to_string(),
            f => f.join(", "),
        };
        let why = format!(
            "package architecture ({}) does not match the root's ({native}; foreign: {foreign}); `dpkg --add-architecture` in the root enables another",
            escape(arch)
        );
        if self.choices.force.architecture {
            let message = format!("warning: {}: {why} (forced)", escape(&self.admission.package));
            self.emit(Event::Notice { message });
            return Ok(());
        }
        Err(self.conflict(why))
    }

    /// The root's native architecture: its installed `dpkg`'s, read by [`Database::admit`];
    /// in a root without one, the call's own, its first package (`arch`, the one begun) that
    /// is not `all`.
    pub(super) fn native_arch(&self, arch: &str) -> String {
        let call_own = || {
            let begun = self.incoming.iter().map(|i| i.arch.as_str());
            begun.chain([arch]).find(|a| *a != "all").unwrap_or("all").to_string()
        };
        let root_own = self.admission.arches.as_ref().and_then(|a| a.native.clone());
        root_own.unwrap_or_else(call_own)
    }

    /// The root's native architecture (its `dpkg`'s) and foreign ones (`arch`).
    fn arches(&self) -> Result<Arches> {
        let status = self.admin.dir.path().join("status");
        let dpkg = self.installed.packages.iter().find(|p| {
            p.name == "dpkg" && !matches!(p.status.state, State::NotInstalled | State::ConfigFiles)
        });
        let native = match dpkg {
            Some(p) if p.arch.is_empty() || p.arch == "all" || p.arch == "any" => {
                return Err(admin::bad_db(
                    &status,
                    format!("dpkg's own Architecture '{}' names no machine", escape(&p.arch)),
                ))
            }
            Some(p) => Some(p.arch.clone()),
            None => None,
        };
        let path = self.admin.dir.path().join("arch");
        let foreign = match admin::read_file(&self.admin.dir, "arch", MAX_ARCH_FILE)? {
            Some(bytes) => {
                super::format::arch::parse(&bytes).map_err(|e| admin::bad_db(&path, e))?
            }
            None => Vec::new(),
        };
        let foreign = foreign
            .into_iter()
            .filter(|a| a != "all" && a != "any" && Some(a) != native.as_ref())
            .collect();
        Ok(Arches { native, foreign })
    }

    /// The checks of one entry of the package begun last, `listed` its path as dpkg lists it.
    pub(super) fn admit_entry(&mut self, entry: &Entry, listed: &Path) -> Result<()> {
        let index = self.incoming.len();
        let Some(inc) = self.incoming.last() else { return Ok(()) };
        if entry.kind == Kind::Dir && inc.conffiles.iter().any(|c| c == listed) {
            return Err(Error::bad(
                &self.admission.package,
                format!(
                    "conffiles: '{}' is a directory in the package; dpkg could not configure it",
                    escape(listed)
                ),
            ));
        }
        if self.admission.divert_to.as_ref().is_none_or(|(i, _)| *i != index) {
            let by_to = self
                .installed
                .diversions
                .values()
                .map(|d| (d.to.clone(), (d.from.clone(), d.by.clone())));
            self.admission.divert_to = Some((index, by_to.collect()));
        }
        let Some((from, by)) = self.admission.divert_to.as_ref().and_then(|(_, m)| m.get(listed))
        else {
            return Ok(());
        };
        let by = by.as_ref().map_or(String::new(), |p| format!(" (package: {p})"));
        let why = format!(
            "trying to overwrite '{}', which is the diverted version of '{}'{by}",
            escape(listed),
            escape(from)
        );
        if self.choices.force.overwrite_diverted {
            let message = format!("warning: {}: {why} (forced)", escape(&self.admission.package));
            self.emit(Event::Notice { message });
            return Ok(());
        }
        let inc = &self.incoming[index - 1];
        Err(Error::Conflict {
            path: listed.to_path_buf(),
            reason: format!(
                "{why}: {} ({} {}) conflicts with the root",
                escape(&self.admission.package),
                inc.name,
                inc.archive.control.version
            ),
        })
    }

    /// A conflict of the package begun last with the root, naming its file.
    fn conflict(&self, why: String) -> Error {
        Error::Conflict {
            path: self.admission.package.clone(),
            reason: format!("{why}: the package conflicts with the root"),
        }
    }
}
