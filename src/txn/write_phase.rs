//! The write phase of a transaction: the lanes that read the packages ([`crate::read::lanes`]) and
//! the writer, which takes each entry through dpkg's database (database mode) into the
//! transaction; then what database mode adds before the commit (the database files, the old
//! scripts kept aside).
//!
//! A caller above may add to it through a [`Stage`] (the bootstrap's first stage keeps what it
//! writes, the second adopts it where it can). The write phase must never commit: until the
//! caller's commit, every error rolls the transaction back.

use crate::dpkg::database::Database;
use crate::dpkg::install::Action;
use crate::error::{Error, Result};
use crate::options::{Options, Phase};
use crate::read::control::ControlArchive;
use crate::read::entry::{Entry, Kind};
use crate::read::lanes::{self, FileData, Message};
use crate::report::PackageReport;
use crate::txn::transaction::Transaction;
use std::path::{Path, PathBuf};

/// What a caller above the transaction adds to its write phase: the bootstrap's stages keep
/// what the first writes and adopt it in the second (`crate::bootstrap`). A plain call passes
/// [`Plain`], which adds nothing. Defined here, implemented there, so that the write phase
/// never imports the bootstrap.
pub(crate) trait Stage {
    /// By the call's package index, for `packages` packages: whose data the lanes skip (the
    /// stage [`adopt`](Stage::adopt)s those, or they are read again).
    fn skipped(&self, _packages: usize) -> Vec<bool> {
        Vec::new()
    }

    /// Package `index` starts, its control archive read: true when the lanes skipped its data.
    fn begin(&mut self, _index: usize, _control: &ControlArchive) -> bool {
        false
    }

    /// Package `index` (`path`), whose data the lanes skipped and whose preinst has run: true
    /// when the stage wrote it into `tx` from what it kept, false when it must be read again.
    fn adopt(
        &mut self,
        _tx: &mut Transaction<'_>,
        _database: Option<&mut Database>,
        _at: Package<'_>,
        _control: &ControlArchive,
        _report: &mut PackageReport,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Writes one entry of package `index` (`path`), its bytes in `data`: as [`write_entry`]
    /// does unless the stage keeps something of it.
    fn write(
        &mut self,
        tx: &mut Transaction<'_>,
        database: Option<&mut Database>,
        at: Package<'_>,
        entry: Entry,
        data: &mut FileData<'_>,
    ) -> Result<()> {
        write_entry(tx, database, at, entry, data)
    }
}

/// A plain transaction's write phase.
pub(crate) struct Plain;

impl Stage for Plain {}

/// A package of the call: its index and its file, which messages name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Package<'p> {
    pub index: usize,
    pub path: &'p Path,
}

/// Writes `packages` into `tx` (in database mode with `database`), a report per package into
/// `reports`.
pub(crate) fn write_phase(
    tx: &mut Transaction<'_>,
    packages: &[PathBuf],
    options: &Options,
    reports: &mut Vec<PackageReport>,
    mut database: Option<&mut Database>,
    stage: &mut dyn Stage,
) -> Result<()> {
    let skipped = stage.skipped(packages.len());
    lanes::with_lanes(packages, options.progress.as_deref(), skipped, |queue| {
        Writer { tx, reports, database: database.as_deref_mut(), stage }.write_all(queue)
    })?;
    if let Some(db) = database {
        for (report, db) in reports.iter_mut().zip(db.finish(tx)?) {
            report.database = Some(db);
        }
        db.before_commit()?;
        if db.scripts_ran() {
            tx.check_pending()?;
        }
    }
    Ok(())
}

/// The writing half: takes what the reader thread sends and writes it into the transaction.
struct Writer<'t, 'a> {
    tx: &'t mut Transaction<'a>,
    reports: &'t mut Vec<PackageReport>,
    database: Option<&'t mut Database>,
    stage: &'t mut dyn Stage,
}

