//! tar headers that lie, built byte by byte in each test and run through the real `unpack`:
//! every one is either refused as a bad package (exit 3, the root exactly as it was) or
//! unpacked faithfully, and none writes outside the root. Each test pins one row of the
//! table "What the engine does with input that lies" in docs/security.md.

mod common;

use common::deb_builder::write_deb;
use common::raw_tar::*;
use common::*;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tar::EntryType;

/// A root on ext4 with a package already installed (`other`), as an installer meets it.
fn installed_root(fs: &Scratch, name: &str) -> PathBuf {
    let root = fs.subdir(name);
    let r = unpack([
        "-s",
        "none",
        fixture("other_1.0_all.deb").to_str().unwrap(),
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    root
}

/// The address space every hostile unpack here runs in: what "memory stays bounded" means.
const MEMORY_LIMIT: u64 = 512 << 20;

/// `unpack -s none DEB ROOT` in at most [`MEMORY_LIMIT`] of address space (prlimit, util-linux).
fn unpack_bounded(deb: &Path, root: &Path) -> Run {
    let limit = format!("--as={MEMORY_LIMIT}");
    run(std::process::Command::new("prlimit")
        .args([&limit, "--", unpack_bin(), "-s", "none"])
        .arg(deb)
        .arg(root))
}

/// Everything on the scratch filesystem but the root `name`: what no package may change.
fn beside(fs: &Scratch, name: &str) -> std::collections::BTreeMap<PathBuf, Node> {
    snapshot(fs.path()).into_iter().filter(|(p, _)| !p.starts_with(name)).collect()
}

/// Unpacks `data` (a data.tar) as package `name` over an installed root, in bounded memory,
/// and asserts it is refused as a bad package, by a message that names it and says `why`, leaving the root as it
/// was and nothing beside it.
fn assert_refused(fs: &Scratch, name: &str, data_name: &str, data: &[u8], why: &str) {
    let root = installed_root(fs, name);
    let before = snapshot(&root);
    let beside_before = beside(fs, name);
    let deb = write_deb(fs.dir.path(), &format!("{name}.deb"), data_name, data);
    let r = unpack_bounded(&deb, &root);
    assert_eq!(r.code, 3, "{name}: {}", r.stderr);
    assert!(
        r.stderr.starts_with("unpack: error: ") && r.stderr.contains(&format!("{name}.deb")),
        "{name}: {}",
        r.stderr
    );
    assert!(r.stderr.contains(why), "{name}: expected '{why}' in: {}", r.stderr);
    assert_same_tree(&snapshot(&root), &before, name);
    assert_same_tree(&beside(fs, name), &beside_before, &format!("{name}: beside the root"));
}

/// Unpacks `data` as package `name` into a fresh root, in bounded memory, and asserts it
/// succeeds without a
/// temporary file left or anything beside the root changed; returns the root.
fn assert_unpacked(fs: &Scratch, name: &str, data_name: &str, data: &[u8]) -> PathBuf {
    let root = fs.subdir(name);
    let beside_before = beside(fs, name);
    let deb = write_deb(fs.dir.path(), &format!("{name}.deb"), data_name, data);
    let r = unpack_bounded(&deb, &root);
    assert_eq!(r.code, 0, "{name}: {}", r.stderr);
    assert!(leftover_temps(&root).is_empty(), "{name}");
    assert_same_tree(&beside(fs, name), &beside_before, &format!("{name}: beside the root"));
    root
}

#[test]
fn a_size_larger_than_the_data_is_refused() {
    let fs = scratch("ext4", "defaults");
    let claims_4096 = || file("./usr/share/liar", &[b'x'; 4096]);
    assert_refused(
        &fs,
        "short-file",
        "data.tar",
        &tar_cut(vec![claims_4096()], 1000),
        "archive ends after 1000 of 4096 bytes",
    );
    // The same lie after a complete file, so that the complete one was already written.
    let after_good = tar_cut(
        vec![dir("./usr/share/good/"), file("./usr/share/good/a", b"complete"), claims_4096()],
        1000,
    );
    assert_refused(
        &fs,
        "short-after-good",
        "data.tar",
        &after_good,
        "archive ends after 1000 of 4096 bytes",
    );
    // A size field that is not a number, and a header whose checksum is wrong.
    let garbage = with(file("./usr/share/x", b"abc"), |h| h.as_old_mut().size = *b"12345678x01\0");
    assert_refused(&fs, "size-not-octal", "data.tar", &tar(vec![garbage]), "numeric field");
    let mut bad_sum = file("./usr/share/x", b"abc");
    bad_sum.header.as_old_mut().cksum[0] ^= 1;
    assert_refused(&fs, "bad-checksum", "data.tar", &tar(vec![bad_sum]), "checksum");
}

/// The mtime of `path` as (seconds, nanoseconds).
fn mtime(path: &Path) -> (i64, i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.mtime(), m.mtime_nsec())
}

#[test]
fn times_out_of_range_are_refused_or_clamped_and_never_overflow() {
    let fs = scratch("ext4", "defaults");
    // GNU tar writes a time before 1970 in base-256 two's complement; the engine cannot tell
    // -1 from 2^64-1 in that field and refuses it.
    let negative = with(file("./usr/share/old", b"x"), |h| h.as_old_mut().mtime = [0xff; 12]);
    assert_refused(&fs, "negative-mtime", "data.tar", &tar(vec![negative]), "mtime out of range");
    // A time past what the filesystem can hold is clamped by the kernel to its last second
    // (ext4: 2446-05-10), as with GNU tar and dpkg.
    let huge = with(file("./future", b"x"), |h| {
        h.as_old_mut().mtime = [0x80, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0]
    });
    let root = assert_unpacked(&fs, "huge-mtime", "data.tar", &tar(vec![huge]));
    let ext4_last_second = 0x3_7fff_ffff;
    assert_eq!(mtime(&root.join("future")).0, ext4_last_second);
}

#[test]
fn ids_beyond_32_bits_are_refused_and_large_ones_kept() {
    let fs = scratch("ext4", "defaults");
    let base256 =
        with(file("./usr/share/x", b"x"), |h| h.as_old_mut().uid = [0x80, 0, 0, 0x01, 0, 0, 0, 0]);
    assert_refused(
        &fs,
        "uid-2-to-the-32",
        "data.tar",
        &tar(vec![base256]),
        "uid 4294967296 out of range",
    );
    // (uid_t)-1 means "leave unchanged" to chown(2): never a real owner.
    let minus_one = with(file("./usr/share/x", b"x"), |h| {
        h.as_old_mut().gid = [0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
    });
    let minus_one = tar(vec![minus_one]);
    assert_refused(&fs, "gid-minus-one", "data.tar", &minus_one, "gid 4294967295 out of range");
    let largest = with(file("./big-ids", b"x"), |h| {
        h.as_old_mut().uid = [0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe];
        h.as_old_mut().gid = [0x80, 0, 0, 0, 0xee, 0x6b, 0x28, 0x00];
    });
    let root = assert_unpacked(&fs, "largest-ids", "data.tar", &tar(vec![largest]));
    let m = std::fs::metadata(root.join("big-ids")).unwrap();
    assert_eq!((m.uid(), m.gid()), (4_294_967_294, 4_000_000_000));
}

/// PAX headers, local (`x`) and global (`g`), valid or not, are refused as dpkg's tar reader
/// refuses them ("unsupported PAX tar header type"): no package dpkg-deb builds holds one, and
/// dpkg cannot install one that does (tests/refusals.rs runs dpkg on them).
#[test]
fn pax_headers_are_refused_as_dpkg_refuses_them() {
    let fs = scratch("ext4", "defaults");
    type Records<'a> = &'a [(&'a str, &'a [u8])];
    let cases: [(&str, Records); 5] = [
        ("valid", &[("uid", b"42"), ("gid", b"43"), ("size", b"3")]),
        ("mtime", &[("mtime", b"-1.5")]),
        ("malformed", &[("uid", b"-5")]),
        ("twice", &[("size", b"3"), ("size", b"1000")]),
        ("path", &[("path", b"usr/a\0b")]),
    ];
    for (name, records) in cases {
        let data = tar(vec![pax(EntryType::XHeader, records), file("./x", b"abc")]);
        let why = "unsupported PAX tar header type 'x'";
        assert_refused(&fs, &format!("pax-{name}"), "data.tar", &data, why);
    }
    let global = tar(vec![pax(EntryType::XGlobalHeader, &[("comment", b"hi")]), file("./x", b"a")]);
    let why = "unsupported PAX tar header type 'g'";
    assert_refused(&fs, "pax-global", "data.tar", &global, why);
}

#[test]
fn old_style_directory_entries_are_directories_as_with_dpkg_deb() {
    let fs = scratch("ext4", "defaults");
    // A regular file's type with a trailing `/`: `0`, and the pre-POSIX `\0`.
    let zero = with(rec(b"./d0/", EntryType::Regular, b""), |h| h.set_mode(0o750));
    let nul = with(rec(b"./dnul/", EntryType::Regular, b""), |h| {
        h.set_mode(0o700);
        h.as_old_mut().linkflag = [0];
    });
    let data =
        tar(vec![dir("./"), zero, nul, file("./d0/x", b"in d0"), file("./dnul/y", b"in dnul")]);
    let root = assert_unpacked(&fs, "old-style-dirs", "data.tar", &data);
    let deb = write_deb(fs.dir.path(), "old-style-dirs-ref.deb", "data.tar", &data);
    let mut expected = reference_tree(&deb, &fs.path().join("old-style-dirs-ref"));
    // GNU tar restores the mtime of type-5 directories only and leaves these at the time of
    // extraction; the engine gives them the archive's, as every directory it makes.
    for d in ["d0", "dnul"] {
        expected.get_mut(Path::new(d)).unwrap().mtime = (1_700_000_000, 0);
    }
    assert_same_tree(&snapshot(&root), &expected, "old-style directories");
    assert_eq!(std::fs::metadata(root.join("dnul")).unwrap().mode(), 0o040700);
}

#[test]
fn mode_bits_beyond_07777_are_dropped() {
    let fs = scratch("ext4", "defaults");
    // The mode field's 7 octal digits allow up to 07777777; a file type in it is ignored too.
    let all = with(file("./all-bits", b"x"), |h| h.as_old_mut().mode = *b"7777777\0");
    let typed = with(file("./typed", b"x"), |h| h.as_old_mut().mode = *b"0170644\0");
    let dir_bits = with(dir("./d/"), |h| h.as_old_mut().mode = *b"0041750\0");
    let root = assert_unpacked(&fs, "mode-bits", "data.tar", &tar(vec![all, typed, dir_bits]));
    let mode = |p: &str| std::fs::symlink_metadata(root.join(p)).unwrap().mode();
    assert_eq!(mode("all-bits"), 0o100000 | 0o7777);
    assert_eq!(mode("typed"), 0o100644, "a regular file, whatever the mode field says");
    assert_eq!(mode("d"), 0o040000 | 0o1750);
    let garbage = with(file("./x", b"x"), |h| h.as_old_mut().mode = *b"99999999");
    assert_refused(&fs, "mode-not-octal", "data.tar", &tar(vec![garbage]), "bad mode");
}

#[test]
fn names_with_newlines_are_refused_255_byte_names_unpacked_and_longer_ones_refused() {
    let fs = scratch("ext4", "defaults");
    // A name with a newline would be two lines of dpkg's info/PKG.list: dpkg refuses it.
    for (name, entry) in
        [("newline-file", file("./two\nlines", b"x")), ("newline-dir", dir("./and\nthen/"))]
    {
        let why = "newline not allowed in archive object name";
        assert_refused(&fs, name, "data.tar", &tar(vec![entry]), why);
    }

    // 4,000 characters in one name: longer than any filesystem allows.
    let one_name = "n".repeat(4000);
    let long = tar(vec![gnu_long_name(one_name.as_bytes()), file("./placeholder", b"x")]);
    assert_refused(
        &fs,
        "4000-byte-name",
        "data.tar",
        &long,
        "a name of 4000 bytes is longer than 255",
    );
    // 4,000 characters of path in short names: a deep tree, unpacked as it is.
    let deep = "d123456789/".repeat(363) + "end";
    assert_eq!(deep.len(), 3996);
    let root = assert_unpacked(
        &fs,
        "4000-byte-path",
        "data.tar",
        &tar(vec![gnu_long_name(deep.as_bytes()), file("./placeholder", b"deep")]),
    );
    assert_eq!(std::fs::read(root.join(&deep)).unwrap(), b"deep");

    // 255 bytes is a valid name, but not with the temporary suffix: such a temporary name keeps
    // the first bytes and a hash of the whole name, so two names that differ only at the end
    // stay apart. In a new tree nothing needs a temporary name but the tree's top.
    // 244 bytes is the longest name whose temporary name is the name and the suffix, 245 the
    // shortest that needs the hash: every length from there to 255 is unpacked.
    let (a, b) = ("f".repeat(255), "f".repeat(254) + "g");
    let in_tree = format!("{}/{a}", "d".repeat(255));
    let mut entries = vec![
        gnu_long_name(a.as_bytes()),
        file("./p", b"a"),
        gnu_long_name(b.as_bytes()),
        file("./p", b"b"),
        gnu_long_name(in_tree.as_bytes()),
        file("./p", b"in a new tree"),
    ];
    for len in 244..255 {
        entries.extend([
            gnu_long_name("e".repeat(len).as_bytes()),
            file("./p", len.to_string().as_bytes()),
        ]);
    }
    let root = assert_unpacked(&fs, "255-byte-names", "data.tar", &tar(entries));
    assert_eq!(std::fs::read(root.join(&a)).unwrap(), b"a");
    assert_eq!(std::fs::read(root.join(&b)).unwrap(), b"b");
    for len in 244..255 {
        assert_eq!(std::fs::read(root.join("e".repeat(len))).unwrap(), len.to_string().as_bytes());
    }
    assert_eq!(std::fs::read(root.join(&in_tree)).unwrap(), b"in a new tree");
    // A NUL cannot be in a ustar name, but can be in a GNU long name.
    assert_refused(
        &fs,
        "nul-in-long-name",
        "data.tar",
        &tar(vec![gnu_long_name(b"usr/a\0b"), file("./p", b"x")]),
        "NUL",
    );
}

#[test]
fn names_the_engine_uses_for_its_temporary_files_are_refused() {
    let fs = scratch("ext4", "defaults");
    // In this order a naive engine renames x.unpack-new's data over x's temporary file: x would
    // get the wrong content and x.unpack-new would vanish, with exit 0.
    let swap = tar(vec![file("./x.unpack-new", b"second"), file("./x", b"first")]);
    assert_refused(&fs, "temp-name-file", "data.tar", &swap, "a name ending in '.unpack-new'");
    // A directory of that name would stand where x's temporary file must go.
    let dir_first = tar(vec![dir("./x.unpack-new/"), file("./x", b"first")]);
    assert_refused(&fs, "temp-name-dir", "data.tar", &dir_first, "a name ending in '.unpack-new'");
}

#[test]
fn symlink_targets_the_kernel_cannot_store_are_refused_as_the_package_s_fault() {
    let fs = scratch("ext4", "defaults");
    // Both used to reach symlink(2) and fail there, as an I/O error in the root (exit 4).
    let nul =
        tar(vec![gnu_long_link(b"usr/a\0b"), link("./s", EntryType::Symlink, b"placeholder")]);
    assert_refused(
        &fs,
        "nul-in-symlink-target",
        "data.tar",
        &nul,
        "symlink target contains a NUL byte",
    );
    let long = tar(vec![
        gnu_long_link("t/".repeat(2048).as_bytes()),
        link("./s", EntryType::Symlink, b"placeholder"),
    ]);
    assert_refused(
        &fs,
        "4096-byte-symlink-target",
        "data.tar",
        &long,
        "symlink target of 4096 bytes is longer than 4095",
    );
    assert_refused(
        &fs,
        "empty-symlink-target",
        "data.tar",
        &tar(vec![link("./s", EntryType::Symlink, b"")]),
        "link without a target",
    );
}

#[test]
fn hard_links_to_anything_but_an_earlier_entry_are_refused() {
    let fs = scratch("ext4", "defaults");
    let to_itself = tar(vec![link("./h", EntryType::Link, b"./h")]);
    assert_refused(&fs, "hardlink-to-itself", "data.tar", &to_itself, "not an earlier entry");
    let to_later = tar(vec![link("./h", EntryType::Link, b"./f"), file("./f", b"data")]);
    assert_refused(&fs, "hardlink-to-later", "data.tar", &to_later, "not an earlier entry");
    let to_dir = tar(vec![dir("./d/"), link("./h", EntryType::Link, b"./d")]);
    assert_refused(&fs, "hardlink-to-dir", "data.tar", &to_dir, "the target is a directory");
    let to_root = tar(vec![link("./h", EntryType::Link, b"./")]);
    assert_refused(&fs, "hardlink-to-root", "data.tar", &to_root, "the target is the root");
    // An installed file is not an entry of this transaction either.
    let to_installed = tar(vec![link("./h", EntryType::Link, b"usr/bin/other-tool")]);
    assert_refused(&fs, "hardlink-to-installed", "data.tar", &to_installed, "not an earlier entry");

    // Through a symlink of the package to an earlier file: one inode, as tar makes it.
    let through = tar(vec![
        dir("./d/"),
        file("./d/f", b"data"),
        link("./s", EntryType::Symlink, b"d"),
        link("./h", EntryType::Link, b"s/f"),
    ]);
    let root = assert_unpacked(&fs, "hardlink-through-symlink", "data.tar", &through);
    let ino = |p: &str| std::fs::symlink_metadata(root.join(p)).unwrap().ino();
    assert_eq!(ino("h"), ino("d/f"));
    assert_eq!(std::fs::read(root.join("h")).unwrap(), b"data");
}

#[test]
fn the_same_path_twice_is_refused_unless_both_are_directories() {
    let fs = scratch("ext4", "defaults");
    let cases: [(&str, Vec<Rec>); 6] = [
        ("file-twice", vec![file("./f", b"one"), file("./f", b"two")]),
        (
            "file-then-symlink",
            vec![file("./f", b"one"), link("./f", EntryType::Symlink, b"elsewhere")],
        ),
        ("same-path-spelt-differently", vec![file("./usr/f", b"one"), file("/usr//f", b"two")]),
        ("dir-where-a-file-was", vec![file("./f", b"one"), dir("./f/")]),
        ("file-where-a-dir-was", vec![dir("./d/"), file("./d", b"one")]),
        (
            "fifo-then-hardlink",
            vec![rec(b"./p", EntryType::Fifo, b""), link("./p", EntryType::Link, b"./p")],
        ),
    ];
    for (name, recs) in cases {
        assert_refused(&fs, name, "data.tar", &tar(recs), "the path is already in this package");
    }
    // A file where the package already put entries, its directory implied: the package's
    // fault, not a conflict with a root that had nothing there.
    assert_refused(
        &fs,
        "file-where-an-implied-dir-was",
        "data.tar",
        &tar(vec![file("./x/y", b"one"), file("./x", b"two")]),
        "the path is already in this package",
    );
    // A path under what the package made a file: not a directory.
    assert_refused(
        &fs,
        "under-a-file",
        "data.tar",
        &tar(vec![file("./f", b"one"), file("./f/g", b"two")]),
        "'f' is not a directory in this package",
    );
    // Directories may repeat (packages list parents again); the last one's metadata wins.
    let again = tar(vec![dir("./d/"), with(dir("./d"), |h| h.set_mode(0o700))]);
    let root = assert_unpacked(&fs, "dir-twice", "data.tar", &again);
    assert_eq!(std::fs::metadata(root.join("d")).unwrap().mode() & 0o7777, 0o700);
}

/// A small valid data.tar: one file.
fn small_tar() -> Vec<u8> {
    tar(vec![dir("./usr/"), file("./usr/hello", b"hello\n")])
}

/// `small_tar()` as .xz with the dictionary size the block header declares set to the LZMA2
/// property `dict_prop` (dictionary (2 | p & 1) << (p / 2 + 11) bytes), its CRC32 fixed: what
/// a hostile encoder writes to make a decoder allocate that much.
fn xz_with_dict(dict_prop: u8) -> Vec<u8> {
    let mut xz = Vec::new();
    liblzma::read::XzEncoder::new(&small_tar()[..], 6).read_to_end(&mut xz).unwrap();
    // After the 12-byte stream header: the block header (size byte, flags, then the filter:
    // id 0x21 = LZMA2, one property byte), its CRC32 last.
    let size = (xz[12] as usize + 1) * 4;
    assert_eq!((xz[13], xz[14], xz[15]), (0x00, 0x21, 0x01), "one LZMA2 filter, no sizes");
    xz[16] = dict_prop;
    let mut crc = flate2::Crc::new();
    crc.update(&xz[12..12 + size - 4]);
    xz[12 + size - 4..12 + size].copy_from_slice(&crc.sum().to_le_bytes());
    xz
}

/// `small_tar()` as .zst whose frame header declares a window of 2^`window_log` bytes.
fn zst_with_window(window_log: u8) -> Vec<u8> {
    let mut zst = zstd::stream::encode_all(&small_tar()[..], 3).unwrap();
    // The frame header descriptor: no single-segment flag, so a window descriptor follows it
    // (exponent in its top five bits, window_log = 10 + exponent, mantissa 0).
    assert_eq!(zst[4] & 0x20, 0, "the frame has a window descriptor");
    zst[5] = (window_log - 10) << 3;
    zst
}

#[test]
fn decompressors_refuse_headers_that_demand_more_than_128_mib() {
    let fs = scratch("ext4", "defaults");
    // xz -9 uses a 64 MiB dictionary: real packages must keep working.
    let root = assert_unpacked(&fs, "xz-64mib", "data.tar.xz", &xz_with_dict(28));
    assert_eq!(std::fs::read(root.join("usr/hello")).unwrap(), b"hello\n");
    assert_refused(&fs, "xz-256mib", "data.tar.xz", &xz_with_dict(32), "memory limit reached");
    assert_refused(&fs, "xz-4gib", "data.tar.xz", &xz_with_dict(40), "memory limit reached");

    // The legacy .lzma header has the dictionary size as a plain 32-bit number at offset 1.
    let mut lzma = Vec::new();
    let options = liblzma::stream::LzmaOptions::new_preset(6).unwrap();
    let encoder = liblzma::stream::Stream::new_lzma_encoder(&options).unwrap();
    liblzma::read::XzEncoder::new_stream(&small_tar()[..], encoder).read_to_end(&mut lzma).unwrap();
    lzma[1..5].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert_refused(&fs, "lzma-1gib", "data.tar.lzma", &lzma, "memory limit reached");

    let root = assert_unpacked(&fs, "zst-64mib", "data.tar.zst", &zst_with_window(26));
    assert_eq!(std::fs::read(root.join("usr/hello")).unwrap(), b"hello\n");
    assert_refused(&fs, "zst-256mib", "data.tar.zst", &zst_with_window(28), "too much memory");
    assert_refused(&fs, "zst-2gib", "data.tar.zst", &zst_with_window(31), "too much memory");
}

/// A data.tar.zst of a few KiB: a header of type `kind` claiming `mib` MiB, then that many
/// MiB of zeros, in one zstd frame.
fn header_bomb(kind: EntryType, mib: u64) -> Vec<u8> {
    let bomb = with(rec(b"././@LongLink", kind, b""), |h| h.set_size(mib << 20));
    // One zstd frame: the engine, as dpkg-deb, reads no further frame.
    let mut zst = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    std::io::Write::write_all(&mut zst, bomb.header.as_bytes()).unwrap();
    let one_mib = vec![0u8; 1 << 20];
    for _ in 0..mib {
        std::io::Write::write_all(&mut zst, &one_mib).unwrap();
    }
    zst.finish().unwrap()
}

#[test]
fn a_gigabyte_long_name_or_pax_header_is_refused_in_bounded_memory() {
    let fs = scratch("ext4", "defaults");
    // The tar crate reads these records into memory whole; real ones are a few hundred bytes.
    for (name, kind) in [
        ("long-name-bomb", EntryType::GNULongName),
        ("long-link-bomb", EntryType::GNULongLink),
        ("pax-bomb", EntryType::XHeader),
    ] {
        let bomb = header_bomb(kind, 1024);
        assert!(bomb.len() < 256 << 10, "{name}: {} bytes", bomb.len());
        assert_refused(&fs, name, "data.tar.zst", &bomb, "bytes of tar headers");
    }
    // The same in control.tar, which the engine reads first.
    let root = installed_root(&fs, "control-bomb");
    let before = snapshot(&root);
    let deb = fs.dir.path().join("control-bomb.deb");
    let members: [(&str, &[u8]); 3] = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.zst", &header_bomb(EntryType::GNULongName, 1024)),
        ("data.tar", &tar(vec![])),
    ];
    std::fs::write(&deb, common::deb_builder::ar(&members)).unwrap();
    let r = unpack_bounded(&deb, &root);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("bytes of tar headers"), "{}", r.stderr);
    assert_same_tree(&snapshot(&root), &before, "control-bomb");

    // The bound is on headers only: a 2 MiB md5sums before ./control is read past as data.
    let control = b"Package: big\nVersion: 1\n";
    let big_md5sums =
        tar(vec![file("./md5sums", &vec![b'0'; 2 << 20]), file("./control", control)]);
    let members: [(&str, &[u8]); 3] =
        [("debian-binary", b"2.0\n"), ("control.tar", &big_md5sums), ("data.tar", &small_tar())];
    let deb = fs.dir.path().join("big-md5sums.deb");
    std::fs::write(&deb, common::deb_builder::ar(&members)).unwrap();
    let root = fs.subdir("big-md5sums");
    let r = unpack_bounded(&deb, &root);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(root.join("usr/hello").is_file());
}
