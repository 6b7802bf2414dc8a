//! A compressed member counts only once its own checks verified: gzip's CRC32 and length, xz's
//! block checks, index and footer (on one thread and in the multi-block reader), zstd's content
//! checksum, bzip2's stream CRC, the end of an lzma stream. They sit at the end of the stream,
//! past the tar archive's end blocks where a tar reader stops, so the engine reads every member
//! to its end before the barrier. One flipped byte there is exit 3 naming the member, with the
//! root as it was, where `dpkg-deb` refuses the package too (asserted wherever it is installed).
//! What follows the tar archive inside the stream is read and ignored, as GNU tar and
//! `dpkg-deb -x` ignore it, within `unpack::read::deb::MAX_TRAILING`; what follows the compressed
//! stream inside the member is refused.

mod common;

use common::deb_builder::{ar, sample, xz_threaded};
use common::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// How a member is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Gzip,
    /// One xz block, which the engine decodes on one thread.
    Xz,
    /// Many xz blocks, as xz's threaded encoder (and dpkg-deb) writes them: the parallel reader.
    XzBlocks,
    Zstd,
    Bzip2,
    Lzma,
}

use Format::*;

impl Format {
    fn suffix(self) -> &'static str {
        match self {
            Gzip => ".gz",
            Xz | XzBlocks => ".xz",
            Zstd => ".zst",
            Bzip2 => ".bz2",
            Lzma => ".lzma",
        }
    }

    fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Gzip => finish(
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best()),
                data,
                |e| e.finish(),
            ),
            Xz => finish(liblzma::write::XzEncoder::new(Vec::new(), 6), data, |e| e.finish()),
            XzBlocks => xz_threaded(data, 3, 32 << 10),
            Zstd => {
                let mut encoder = zstd::stream::Encoder::new(Vec::new(), 19).unwrap();
                encoder.include_checksum(true).unwrap();
                finish(encoder, data, |e| e.finish())
            }
            Bzip2 => finish(
                bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best()),
                data,
                |e| e.finish(),
            ),
            Lzma => {
                let options = liblzma::stream::LzmaOptions::new_preset(6).unwrap();
                let stream = liblzma::stream::Stream::new_lzma_encoder(&options).unwrap();
                finish(liblzma::write::XzEncoder::new_stream(Vec::new(), stream), data, |e| {
                    e.finish()
                })
            }
        }
    }

    /// The bytes of `stream` (written by [`Format::compress`]) that hold its checks, by name.
    fn checks(self, stream: &[u8]) -> Vec<(&'static str, Range<usize>)> {
        let end = stream.len();
        match self {
            Gzip => vec![("CRC32", end - 8..end - 4), ("ISIZE", end - 4..end)],
            Xz | XzBlocks => {
                // The footer's backward size gives the index; the last block's check is before it.
                let footer = end - 12;
                let index_len =
                    (u32::from_le_bytes(stream[footer + 4..footer + 8].try_into().unwrap())
                        as usize
                        + 1)
                        * 4;
                let index = footer - index_len;
                let check_len = match stream[footer + 9] & 0x0f {
                    0x01 => 4,
                    0x04 => 8,
                    0x0a => 32,
                    other => panic!("unexpected xz check {other}"),
                };
                vec![
                    ("last block's check", index - check_len..index),
                    ("index", index..footer),
                    ("footer", footer..end),
                ]
            }
            // XXH64's low 32 bits end the frame.
            Zstd => vec![("content checksum", end - 4..end)],
            // The stream CRC is the last 32 bits before up to 7 bits of padding: these three
            // bytes are CRC whatever the padding (the last one may be padding only).
            Bzip2 => vec![("stream CRC", end - 4..end - 1)],
            // No check, but the range coder's final bytes must decode to its end marker.
            Lzma => vec![("end of the range coder", end - 5..end)],
        }
    }

    /// Whether `stream` is one that the engine hands to its multi-block reader.
    fn is_parallel(stream: &[u8]) -> bool {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(stream).unwrap();
        unpack::read::xz_blocks::open_threads(
            &file,
            0,
            stream.len() as u64,
            Arc::new(AtomicU64::new(0)),
            2,
            1,
        )
        .is_some()
    }
}

