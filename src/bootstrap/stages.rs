//! The bootstrap's two stages in order, each a transaction of the one call: the layout, the
//! first stage (files only), the second stage (database mode, scripts). It sequences; every
//! name it writes goes through a transaction.

use super::adoption::Adopting;
use super::first_stage::FirstStage;
use super::first_stage::Keeping;
use super::layout::add_layout;
use super::plan::plan;
use crate::call::Call;
use crate::dpkg::admin::DEFAULT_ADMINDIR;
use crate::error::{escape, Error, Result};
use crate::events::Event;
use crate::options::Options;
use crate::report::{self, Report};
use crate::txn::commit::commit;
use crate::txn::write_phase::write_phase;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A base system in one call (`unpack --bootstrap`), into a root whose dpkg database is empty
/// or absent: a first transaction writes the merged-/usr layout, an empty database and the
/// files of the Essential packages and their closure, with no script; a second unpacks every
/// package in database mode, maintainer scripts included (see the `bootstrap` module). The
/// report is the second's, with the first stage's packages and time, and both stages' flushes.
pub fn bootstrap(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Report> {
    // Into an empty database no Pre-Depends is satisfied yet: as dpkg --force-depends in a
    // first stage's second half (debootstrap, mmdebstrap). dpkg's notices of that (a
    // "pre-dependency problem" ignored for nearly every package) are not passed on: they are
    // the bootstrap's design, not news (debootstrap sends them to its log), and the
    // configuration that follows checks every dependency.
    let mut options = options.clone();
    options.force.depends = true;
    if let Some(told) = options.events.take() {
        options.events = Some(Arc::new(move |event: &Event| {
            if !matches!(event, Event::Notice { .. }) {
                told(event);
            }
        }));
    }
    let options = &options;
    let mut call = Call::open(packages, root, options)?;
    let plan = plan(packages)?;
    let existing = call.read_database()?;
    if let Some(db) = existing.as_ref().filter(|db| db.package_count() > 0) {
        return Err(Error::Usage(format!(
            "--bootstrap: the database in {} lists {} installed packages: the bootstrap makes a new system; unpack into this one without --bootstrap",
            escape(&call.root.display(db.admin_rel())),
            db.package_count()
        )));
    }
    let admin = existing
        .as_ref()
        .map_or_else(|| PathBuf::from(DEFAULT_ADMINDIR), |db| db.admin_rel().to_path_buf());
    let first_started = Instant::now();
    // The layout is on disk before the first stage's packages meet it: their `./bin/` is then
    // a directory entry over a symlink to one, which keeps the symlink (as dpkg and tar's
    // --keep-directory-symlink do), where within one transaction it would be a second entry
    // for one path.
    let mut tx = call.transaction(true)?;
    if add_layout(&mut tx, &plan, &admin, existing.is_some())? {
        commit(&mut tx, &["the bootstrap's merged-/usr layout".to_string()])?;
    }
    drop(tx);
    let mut tx = call.transaction(true)?;
    tx.set_admin(&admin);
    let mut first = FirstStage::new(&plan);
    write_phase(&mut tx, &plan.first, options, &mut Vec::new(), None, &mut Keeping(&mut first))?;
    commit(&mut tx, &["the bootstrap's first stage".to_string()])?;
    drop(tx);
    first.stamp(&mut call.root);
    let seconds = first_started.elapsed().as_secs_f64();
    let database = match existing {
        Some(db) => db,
        None => call.find_database()?.ok_or_else(|| {
            Error::Internal("the bootstrap's first stage made no database".into())
        })?,
    };
    let mut database = database;
    let mut report = call.transact(packages, Some(&mut database), &mut Adopting(&mut first))?;
    report.first_stage =
        Some(report::FirstStage { packages: plan.first_names, seconds, adopted: first.adopted });
    Ok(report)
}
