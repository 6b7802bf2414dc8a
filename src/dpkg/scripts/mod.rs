//! Maintainer scripts of the unpack phase: how one runs ([`runner`]) and when, in Debian
//! Policy 6.6's order, with its unwinding when one fails ([`phase`]).
//!
//! Scripts are root code from the package and from the root's database; this module runs them
//! as dpkg runs them and never one it did not mean to (see [`runner`]). It must never write the
//! root or the database itself: what a script's outcome changes in the database goes through
//! the transaction.

pub(crate) mod phase;
pub(crate) mod runner;