/// `data` through `encoder`, then `done` to end the stream.
fn finish<E: Write>(
    mut encoder: E,
    data: &[u8],
    done: impl FnOnce(E) -> std::io::Result<Vec<u8>>,
) -> Vec<u8> {
    encoder.write_all(data).unwrap();
    done(encoder).unwrap()
}

/// A tar archive of `entries` (path, contents; a path ending in `/` is a directory), owned by
/// root, padded with zeros to a 10 KiB record as dpkg-deb pads its archives.
fn tar(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, body) in entries {
        let mut header = tar::Header::new_gnu();
        let dir = path.ends_with('/');
        header.set_entry_type(if dir {
            tar::EntryType::Directory
        } else {
            tar::EntryType::Regular
        });
        header.set_size(body.len() as u64);
        header.set_mode(if dir { 0o755 } else { 0o644 });
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        builder.append_data(&mut header, path, *body).unwrap();
    }
    let mut bytes = builder.into_inner().unwrap();
    bytes.resize(bytes.len().div_ceil(10240) * 10240, 0);
    bytes
}

/// The data.tar of version `version` of package `integrity`: a file of 200 KB (many blocks
/// of [`Format::XzBlocks`]) whose content depends on the version.
fn data_tar(version: u64) -> Vec<u8> {
    let text = sample(200_000, version);
    tar(&[
        ("./", b""),
        ("./usr/", b""),
        ("./usr/share/", b""),
        ("./usr/share/integrity/", b""),
        ("./usr/share/integrity/file.txt", &text),
    ])
}

/// The control.tar of version `version`: `./control`, then a `./md5sums` of 60 KB, which the
/// engine must read through to reach the stream's end.
fn control_tar(version: u64) -> Vec<u8> {
    let control = format!("Package: integrity\nVersion: {version}.0\nArchitecture: all\n");
    tar(&[
        ("./", b""),
        ("./control", control.as_bytes()),
        ("./md5sums", &sample(60_000, version + 100)),
    ])
}

/// A package from its two members, already compressed.
fn package(dir: &Path, name: &str, control: (&str, &[u8]), data: (&str, &[u8])) -> PathBuf {
    let path = dir.join(format!("{name}.deb"));
    std::fs::write(&path, ar(&[("debian-binary", b"2.0\n"), control, data])).unwrap();
    path
}

/// Which member a test damages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Control,
    Data,
}

/// The uncompressed member `which` of version 2.
fn member_tar(which: Member) -> Vec<u8> {
    match which {
        Member::Control => control_tar(2),
        Member::Data => data_tar(2),
    }
}

/// The package of version 2 with member `which` as `stream` (compressed as `format`), the
/// other uncompressed; and the member's name.
fn package_with(
    dir: &Path,
    name: &str,
    which: Member,
    format: Format,
    stream: &[u8],
) -> (PathBuf, String) {
    let (plain, other, other_tar) = match which {
        Member::Control => ("control.tar", "data.tar", data_tar(2)),
        Member::Data => ("data.tar", "control.tar", control_tar(2)),
    };
    let member = format!("{plain}{}", format.suffix());
    let deb = match which {
        Member::Control => package(dir, name, (&member, stream), (other, &other_tar)),
        Member::Data => package(dir, name, (other, &other_tar), (&member, stream)),
    };
    (deb, member)
}

/// What `deb` unpacks to in a new root `name` in `dir` (exit 0).
fn unpacked(dir: &Path, name: &str, deb: &Path) -> BTreeMap<PathBuf, Node> {
    let root = dir.join(name);
    std::fs::create_dir(&root).unwrap();
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{name}: {}", r.stderr);
    snapshot(&root)
}

/// A root with version 1 installed, and its snapshot.
fn installed_root(dir: &Path) -> (PathBuf, BTreeMap<PathBuf, Node>) {
    let v1 =
        package(dir, "integrity_1", ("control.tar", &control_tar(1)), ("data.tar", &data_tar(1)));
    let before = unpacked(dir, "root", &v1);
    (dir.join("root"), before)
}

