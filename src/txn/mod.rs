//! The transaction: all or nothing at any crash.
//!
//! A transaction writes every entry under a temporary name ([`transaction`], driven by the
//! write phase, `write_phase`), then the strategy's barrier runs, the journal of the renames
//! still to do goes on disk and the renames put everything in place (`commit`); a crash at any
//! point is finished or rolled back by [`recover`], from the journal and the intent the
//! transaction left in the engine's state directory ([`journal`]).
//!
//! What this layer must never do: make a final name visible before the barrier has run and the
//! journal is durable, or touch a name that is neither the engine's own temporary name nor one
//! its journal records.

pub(crate) mod commit;
pub(crate) mod recover;
pub(crate) mod transaction;
pub(crate) mod write_phase;
// The journal's format is reached by fuzz/ and this package's tests through the `fuzzing`
// feature, hidden from the documentation: internals, not API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod journal;
#[cfg(not(feature = "fuzzing"))]
pub(crate) mod journal;
