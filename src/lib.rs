//! unpack: a package-unpack durability engine, the core of a dpkg-style installer.

pub mod bench;
pub mod mountinfo;
pub mod scratchfs;