fn has_dpkg_deb() -> bool {
    Command::new("dpkg-deb").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// What `dpkg-deb` makes of member `which` of `deb`: `-x` reads the data member only, `-e` the
/// control member. True if it accepts it.
fn dpkg_deb_accepts(deb: &Path, which: Member, out: &Path) -> bool {
    let _ = std::fs::remove_dir_all(out);
    let option = if which == Member::Data { "-x" } else { "-e" };
    run(Command::new("dpkg-deb").arg(option).arg(deb).arg(out)).code == 0
}

/// `deb` into `root`: exit 3, naming the package and `member` and saying `says`, and the
/// root as `before`.
fn assert_refused(
    deb: &Path,
    member: &str,
    root: &Path,
    before: &BTreeMap<PathBuf, Node>,
    says: &str,
) {
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    let what = deb.file_name().unwrap().to_string_lossy();
    assert_eq!(r.code, 3, "{what}: {}", r.stderr);
    assert!(
        r.stderr.contains(&format!("{}: {member}: ", deb.display())),
        "{what}: names the member: {}",
        r.stderr
    );
    assert!(r.stderr.contains(says), "{what}: says '{says}': {}", r.stderr);
    assert_same_tree(&snapshot(root), before, &what);
    assert!(leftover_temps(root).is_empty(), "{what}: temporary files left");
}

/// The words each format's failure is told in.
fn mismatch_words(format: Format, region: &str) -> &'static str {
    match (format, region) {
        (Gzip, _) => "does not have a matching checksum",
        (XzBlocks, "last block's check") => "its data or its check does not verify",
        (Xz | XzBlocks, _) => "its data, a block's check, its index or its footer does not verify",
        (Zstd, _) => "doesn't match checksum",
        (Bzip2, _) => "its data or a CRC does not verify",
        (Lzma, _) => "the lzma stream is corrupt",
    }
}

/// Each byte of each check of member `which`, flipped in turn: exit 3, the root unchanged, and
/// dpkg-deb refuses the same package. The package unflipped unpacks.
fn flipped_checks_are_refused(which: Member, formats: &[Format]) {
    let dir = tempfile::tempdir().unwrap();
    let (root, before) = installed_root(dir.path());
    let oracle = has_dpkg_deb();
    for &format in formats {
        let stream = format.compress(&member_tar(which));
        assert_eq!(
            Format::is_parallel(&stream),
            format == XzBlocks,
            "{format:?}: which xz reader takes it"
        );
        let (good, _) =
            package_with(dir.path(), &format!("good-{format:?}"), which, format, &stream);
        unpacked(dir.path(), &format!("fresh-{format:?}"), &good);
        for (region, bytes) in format.checks(&stream) {
            for at in bytes {
                let name = format!("{which:?}-{format:?}-{}-{at}", region.replace(' ', "_"));
                let mut flipped = stream.clone();
                flipped[at] ^= 0x01;
                let (deb, member) = package_with(dir.path(), &name, which, format, &flipped);
                assert_refused(&deb, &member, &root, &before, mismatch_words(format, region));
                // dpkg refuses a control.tar.bz2 however sound (dpkg-deb -e fails on the good
                // package too), so it says nothing about its checks.
                if oracle && !(which == Member::Control && format == Bzip2) {
                    assert!(
                        !dpkg_deb_accepts(&deb, which, &dir.path().join("dpkg")),
                        "{name}: dpkg-deb accepts it"
                    );
                }
            }
        }
    }
}

#[test]
fn a_flipped_byte_in_the_data_members_checks_is_exit_3_as_dpkg_deb_refuses_it() {
    flipped_checks_are_refused(Member::Data, &[Gzip, Xz, XzBlocks, Zstd, Bzip2, Lzma]);
}

/// The control member, whose `./control` comes first: read on to its end all the same. (dpkg
/// accepts no control.tar.bz2 or control.tar.lzma, nor does the engine: tests/refusals.rs.)
#[test]
fn a_flipped_byte_in_the_control_members_checks_is_exit_3_as_dpkg_deb_refuses_it() {
    flipped_checks_are_refused(Member::Control, &[Gzip, Xz, XzBlocks, Zstd]);
}

