//! The removal of a conflicting package a package of the call replaces (dpkg's "conflictor":
//! `Conflicts` and `Replaces`, the way a package is renamed, as trixie's 64-bit time_t
//! libraries replace bookworm's), done in the transaction that unpacks its replacement, as
//! dpkg does it after the unpack (src/main/remove.c removal_bulk): its files go, but its
//! conffiles, the directories others use or its conffiles are in, and what the new package
//! took over; its info files go but its list (now of what is left) and postrm; it is left
//! `config-files`, or, with neither conffiles nor a postrm, forgotten. Its `postrm remove`
//! runs after the commit ([`crate::dpkg::scripts`]).
//!
//! So after any crash and recovery the conflictor is as it was, or removed with its
//! replacement unpacked: never half removed. This module only decides what the transaction
//! removes and writes; it writes nothing itself.

use super::admin;
use super::database::Database;
use super::format::deb822::Stanza;
use super::format::list;
use super::format::status::{self, State, StatusField};
use super::install::{divert, relative, Finished};
use crate::error::Result;
use crate::txn::transaction::Transaction;
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

impl Database {
    /// Every conflictor of the call, removed through `tx`: its paths to remove, its info files,
    /// its new stanza (`None`: forgotten) into `done`. `all_new` are the paths the call's
    /// packages list.
    pub(super) fn remove_conflictors(
        &self,
        tx: &mut Transaction<'_>,
        all_new: &HashSet<&PathBuf>,
        done: &mut Finished,
    ) -> Result<()> {
        for c in self.incoming.iter().flat_map(|i| i.conflictors.iter().copied()) {
            let conffiles = self.conffiles_of(c)?;
            let left = self.remove_files(tx, c, &conffiles, all_new, done)?;
            let p = &self.installed.packages[c];
            let info_rel = self.admin.rel.join("info");
            let stem = p.info_name();
            let has_postrm =
                self.installed.info_names.iter().any(|n| *n == format!("{stem}.postrm"));
            let forgotten = conffiles.is_empty() && !has_postrm;
            for n in &self.installed.info_names {
                let Some((owner, kind)) = n.rsplit_once('.') else { continue };
                if owner == stem && (forgotten || !matches!(kind, "list" | "postrm")) {
                    done.removals.push(info_rel.join(n));
                }
            }
            if forgotten {
                done.conflicted.push((c, None));
                continue;
            }
            tx.add_generated(
                &info_rel.join(format!("{stem}.list")),
                &list::write_list(&left),
                0o644,
            )?;
            done.conflicted.push((c, Some(removed_stanza(p))));
        }
        Ok(())
    }

    /// The paths installed package `c` records as its conffiles, obsolete ones included.
    fn conffiles_of(&self, c: usize) -> Result<HashSet<PathBuf>> {
        let Some(field) = self.installed.packages[c].stanza.get("Conffiles") else {
            return Ok(HashSet::new());
        };
        let parsed = status::parse_conffiles_field(field)
            .map_err(|e| admin::bad_db(&self.admin.dir.path().join("status"), e))?;
        Ok(parsed.into_iter().map(|c| c.path).collect())
    }

    /// Conflictor `c`'s listed paths, last first, as dpkg removes them
    /// (removal_bulk_remove_files): a path another package of the call now lists, or a file a
    /// Multi-Arch: same sibling shares, is only forgotten; a conffile, a directory holding a
    /// conffile or a path left, `/.`, and a directory that would not be empty are left and
    /// listed; a directory another package lists is forgotten; everything else is removed
    /// (a directory once empty), its `.dpkg-new` and `.dpkg-tmp` with it. Returns what is
    /// left, in list order.
    fn remove_files(
        &self,
        tx: &mut Transaction<'_>,
        c: usize,
        conffiles: &HashSet<PathBuf>,
        all_new: &HashSet<&PathBuf>,
        done: &mut Finished,
    ) -> Result<Vec<PathBuf>> {
        let db = &self.installed;
        let p = &db.packages[c];
        let mut left: Vec<PathBuf> = Vec::new();
        // On-disk paths (relative) this removal takes away, for the emptiness of directories.
        let mut going: HashSet<PathBuf> = HashSet::new();
        let owners = |path: &Path| db.owners_of(path);
        for path in db.lists[c].iter().rev() {
            if all_new.contains(path) {
                continue;
            }
            let at = relative(&divert(db, path, &p.name));
            let is_dir = tx.leads_to_dir(&at);
            let shared = owners(path).iter().any(|&o| {
                o != c && db.packages[o].name == p.name && db.packages[o].multi_arch_same
            });
            if !is_dir && shared {
                continue;
            }
            let root = path.as_os_str() == "/.";
            // dpkg compares names: `/.` holds nothing by name.
            let holds = |x: &PathBuf| !root && x.starts_with(path) && x != path;
            if conffiles.contains(path)
                || (is_dir && (conffiles.iter().any(holds) || left.iter().any(holds)))
            {
                left.insert(0, path.clone());
                continue;
            }
            if is_dir && owners(path).iter().any(|&o| o != c) {
                continue;
            }
            if root {
                left.insert(0, path.clone());
                continue;
            }
            if is_dir && !self.empties(tx, &at, &going)? {
                left.insert(0, path.clone());
                continue;
            }
            done.conflict_removed.push(path.clone());
            for suffix in [".dpkg-new", ".dpkg-tmp"] {
                let mut name = at.clone().into_os_string();
                name.push(suffix);
                done.removals.push(PathBuf::from(name));
            }
            done.removals.push(at.clone());
            going.insert(at);
        }
        Ok(left)
    }

    /// Whether the directory at `at` holds nothing but what `going` takes away.
    fn empties(
        &self,
        tx: &mut Transaction<'_>,
        at: &Path,
        going: &HashSet<PathBuf>,
    ) -> Result<bool> {
        let names = tx.dir_names(at)?.unwrap_or_default();
        Ok(names.into_iter().all(|n: OsString| going.contains(&at.join(n))))
    }
}

/// A removed conflictor's stanza, as dpkg leaves it: `config-files` (its want and flag as they
/// were), the version its configuration is of, no longer Essential or Protected.
fn removed_stanza(p: &status::Package) -> Stanza {
    let mut stanza = p.stanza.clone();
    if let Some(version) = p.config_version() {
        status::set_known(&mut stanza, "Config-Version", version.to_string());
    }
    let state = StatusField { state: State::ConfigFiles, ..p.status };
    status::set_known(&mut stanza, "Status", state.to_string());
    stanza.fields.retain(|f| {
        !f.name.eq_ignore_ascii_case("Essential") && !f.name.eq_ignore_ascii_case("Protected")
    });
    stanza
}
