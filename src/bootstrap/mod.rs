//! `--bootstrap`: a base system in one call, into a root whose dpkg database lists no package.
//!
//! In an empty root no maintainer script can run: there is no shell and no C library to run
//! one. So, as debootstrap does, the call has two stages, each a transaction of its own and
//! all-or-nothing at any crash:
//!
//! 1. **The first stage**: the merged-/usr layout (`bin` -> `usr/bin` and the others of
//!    debootstrap's table for the architecture: Debian's usr-is-merged refuses a root without
//!    it), an empty dpkg database if the root has none, and the files of the `Essential: yes`
//!    packages with everything they Pre-Depend and Depend on among the call's packages (the
//!    Essential ones alone have no libc6). No script runs and nothing is recorded: what
//!    debootstrap's first stage extracts.
//! 2. **The second stage**: every package of the call, with dpkg's database and the unpack
//!    phase's maintainer scripts, exactly as `unpack` in database mode (the first stage's files
//!    are nobody's in the database, so they are taken over as dpkg takes them over); then
//!    `chroot ROOT dpkg --configure -a` finishes the system.
//!
//! A crash or a failure in either stage leaves a root `--bootstrap` accepts again (after the
//! recovery every call starts with): the first stage's files belong to no package, and the call
//! redoes both stages. This module must never bootstrap a root whose database lists a package:
//! that is an upgrade, and the first stage would overwrite installed files behind dpkg's back.

//!
//! The files: [`plan`] reads the call's control files and picks the first stage's packages,
//! [`layout`] adds the merged-/usr layout and an empty database, [`first_stage`] keeps what the
//! first stage wrote, [`adoption`] takes it into the second stage where it is unchanged, and
//! [`stages`] runs the stages in order through the call ([`crate::call`]).

pub(crate) mod adoption;
pub(crate) mod first_stage;
pub(crate) mod layout;
pub(crate) mod plan;
pub(crate) mod stages;