/// Inside the stream, after the tar archive's end blocks: dpkg-deb pads with zeros, and GNU tar
/// (so `dpkg-deb -x`) ignores whatever is there, zeros or not. The engine ignores it too, but
/// reads it through to reach the stream's checks: a flipped check behind 100 KB of it is still
/// caught.
#[test]
fn what_follows_the_tar_archive_is_ignored_as_dpkg_deb_does_but_read_to_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let (root, before) = installed_root(dir.path());
    let mut padded = data_tar(2);
    padded.extend_from_slice(&sample(100_000, 99));
    for format in [Gzip, Xz, XzBlocks, Zstd, Bzip2, Lzma] {
        let (plain, _) = package_with(
            dir.path(),
            &format!("plain-{format:?}"),
            Member::Data,
            format,
            &format.compress(&data_tar(2)),
        );
        let stream = format.compress(&padded);
        let (deb, member) =
            package_with(dir.path(), &format!("tail-{format:?}"), Member::Data, format, &stream);
        let what = format!("{format:?} with 100 KB after the tar archive");
        assert_same_tree(
            &unpacked(dir.path(), &format!("tail-{format:?}"), &deb),
            &unpacked(dir.path(), &format!("plain-{format:?}"), &plain),
            &what,
        );
        if has_dpkg_deb() {
            assert!(
                dpkg_deb_accepts(&deb, Member::Data, &dir.path().join("dpkg")),
                "{what}: dpkg-deb refuses it"
            );
        }
        let (region, bytes) = format.checks(&stream).swap_remove(0);
        let mut flipped = stream.clone();
        flipped[bytes.start] ^= 0x01;
        let (deb, _) = package_with(
            dir.path(),
            &format!("tail-flipped-{format:?}"),
            Member::Data,
            format,
            &flipped,
        );
        assert_refused(&deb, &member, &root, &before, mismatch_words(format, region));
    }
}

/// Reading to the checks is bounded: up to `MAX_TRAILING` bytes after the tar archive are read
/// and ignored; a longer tail (here zeros, 17 MiB in a few hundred bytes of zstd) is refused
/// rather than decoded, in bounded memory, where dpkg-deb would decode it all (or stop reading,
/// when its tar exits and the decompressor dies of SIGPIPE).
#[test]
fn a_tail_longer_than_the_bound_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (root, before) = installed_root(dir.path());
    let bound = usize::try_from(unpack::read::deb::MAX_TRAILING).unwrap();
    let with_tail = |len: usize| {
        let mut tar = data_tar(2);
        let end = tar.len();
        tar.resize(end + len, 0);
        Zstd.compress(&tar)
    };
    // The tar reader stops after the first end block; 10 KiB of the record's padding follow.
    let (within, _) =
        package_with(dir.path(), "within", Member::Data, Zstd, &with_tail(bound - (64 << 10)));
    let (plain, _) =
        package_with(dir.path(), "plain", Member::Data, Zstd, &Zstd.compress(&data_tar(2)));
    assert_same_tree(
        &unpacked(dir.path(), "within", &within),
        &unpacked(dir.path(), "plain", &plain),
        "a tail within the bound",
    );

    let beyond = with_tail(bound + (1 << 20));
    assert!(beyond.len() < 64 << 10, "a bomb: {} bytes", beyond.len());
    let (deb, member) = package_with(dir.path(), "beyond", Member::Data, Zstd, &beyond);
    assert_refused(&deb, &member, &root, &before, "MiB follow the end of the tar archive");
    let peak = dir.path().join("peak");
    let r = run(Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&peak)
        .arg(unpack_bin())
        .args(["-q", "-s", "none"])
        .arg(&deb)
        .arg(&root));
    assert_eq!(r.code, 3, "{}", r.stderr);
    // GNU time says "Command exited with non-zero status 3" on a line of its own first.
    let kib: u64 = std::fs::read_to_string(&peak).unwrap().lines().last().unwrap().parse().unwrap();
    assert!(kib < 64 << 10, "peak RSS {kib} KiB");

    // An uncompressed member has no checks to reach: its tail is not read at all.
    let mut tar = data_tar(2);
    tar.resize(tar.len() + bound + (1 << 20), 0);
    let deb =
        package(dir.path(), "plain-tail", ("control.tar", &control_tar(2)), ("data.tar", &tar));
    assert_same_tree(
        &unpacked(dir.path(), "plain-tail", &deb),
        &unpacked(dir.path(), "plain-zst", &plain),
        "an uncompressed member's tail",
    );
}

