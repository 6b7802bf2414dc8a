//! unpack: a package-unpack durability engine, the core of a dpkg-style installer.
//!
//! [`unpack()`] reads Debian packages and writes their files into a root directory through
//! temporary names and renames, so that at any instant of a power cut each path holds its old
//! or its new content, and so that when it returns `Ok` (for every strategy but `none`)
//! everything is on stable storage. How the safety is paid for is a [`Strategy`]: one of
//! [`durability::ALL`], chosen by name, or one of your own (see [`durability`]).
//!
//! Unpacking a package into a root with the `syncfs` strategy, as `unpack -s syncfs PKG ROOT`
//! does:
//!
//! ```
//! # use std::path::Path;
//! # let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
//! let packages = [fixtures.join("comp-gz_1.0_all.deb")];
//! let root = tempfile::tempdir()?; // any existing directory
//!
//! let strategy = unpack::durability::by_name("syncfs", 1)?;
//! let report = unpack::unpack(&packages, root.path(), &unpack::Options::new(strategy))?;
//!
//! assert!(root.path().join("usr/bin/comp-tool").is_file());
//! assert_eq!(report.syscalls.syncfs, 2); // one before the renames, one after
//! print!("{}", report.human());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The README's Rust snippet, compiled by `cargo test` as a doc test so that what the README
// shows an embedder keeps compiling; its other blocks are shell or text.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

// The API: what an embedder calls and what it gets back.
pub mod dpkg_log;
pub mod durability;
pub mod error;
pub mod events;
pub mod fs;
pub mod interrupt;
pub mod options;
pub mod read;
pub mod report;

// The `unpack` program's command line, shared with the lab's three programs so that the four
// behave alike (`--completions`, writes to a closed pipe). Public only because a binary target
// reaches nothing else of its library; it is not API and hidden from the documentation.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
// The `unpack-dpkg` program, a dpkg front end for apt: public for its binary target alone, as
// `cli` is; not API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod frontend;

// One call, and what only it drives: the transaction, `--bootstrap`, and database mode. The
// journal's format, dpkg's formats, the resolver and the xz block decoder are reached by fuzz/
// and this package's tests through the `fuzzing` feature, hidden from the documentation.
mod bootstrap;
mod call;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod dpkg;
#[cfg(not(feature = "fuzzing"))]
mod dpkg;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod txn;
#[cfg(not(feature = "fuzzing"))]
mod txn;

pub use bootstrap::stages::bootstrap;
pub use call::{discard_root, recover_root, unpack, unpack_each, Recovered};
pub use dpkg::configure_guard::Finished;
pub use durability::Strategy;
pub use error::{Error, Exit, Result};
pub use fs::names::{INTENT, JOURNAL, STATE_DIR};
pub use options::{Force, Options, PathFilter, Phase, PhaseFn, ProgressFn, ScriptOutput, StopFn};
pub use report::Report;
pub use txn::recover::Recovery;
