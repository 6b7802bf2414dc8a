//! Packages built inside a test, for cases no fixture should hold: a few bytes of hostile
//! tar, wrapped into a container the engine accepts, so that a test reaches exactly the code it
//! means to. Members are written as given: compress them first to test a decompressor.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An ar archive of `members` (name, bytes), with headers as dpkg-deb writes them.
pub fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = unpack::read::deb::AR_MAGIC.to_vec();
    for (name, data) in members {
        unpack_lab::ar::write_member(&mut out, name, 1_700_000_000, data).unwrap();
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

/// Bytes that compress, but not to nothing: text-like lines with a counter and some noise.
pub fn sample(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut x = seed | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        writeln!(
            out,
            "line {} of the sample, value {:x} {}",
            out.len(),
            x % 4099,
            "abcdefgh".repeat((x % 5) as usize)
        )
        .unwrap();
    }
    out.truncate(len);
    out
}

/// `data` as xz's threaded encoder writes it at `level` (as dpkg-deb does at 6): blocks of
/// `block` bytes, each header carrying its sizes.
pub fn xz_threaded(data: &[u8], level: u32, block: usize) -> Vec<u8> {
    let mut child = Command::new("xz")
        .args([
            "-T2".to_string(),
            format!("-{level}"),
            "-c".into(),
            format!("--block-size={block}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("xz (xz-utils) runs");
    let mut stdin = child.stdin.take().unwrap();
    let input = data.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// A data.tar of `files` text files of about `size` bytes each (plus 100 bytes more for each
/// file before it in its directory), fifty to a directory under ./usr/share/doc/text/, with their directories, as
/// dpkg-deb lists them.
pub fn text_tree(files: usize, size: usize) -> Vec<u8> {
    text_tree_in("text", files, size)
}

/// [`text_tree`] under ./usr/share/doc/`top`/ instead: packages of one call need paths of
/// their own.
pub fn text_tree_in(top: &str, files: usize, size: usize) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut append = |path: &str, kind: tar::EntryType, mode: u32, body: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(body.len() as u64);
        header.set_mode(mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        tar.append_data(&mut header, path, body).unwrap();
    };
    for dir in [
        "./".to_string(),
        "./usr/".into(),
        "./usr/share/".into(),
        "./usr/share/doc/".into(),
        format!("./usr/share/doc/{top}/"),
    ] {
        append(&dir, tar::EntryType::Directory, 0o755, &[]);
    }
    for i in 0..files {
        if i % 50 == 0 {
            append(
                &format!("./usr/share/doc/{top}/d{:02}/", i / 50),
                tar::EntryType::Directory,
                0o755,
                &[],
            );
        }
        let body = sample(size + i % 50 * 100, i as u64 + 7);
        append(
            &format!("./usr/share/doc/{top}/d{:02}/file{i:04}.txt", i / 50),
            tar::EntryType::Regular,
            0o644,
            &body,
        );
    }
    tar.into_inner().unwrap()
}