/// Inside the member, after the compressed stream: dpkg-deb ignores anything there (it reads
/// the first stream of xz, zstd, bzip2 and lzma, and gzip's members until something else is
/// there), where `xz -d`, `zstd -d` and `bzip2 -d` decode further streams: a second stream would
/// make the package two different trees to two tools. Junk, zeros and a second stream are all
/// refused (gzip's further members aside: the next test).
#[test]
fn bytes_after_the_compressed_stream_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (root, before) = installed_root(dir.path());
    for format in [Gzip, Xz, XzBlocks, Zstd, Bzip2, Lzma] {
        let stream = format.compress(&data_tar(2));
        let second = format
            .compress(&tar(&[("./usr/share/integrity/second.txt", b"from the second stream\n")]));
        for (tail, bytes) in
            [("junk", b"GARBAGE!".repeat(8)), ("zeros", vec![0; 16]), ("second-stream", second)]
        {
            if format == Gzip && tail == "second-stream" {
                continue; // another member: the next test
            }
            let mut member = stream.clone();
            member.extend_from_slice(&bytes);
            let (deb, name) = package_with(
                dir.path(),
                &format!("{format:?}-{tail}"),
                Member::Data,
                format,
                &member,
            );
            assert_refused(
                &deb,
                &name,
                &root,
                &before,
                &format!("{} bytes follow the end of the compressed stream", bytes.len()),
            );
        }
    }
}

/// gzip's members, though, are one stream to every gzip reader (gzip, zlib, so dpkg-deb): a
/// data.tar.gz cut in two members, in the middle of a file, unpacks whole.
#[test]
fn a_gzip_member_after_another_continues_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let tar = data_tar(2);
    let mut two = Gzip.compress(&tar[..100_000]);
    two.extend_from_slice(&Gzip.compress(&tar[100_000..]));
    let (deb, _) = package_with(dir.path(), "two-members", Member::Data, Gzip, &two);
    let (plain, _) = package_with(dir.path(), "plain", Member::Data, Gzip, &Gzip.compress(&tar));
    let ours = unpacked(dir.path(), "two", &deb);
    assert_same_tree(&ours, &unpacked(dir.path(), "one", &plain), "two gzip members");
    if has_dpkg_deb() {
        assert_same_tree(
            &ours,
            &reference_tree(&deb, &dir.path().join("dpkg")),
            "two gzip members against dpkg-deb -x",
        );
    }
}

/// The checks fail after every entry of the package has been written: the transaction, here
/// of two packages with a durable strategy, still rolls back as a whole, since the writer
/// commits only once the reader has verified every member.
#[test]
fn a_check_that_fails_after_the_last_entry_rolls_the_whole_transaction_back() {
    let dir = tempfile::tempdir().unwrap();
    let (root, before) = installed_root(dir.path());
    let other = tar(&[
        ("./", b""),
        ("./usr/", b""),
        ("./usr/share/", b""),
        ("./usr/share/other.txt", b"another package\n"),
    ]);
    let first = package(
        dir.path(),
        "other_1",
        ("control.tar", &control_tar(1)),
        ("data.tar.xz", &Xz.compress(&other)),
    );
    let mut stream = XzBlocks.compress(&data_tar(2));
    let (_, bytes) = XzBlocks.checks(&stream).swap_remove(2);
    stream[bytes.start] ^= 0x01; // the footer, read last
    let (second, member) = package_with(dir.path(), "integrity_2", Member::Data, XzBlocks, &stream);
    for strategy in ["fsync", "syncfs"] {
        let r = unpack([
            "-q",
            "-s",
            strategy,
            first.to_str().unwrap(),
            second.to_str().unwrap(),
            root.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 3, "{strategy}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("{}: {member}: ", second.display())),
            "{strategy}: {}",
            r.stderr
        );
        assert_same_tree(&snapshot(&root), &before, strategy);
        assert!(leftover_temps(&root).is_empty(), "{strategy}: temporary files left");
    }
}
