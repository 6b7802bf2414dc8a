//! Packages built inside a test, for cases no fixture should hold: a few bytes of hostile
//! tar, wrapped into a container the engine accepts, so that a test reaches exactly the code it
//! means to. Members are written as given: compress them first to test a decompressor.

use std::path::{Path, PathBuf};

/// An ar archive of `members` (name, bytes), with headers as dpkg-deb writes them.
pub fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = unpack::deb::AR_MAGIC.to_vec();
    for (name, data) in members {
        unpack::deb::write_member(&mut out, name, 1_700_000_000, data).unwrap();
    }
    out
}

/// An uncompressed control.tar naming package `hostile` 1.0.
pub fn control_tar() -> Vec<u8> {
    let text = b"Package: hostile\nVersion: 1.0\nArchitecture: all\n";
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append_data(&mut header, "./control", &text[..]).unwrap();
    builder.into_inner().unwrap()
}

/// A .deb whose data member is called `data_name` (`data.tar`, `data.tar.xz`, ...) and holds
/// `data` as is.
pub fn deb(data_name: &str, data: &[u8]) -> Vec<u8> {
    ar(&[("debian-binary", b"2.0\n"), ("control.tar", &control_tar()), (data_name, data)])
}

/// Writes `deb(data_name, data)` to `dir/name` and returns its path.
pub fn write_deb(dir: &Path, name: &str, data_name: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, deb(data_name, data)).unwrap();
    path
}
