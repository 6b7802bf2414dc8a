//! The write phase of a transaction: the lanes that read the packages ([`crate::read::lanes`]) and
//! the writer, which takes each entry through dpkg's database (database mode) into the
//! transaction; then what database mode adds before the commit (the database files, the old
//! scripts kept aside).
//!
//! The bootstrap's two stages ([`crate::bootstrap::plan`]) pass through here too: the first keeps
//! what it writes ([`FirstStage`]), the second adopts it where it can. The write phase must
//! never commit: until the caller's commit, every error rolls the transaction back.

use crate::bootstrap::first_stage::{FirstStage, Written};
use crate::dpkg::database::Database;
use crate::dpkg::install::Action;
use crate::error::{Error, Result};
use crate::fs::root::Stamp;
use crate::options::Options;
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use crate::read::lanes::{self, Message};
use crate::report::PackageReport;
use crate::txn::transaction::Transaction;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What a bootstrap stage asks of the write phase.
pub(crate) enum Stage<'a> {
    /// A plain transaction.
    Plain,
    /// The bootstrap's first stage: keep what is written.
    First(&'a mut FirstStage),
    /// The second stage: adopt what the first stage wrote, where it is unchanged.
    Second(&'a mut FirstStage),
}

/// Writes `packages` into `tx` (in database mode with `database`), a report per package into
/// `reports`.
pub(crate) fn write_phase(
    tx: &mut Transaction<'_>,
    packages: &[PathBuf],
    options: &Options,
    reports: &mut Vec<PackageReport>,
    mut database: Option<&mut Database>,
    mut stage: Stage<'_>,
) -> Result<()> {
    let skipped = match &stage {
        Stage::Second(first) => first.wrote_all(packages.len()),
        _ => Vec::new(),
    };
    lanes::with_lanes(packages, options.progress.as_deref(), skipped, |queue| {
        Writer { tx, reports, database: database.as_deref_mut(), stage: &mut stage }
            .write_all(queue)
    })?;
    if let Some(db) = database {
        for (report, db) in reports.iter_mut().zip(db.finish(tx)?) {
            report.database = Some(db);
        }
        db.before_commit()?;
    }
    Ok(())
}

/// The writing half: takes what the reader thread sends and writes it into the transaction.
struct Writer<'t, 'a, 's> {
    tx: &'t mut Transaction<'a>,
    reports: &'t mut Vec<PackageReport>,
    database: Option<&'t mut Database>,
    stage: &'t mut Stage<'s>,
}

