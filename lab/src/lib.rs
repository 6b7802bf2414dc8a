//! The lab of `unpack`: what a release team and filesystem developers run around the engine.
//!
//! - [`bench`](mod@bench): the benchmark matrix of `unpack-bench` (strategies x filesystems x devices, the
//!   peers dpkg and tar beside), its tables and charts;
//! - [`crash`]: `unpack-crashtest`, power cuts replayed from the virtual disk's write log and
//!   each crash state checked against what the engine promises;
//! - [`compare`]: `unpack-compare`, every difference between two roots' trees and dpkg
//!   databases (apt with the engine against apt with dpkg);
//! - [`vdisk`]: `unpack-vdisk`, a FUSE-backed disk image with device profiles and a write log;
//! - [`scratchfs`], [`workdir`], [`mounts`]: scratch filesystems on loop devices, the
//!   directories they live in, and the mount table questions their clean-up asks;
//! - [`ar`]: the .deb container writer that the synthetic packages and the tests use.
//!
//! It runs the `unpack` program as a child (found beside its own executable or on PATH) and
//! uses the engine library only through its public API.

pub mod ar;
pub mod bench;
pub mod compare;
pub mod crash;
pub mod mounts;
pub mod scratchfs;
pub mod vdisk;
pub mod workdir;
