//! The second stage's adoption: a package the first stage wrote, still as its commit left it,
//! taken into the second transaction without being read, written, flushed or renamed again
//! ([`Adopting`], the write phase's [`Stage`] for the second stage).
//!
//! A stamp that differs, a diversion, an override or a conffile's new name means "write it
//! again" or "read the package again", never "trust it": adoption must never claim a name whose
//! content or metadata the second stage would have written otherwise.

use super::first_stage::{FirstStage, Written};
use crate::dpkg::database::Database;
use crate::dpkg::install::Action;
use crate::error::Result;
use crate::fs::root::Stamp;
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use crate::report::PackageReport;
use crate::txn::transaction::Transaction;
use crate::txn::write_phase::{Package, Stage};
use std::collections::HashSet;
use std::path::Path;

/// The second stage: the lanes skip the data of the first stage's packages, which are adopted
/// where they are unchanged, or else read again.
pub(crate) struct Adopting<'f>(pub &'f mut FirstStage);

impl Stage for Adopting<'_> {
    fn skipped(&self, packages: usize) -> Vec<bool> {
        self.0.wrote_all(packages)
    }

    fn begin(&mut self, index: usize, _control: &ControlArchive) -> bool {
        self.0.wrote(index)
    }

    fn adopt(
        &mut self,
        tx: &mut Transaction<'_>,
        database: Option<&mut Database>,
        at: Package<'_>,
        control: &ControlArchive,
        report: &mut PackageReport,
    ) -> Result<bool> {
        let (Some(db), Some(written)) = (database, self.0.written(at.index, control)) else {
            return Ok(false);
        };
        let adopted = adopt(tx, db, at, written, report)?;
        if adopted {
            self.0.adopted.push(control.control.name.clone());
        }
        Ok(adopted)
    }
}

/// What the second stage does with one entry of an adopted package.
enum Step<'w> {
    Skip,
    /// Taken as the first stage left it.
    Adopt(&'w Entry, Stamp),
    /// Written again (a conffile as `NAME.dpkg-new` from its kept bytes, a directory, a link).
    Write(Entry, &'w [u8]),
}

/// The second stage's package `at`, whose preinst has run, as the first stage wrote it
/// (`written`): true when it is adopted, every entry mapped through dpkg's database and either
/// taken as it is on disk or written from what the first stage kept ([`plan`]). False when
/// some file needs its archive's bytes: the database forgets the entries mapped so far and the
/// package is read again from its archive.
fn adopt(
    tx: &mut Transaction<'_>,
    db: &mut Database,
    at: Package<'_>,
    written: &Written,
    report: &mut PackageReport,
) -> Result<bool> {
    let Some(steps) = plan(tx, db, written)? else {
        db.restart_package();
        return Ok(false);
    };
    let Package { index, path } = at;
    for step in steps {
        tx.check_stop()?;
        match step {
            Step::Skip => {}
            Step::Adopt(entry, stamp) => tx.adopt(index, path, entry, &stamp)?,
            Step::Write(entry, mut bytes) => tx.add(index, path, &entry, &mut bytes)?,
        }
    }
    written.entries.iter().for_each(|(e, _)| report.count(e));
    Ok(true)
}

/// What to do with each entry of `written`, mapped through the database: a file is adopted
/// when it is unchanged since the first stage's commit and the database writes it at its own
/// name with its own metadata (a hard link only with its target); a conffile (`.dpkg-new`),
/// a directory, a symlink or a device is written again from what the first stage kept. `None`:
/// some file would need its archive's bytes (a script changed it, a diversion or an override
/// moves it, the package ships no md5sums).
fn plan<'w>(
    tx: &mut Transaction<'_>,
    db: &mut Database,
    written: &'w Written,
) -> Result<Option<Vec<Step<'w>>>> {
    let mut steps = Vec::with_capacity(written.entries.len());
    let mut adopted: HashSet<&Path> = HashSet::new();
    for ((entry, bytes), stamp) in written.entries.iter().zip(&written.stamps) {
        let mut mapped = entry.clone();
        let step = match db.map_entry(tx, &mut mapped)? {
            Action::Skip => Step::Skip,
            Action::Write { hash: true } | Action::Shared { .. } => return Ok(None),
            Action::Write { hash: false } if mapped.kind == Kind::Dir => Step::Write(mapped, &[]),
            Action::Write { hash: false } => {
                let unchanged = mapped == *entry
                    && stamp.is_some()
                    && tx.stamp(&entry.path).map(|(_, s)| s) == *stamp;
                let link_adopted = |kind: &Kind| matches!(kind, Kind::Hardlink { target } if adopted.contains(target.as_path()));
                match (stamp, bytes) {
                    (Some(stamp), _)
                        if unchanged
                            && (!matches!(entry.kind, Kind::Hardlink { .. })
                                || link_adopted(&entry.kind)) =>
                    {
                        adopted.insert(&entry.path);
                        Step::Adopt(entry, *stamp)
                    }
                    (_, Some(bytes)) => Step::Write(mapped, bytes),
                    // A link to a file adopted here would be made from the file on disk.
                    _ if matches!(mapped.kind, Kind::File { .. }) || link_adopted(&mapped.kind) => {
                        return Ok(None)
                    }
                    _ => Step::Write(mapped, &[]),
                }
            }
        };
        steps.push(step);
    }
    Ok(Some(steps))
}
