//! The filesystem layer: the root and every system call that takes a name in it.
//!
//! The confined root (`root`: lookups that never leave it, whatever symlinks it holds), the
//! names the engine owns in a root ([`names`]), the two handles a strategy flushes through
//! ([`file`](mod@file)), the removal of the engine's own trees (`tree`), which filesystem and mount
//! options a path lives on ([`mountinfo`]), and the flush and rename calls, counted and timed
//! ([`syscalls`]).
//!
//! The bottom of the engine: it imports nothing above it. It must never resolve a name through
//! the kernel's own path walk in a directory someone else can write, never follow a symlink it
//! did not expand itself inside the root, and never set metadata by name.

pub mod file;
pub mod mountinfo;
pub mod names;
pub mod syscalls;
pub(crate) mod tree;
// The resolver is reached by this package's tests through the `fuzzing` feature, hidden from
// the documentation: internals, not API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod root;
#[cfg(not(feature = "fuzzing"))]
pub(crate) mod root;
