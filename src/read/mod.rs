//! Package in, entries out: everything the engine learns from a `.deb` file.
//!
//! The container ([`deb`]: ar, members, decompressors), a multi-block xz member decoded on
//! several threads (`xz_blocks`), the control archive ([`control`]), the tar headers turned
//! into validated entries ([`entry`]), and the lanes that read a call's packages on threads of
//! their own (`lanes`). Everything here is checked before it leaves: names, sizes, checksums,
//! bounds on memory.
//!
//! This layer never touches the root: it reads package files and hands out values. What it
//! hands out is still only a request, which the filesystem layer confines again.

pub(crate) mod buffered;
pub mod control;
pub mod deb;
pub mod entry;
pub(crate) mod lanes;
// The xz block decoder is reached by fuzz/ and this package's tests through the `fuzzing`
// feature, hidden from the documentation: internals, not API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod xz_blocks;
#[cfg(not(feature = "fuzzing"))]
pub(crate) mod xz_blocks;
