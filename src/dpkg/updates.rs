//! dpkg's journal of status changes, `ADMIN/updates/`: before a maintainer script of a package
//! runs, its state is recorded durably there as dpkg records it (lib/dpkg/dbmodify.c
//! `modstatdb_note`: the package's whole stanza, one file a record, numbered), so that a crash
//! while the script runs, or after it and before the commit, leaves the database saying what
//! dpkg's would (`reinstreq half-configured` before an old prerm, `reinstreq half-installed`
//! before a new preinst): `dpkg --audit` names the package and a re-run finishes it. dpkg, and
//! this engine ([`super::admin`]), read the records over `status`; the transaction that next
//! writes `status` removes them.
//!
//! A record is written at once ([`crate::fs::file::write_durably`]), outside the transaction: it
//! must be on disk before the script runs, and outlive a rollback. This module only writes records
//! of the call's own packages, in the admin directory's `updates/`, never anything else.

use super::database::Database;
use super::format::deb822::{Field, Stanza};
use super::format::status::{self, Flag, Package, State, StatusField, Want};
use crate::error::{Error, Result};
use crate::fs::syscalls::Syscalls;
use crate::txn::transaction::Transaction;
use std::path::PathBuf;

/// The width of the numbers dpkg gives its records (`%04d`).
const WIDTH: usize = 4;

impl Database {
    /// Records the installed version of package `index` of the call as `install reinstreq
    /// half-configured`: before its prerm runs (dpkg's unpack.c, before `prerm upgrade`).
    pub(super) fn note_half_configured(
        &mut self,
        tx: &Transaction<'_>,
        index: usize,
    ) -> Result<()> {
        let Some(o) = self.incoming[index].old else { return Ok(()) };
        let stanza = noted(&self.installed.packages[o], State::HalfConfigured);
        self.note(tx.durable(), tx.calls(), &stanza)
    }

    /// Records installed package `o` in `state`, its want and flag as they are: a package the
    /// call deconfigures (`half-configured` before its prerm), or a conflictor it removes
    /// (`half-configured` before its prerm, `half-installed` after it), as dpkg notes them.
    pub(super) fn note_other(
        &mut self,
        tx: &Transaction<'_>,
        o: usize,
        state: State,
    ) -> Result<()> {
        let old = &self.installed.packages[o];
        let mut stanza = old.stanza.clone();
        if let Some(version) = old.config_version() {
            status::set_known(&mut stanza, "Config-Version", version.to_string());
        }
        status::set_known(&mut stanza, "Status", StatusField { state, ..old.status }.to_string());
        self.note(tx.durable(), tx.calls(), &stanza)
    }

    /// Records package `index` of the call as `install reinstreq half-installed`: before its
    /// new preinst runs. An upgrade (or a package with only config files left) keeps its
    /// installed fields; a new package is recorded with the few fields dpkg gives it then
    /// (Package, Priority, Section, Architecture, Multi-Arch, Version).
    pub(super) fn note_half_installed(&mut self, tx: &Transaction<'_>, index: usize) -> Result<()> {
        let inc = &self.incoming[index];
        let old = inc.old.map(|o| &self.installed.packages[o]);
        let stanza = match old.filter(|o| o.status.state != State::NotInstalled) {
            Some(old) => noted(old, State::HalfInstalled),
            None => {
                let fields = ["Package", "Priority", "Section", "Architecture", "Multi-Arch"]
                    .into_iter()
                    .chain(["Version"])
                    .filter_map(|name| {
                        inc.control.get(name).map(|v| Field { name: name.into(), value: v.into() })
                    })
                    .collect();
                let mut stanza = Stanza { fields, line: 0 };
                set_status(&mut stanza, State::HalfInstalled);
                stanza
            }
        };
        self.note(tx.durable(), tx.calls(), &stanza)
    }

    /// Records each installed package of `packages` (`NAME VERSION`, as a journal names them)
    /// `install reinstreq half-installed`: a dropped transaction (`--recover --discard`) may
    /// have left them part old, part new, for dpkg --audit to name and a reinstall to repair.
    pub fn note_interrupted(
        &mut self,
        packages: &[String],
        durable: bool,
        calls: &Syscalls,
    ) -> Result<()> {
        let names: Vec<&str> = packages.iter().filter_map(|p| p.split(' ').next()).collect();
        let stanzas: Vec<Stanza> = self
            .installed
            .packages
            .iter()
            .filter(|p| names.contains(&p.name.as_str()) && p.status.state != State::NotInstalled)
            .map(|p| noted(p, State::HalfInstalled))
            .collect();
        for stanza in &stanzas {
            self.note(durable, calls, stanza)?;
        }
        Ok(())
    }

    /// Writes `stanza` as the next record of `updates/`, made if missing, flushed when
    /// `durable`.
    fn note(&mut self, durable: bool, calls: &Syscalls, stanza: &Stanza) -> Result<()> {
        let dir = crate::fs::root::open_or_make_dir(&self.admin.dir, "updates")?;
        let records = &mut self.installed.records;
        let next = records.last().map_or(Ok(0), |last| {
            last.parse::<u64>().map(|n| n + 1).map_err(|_| {
                Error::Internal(format!("a record of updates/ named {last} is not a number"))
            })
        })?;
        let width = records.first().map_or(WIDTH, String::len);
        let name = format!("{next:0width$}");
        if name.len() != width {
            return Err(super::admin::bad_db(
                &dir.path().join(&name),
                "updates/ holds as many records as its names can number: run dpkg --configure -a",
            ));
        }
        let mut bytes = Vec::new();
        stanza.write_to(&mut bytes);
        crate::fs::file::write_durably(&dir, &name, &bytes, durable, calls)?;
        records.push(name);
        Ok(())
    }

    /// The records of `updates/` (read and written), relative to the root: the transaction
    /// that writes `status` removes them.
    pub(super) fn record_paths(&self) -> Vec<PathBuf> {
        let updates = self.admin.rel.join("updates");
        self.installed.records.iter().map(|r| updates.join(r)).collect()
    }
}

/// The installed package `old`'s stanza as dpkg notes it in `state`: its Status `install
/// reinstreq STATE`, and the version its configuration is of (`Config-Version`), which dpkg
/// keeps apart from `Version` in every state but installed.
fn noted(old: &Package, state: State) -> Stanza {
    let mut stanza = old.stanza.clone();
    if let Some(version) = old.config_version() {
        status::set_known(&mut stanza, "Config-Version", version.to_string());
    }
    set_status(&mut stanza, state);
    stanza
}

/// `stanza`'s Status made `install reinstreq STATE`, as dpkg notes a package before a script.
fn set_status(stanza: &mut Stanza, state: State) {
    let status = StatusField { want: Want::Install, flag: Flag::Reinstreq, state };
    status::set_known(stanza, "Status", status.to_string());
}