impl Writer<'_, '_, '_> {
    /// Takes every message of `rx` (consumed: dropping it stops the lanes).
    fn write_all(mut self, mut rx: lanes::Queue) -> Result<()> {
        let mut package: Option<(usize, PathBuf)> = None;
        while let Some(message) = rx.recv() {
            match message {
                Message::Package { index, path, control } => {
                    self.package(index, &path, *control)?;
                    package = Some((index, path));
                }
                Message::Entry(entry) => {
                    let Some((index, path)) = &package else {
                        return Err(Error::Internal("an entry before its package".into()));
                    };
                    self.entry(&mut rx, *index, path, entry)?;
                }
                Message::Failed(e) => return Err(e),
                Message::Data(_) | Message::End => {
                    return Err(Error::Internal("file data without an entry".into()))
                }
            }
        }
        Ok(())
    }

    /// Package `index` (`path`) starts: in database mode its prerm and preinst run. In the
    /// second stage a package the first stage wrote, whose data the lanes skipped, is adopted
    /// or else read again here.
    fn package(&mut self, index: usize, path: &Path, control: ControlArchive) -> Result<()> {
        self.reports.push(PackageReport::new(control.control.clone()));
        let name = control.control.name.clone();
        // The lanes skipped the data of a package the first stage wrote.
        let skipped = match &mut *self.stage {
            Stage::First(first) => {
                first.begin(index, &control);
                false
            }
            Stage::Second(first) => first.wrote(index),
            Stage::Plain => false,
        };
        let kept = skipped.then(|| control.clone());
        if let Some(db) = self.database.as_deref_mut() {
            db.begin(path, control)?;
            db.before_files()?;
        }
        let Some(control) = kept else { return Ok(()) };
        if let (Stage::Second(first), Some(db)) = (&mut *self.stage, self.database.as_deref_mut()) {
            let adopted = match first.written(index, &control) {
                Some(w) => adopt(self.tx, db, index, path, w, self.reports.last_mut())?,
                None => false,
            };
            if adopted {
                first.adopted.push(name);
                return Ok(());
            }
        }
        self.read_again(index, path, &control)
    }

    /// Reads package `index` (`path`), whose data the lanes skipped, on this thread's own lane:
    /// its control archive must be the one the database took.
    fn read_again(&mut self, index: usize, path: &Path, control: &ControlArchive) -> Result<()> {
        let one = [path.to_path_buf()];
        lanes::with_lanes(&one, None, Vec::new(), |mut rx| {
            while let Some(message) = rx.recv() {
                match message {
                    Message::Package { control: again, .. } if *again == *control => {}
                    Message::Package { .. } => {
                        return Err(Error::bad(
                            path,
                            "the package file changed while it was being read",
                        ))
                    }
                    Message::Entry(entry) => self.entry(&mut rx, index, path, entry)?,
                    Message::Failed(e) => return Err(e),
                    Message::Data(_) | Message::End => {
                        return Err(Error::Internal("file data without an entry".into()))
                    }
                }
            }
            Ok(())
        })
    }

    /// One entry of package `index` (`path`), its bytes next in `rx`.
    fn entry(
        &mut self,
        rx: &mut lanes::Queue,
        index: usize,
        path: &Path,
        entry: Entry,
    ) -> Result<()> {
        let Some(report) = self.reports.last_mut() else {
            return Err(Error::Internal("an entry before its package".into()));
        };
        count(report, &entry);
        self.tx.check_stop()?;
        let size = match entry.kind {
            Kind::File { size } => size,
            _ => 0,
        };
        let mut failed = None;
        let mut data = lanes::FileData::new(rx, size, &mut failed);
        let added = match &mut *self.stage {
            Stage::First(first) if first.keeps(index, &entry) => {
                let mut bytes = Vec::with_capacity(size as usize);
                match data.read_to_end(&mut bytes) {
                    Ok(_) => {
                        let added = self.tx.add(index, path, &entry, &mut bytes.as_slice());
                        first.entry(index, entry, Some(bytes));
                        added
                    }
                    Err(e) => Err(Error::bad(path, e.to_string())),
                }
            }
            Stage::First(first) => {
                let added = self.tx.add(index, path, &entry, &mut data);
                first.entry(index, entry, None);
                added
            }
            _ => write_entry(self.tx, self.database.as_deref_mut(), index, path, entry, &mut data),
        };
        if let Some(e) = failed.take() {
            return Err(e);
        }
        added
    }
}

/// Writes one entry read from the archive, through dpkg's database in database mode.
fn write_entry(
    tx: &mut Transaction<'_>,
    database: Option<&mut Database>,
    index: usize,
    path: &Path,
    mut entry: Entry,
    data: &mut lanes::FileData<'_>,
) -> Result<()> {
    let archive_path = entry.path.clone();
    let Some(db) = database else {
        return tx.add(index, path, &entry, data);
    };
    match db.map_entry(&mut entry)? {
        Action::Skip => std::io::copy(data, &mut std::io::sink())
            .map(drop)
            .map_err(|e| Error::bad(path, e.to_string())),
        Action::Write { hash: false } => tx.add(index, path, &entry, data),
        Action::Write { hash: true } => {
            let mut hashing = crate::dpkg::md5::Hashing::new(data);
            let added = tx.add(index, path, &entry, &mut hashing);
            let sum = hashing.finish();
            if added.is_ok() {
                db.file_hashed(&archive_path, sum);
            }
            added
        }
    }
}

/// The report's counts for one entry.
fn count(report: &mut PackageReport, entry: &Entry) {
    report.entries += 1;
    if let Kind::File { size } = entry.kind {
        report.files += 1;
        report.bytes += size;
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

/// The second stage's package `index` (`path`), whose preinst has run, as the first stage wrote
/// it (`written`): true when it is adopted, every entry mapped through dpkg's database and
/// either taken as it is on disk or written from what the first stage kept ([`plan`]). False
/// when some file needs its archive's bytes: the database forgets the entries mapped so far
/// and the package is read again from its archive.
fn adopt(
    tx: &mut Transaction<'_>,
    db: &mut Database,
    index: usize,
    path: &Path,
    written: &Written,
    report: Option<&mut PackageReport>,
) -> Result<bool> {
    let Some(steps) = plan(tx, db, written)? else {
        db.restart_package();
        return Ok(false);
    };
    for step in steps {
        tx.check_stop()?;
        match step {
            Step::Skip => {}
            Step::Adopt(entry, stamp) => tx.adopt(index, path, entry, &stamp)?,
            Step::Write(entry, mut bytes) => tx.add(index, path, &entry, &mut bytes)?,
        }
    }
    if let Some(report) = report {
        written.entries.iter().for_each(|(e, _)| count(report, e));
    }
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
        let step = match db.map_entry(&mut mapped)? {
            Action::Skip => Step::Skip,
            Action::Write { hash: true } => return Ok(None),
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