impl Writer<'_, '_> {
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
                    self.entry(&mut rx, Package { index: *index, path }, entry)?;
                }
                Message::Failed(e) => return Err(e),
                Message::Data(_) | Message::End => {
                    return Err(Error::Internal("file data without an entry".into()))
                }
            }
        }
        Ok(())
    }

    /// Package `index` (`path`) starts: in database mode its prerm and preinst run. A package
    /// whose data the lanes skipped (the bootstrap's second stage) is adopted by the stage or
    /// else read again here.
    fn package(&mut self, index: usize, path: &Path, control: ControlArchive) -> Result<()> {
        self.tx.enter(Phase::Package(path));
        self.reports.push(PackageReport::new(control.control.clone()));
        let skipped = self.stage.begin(index, &control);
        let kept = skipped.then(|| control.clone());
        if let Some(db) = self.database.as_deref_mut() {
            db.begin(path, control)?;
            db.before_files(self.tx)?;
        }
        let Some(control) = kept else { return Ok(()) };
        let Some(report) = self.reports.last_mut() else {
            return Err(Error::Internal("a package without its report".into()));
        };
        let at = Package { index, path };
        if self.stage.adopt(self.tx, self.database.as_deref_mut(), at, &control, report)? {
            return Ok(());
        }
        self.read_again(at, &control)
    }

    /// Reads package `at`, whose data the lanes skipped, on this thread's own lane: its control
    /// archive must be the one the database took.
    fn read_again(&mut self, at: Package<'_>, control: &ControlArchive) -> Result<()> {
        let (path, one) = (at.path, [at.path.to_path_buf()]);
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
                    Message::Entry(entry) => self.entry(&mut rx, at, entry)?,
                    Message::Failed(e) => return Err(e),
                    Message::Data(_) | Message::End => {
                        return Err(Error::Internal("file data without an entry".into()))
                    }
                }
            }
            Ok(())
        })
    }

    /// One entry of package `at`, its bytes next in `rx`.
    fn entry(&mut self, rx: &mut lanes::Queue, at: Package<'_>, entry: Entry) -> Result<()> {
        let Some(report) = self.reports.last_mut() else {
            return Err(Error::Internal("an entry before its package".into()));
        };
        report.count(&entry);
        self.tx.check_stop()?;
        let size = match entry.kind {
            Kind::File { size } => size,
            _ => 0,
        };
        let mut failed = None;
        let mut data = FileData::new(rx, size, &mut failed);
        let added = self.stage.write(self.tx, self.database.as_deref_mut(), at, entry, &mut data);
        if let Some(e) = failed.take() {
            return Err(e);
        }
        added
    }
}

/// Writes one entry of package `at` read from the archive, through dpkg's database in
/// database mode.
pub(crate) fn write_entry(
    tx: &mut Transaction<'_>,
    database: Option<&mut Database>,
    at: Package<'_>,
    mut entry: Entry,
    data: &mut FileData<'_>,
) -> Result<()> {
    let Package { index, path } = at;
    let archive_path = entry.path.clone();
    let Some(db) = database else {
        return tx.add(index, path, &entry, data);
    };
    let listed = Path::new("/").join(&archive_path);
    // dpkg's path filters come after its ownership rules, as in its tarobject.
    let action = match db.map_entry(tx, &mut entry)? {
        Action::Skip => Action::Skip,
        _ if db.filtered(&listed, &entry.kind) => Action::Skip,
        action => action,
    };
    match action {
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
        Action::Shared { hash, expect } => {
            let mut hashing = crate::dpkg::md5::Hashing::new(data);
            std::io::copy(&mut hashing, &mut std::io::sink())
                .map_err(|e| Error::bad(path, e.to_string()))?;
            let sum = hashing.finish();
            let md5 = matches!(entry.kind, Kind::File { .. }).then_some(sum.as_str());
            db.check_shared(tx, &archive_path, &entry.path, &entry.kind, md5, &expect)?;
            if hash {
                db.file_hashed(&archive_path, sum);
            }
            Ok(())
        }
    }
}
