//! Database mode: with a root that has dpkg's admin directory, the engine does to the root's
//! files and database what `dpkg --unpack` does, inside its one transaction.
//!
//! [`format`] holds dpkg's file formats, pure and fuzzed; [`admin`] finds a root's admin
//! directory and reads it through the root's confined resolution, [`lock`] takes dpkg's locks,
//! [`admission`] checks a package against the root (its architecture, a divert-to name),
//! [`depcon`] decides what a package's Conflicts, Breaks and Pre-Depends ask of the
//! installed ones, [`install`] decides entry by entry what dpkg would and hands the
//! transaction the database files and the removals, [`conflictors`] removes the conflicting
//! packages it replaces, [`filter`] applies dpkg's path filters, [`triggers`] records the
//! triggers the call activates, [`md5`] hashes
//! the files of a package that ships no md5sums, [`scripts`] runs the unpack phase's
//! maintainer scripts and [`updates`] records a package's state durably before they run.
//! [`configure_guard`] is the one that serves the real dpkg's configure rather than the
//! engine's unpack: it records the conffiles a configure may move, and finishes a move a crash
//! lost.
//!
//! None of the others writes a name in the root: every change, the database's included, goes
//! through the transaction, so that after any crash and recovery the database and the tree
//! agree (the guard writes its record, and redoes only a rename dpkg recorded as done). The
//! real dpkg is the oracle for every behaviour here.

pub(crate) mod admin;
pub(crate) mod admission;
pub mod configure_guard;
pub(crate) mod conflictors;
pub(crate) mod database;
pub(crate) mod depcon;
pub(crate) mod filter;
pub(crate) mod install;
pub(crate) mod lock;
pub(crate) mod md5;
pub(crate) mod scripts;
pub(crate) mod triggers;
pub(crate) mod updates;
// dpkg's formats are reached by fuzz/ and this package's tests through the `fuzzing` feature,
// hidden from the documentation: internals, not API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod format;
#[cfg(not(feature = "fuzzing"))]
pub(crate) mod format;
