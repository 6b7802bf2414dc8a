//! Whose metadata the engine applies, and through what: a directory the root already has keeps
//! its owner, group and mode (a package's `./tmp/` does not drop /tmp's sticky bit), only the
//! directories an unpack makes take the archive's; and the metadata of a FIFO, device or
//! symlink is set through a descriptor of the node the engine made, never through its name,
//! which someone who can write the directory may swap in between (the race is made
//! deterministic by strace stopping the engine right after it made the node).

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tar::{EntryType, Header};

/// The archive's mtime for every entry here.
const MTIME: i64 = 1_700_000_000;

/// One tar entry with a raw name (at most 100 bytes) and the given metadata.
struct Rec {
    path: &'static [u8],
    kind: EntryType,
    mode: u32,
    owner: (u64, u64),
    data: &'static [u8],
    link: &'static str,
    /// Major and minor, for a device.
    dev: (u32, u32),
}

fn rec(path: &'static [u8], kind: EntryType, mode: u32, owner: (u64, u64)) -> Rec {
    Rec { path, kind, mode, owner, data: b"", link: "", dev: (0, 0) }
}

fn file(path: &'static [u8], data: &'static [u8]) -> Rec {
    Rec { data, ..rec(path, EntryType::Regular, 0o644, (0, 0)) }
}

/// A data.tar of `recs`, each at mtime [`MTIME`].
fn data_tar(recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..r.path.len()].copy_from_slice(r.path);
        h.as_old_mut().linkname[..r.link.len()].copy_from_slice(r.link.as_bytes());
        h.set_entry_type(r.kind);
        h.set_size(r.data.len() as u64);
        h.set_mode(r.mode);
        h.set_uid(r.owner.0);
        h.set_gid(r.owner.1);
        h.set_mtime(MTIME as u64);
        h.set_device_major(r.dev.0).unwrap();
        h.set_device_minor(r.dev.1).unwrap();
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(r.data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// (mode with the type bits, uid, gid, mtime) of `path`, not following it.
fn meta(path: &Path) -> (u32, u32, u32, i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.mode(), m.uid(), m.gid(), m.mtime())
}

fn set_mtime(path: &Path, secs: i64) {
    let t = rustix::fs::Timespec { tv_sec: secs, tv_nsec: 0 };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &rustix::fs::Timestamps { last_access: t, last_modification: t },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

#[test]
fn existing_directories_keep_owner_group_mode_and_mtime_and_only_new_ones_take_the_archive_s() {
    assert!(is_root(), "the integration tests run as root (owners)");
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    // A root as a system has it: /tmp sticky and world-writable, /etc root's, /srv left alone
    // by the package's files, a merged /usr (`bin -> usr/bin`).
    for (dir, mode) in [("tmp", 0o1777), ("etc", 0o755), ("srv", 0o750), ("usr/bin", 0o755)] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        chmod(&root.join(dir), mode);
    }
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    std::os::unix::fs::chown(root.join("srv"), Some(0), Some(4)).unwrap();
    let old = 1_000_000_000;
    for dir in ["tmp", "etc", "srv", "usr/bin"] {
        set_mtime(&root.join(dir), old);
    }
    let before: Vec<_> =
        ["tmp", "etc", "srv", "usr/bin"].iter().map(|d| meta(&root.join(d))).collect();
    let data = data_tar(&[
        rec(b"./", EntryType::Directory, 0o755, (0, 0)),
        rec(b"./tmp/", EntryType::Directory, 0o755, (0, 0)),
        file(b"./tmp/file", b"x"),
        rec(b"./etc/", EntryType::Directory, 0o777, (1000, 1000)),
        file(b"./etc/conf", b"x"),
        rec(b"./srv/", EntryType::Directory, 0o777, (1000, 1000)),
        rec(b"./bin/", EntryType::Directory, 0o700, (1000, 1000)),
        file(b"./bin/tool", b"x"),
        rec(b"./new/", EntryType::Directory, 0o750, (1234, 5678)),
        rec(b"./new/inner/", EntryType::Directory, 0o700, (4321, 8765)),
        file(b"./new/inner/f", b"x"),
    ]);
    let deb = common::deb_builder::write_deb(fs.dir.path(), "dirs.deb", "data.tar", &data);
    let r = unpack(["-q", "-s", "fsync", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(root.join("tmp/file").is_file() && root.join("usr/bin/tool").is_file());

    let after: Vec<_> =
        ["tmp", "etc", "srv", "usr/bin"].iter().map(|d| meta(&root.join(d))).collect();
    let owner_mode = |m: &(u32, u32, u32, i64)| (m.0, m.1, m.2);
    assert_eq!(owner_mode(&after[0]), (0o041777, 0, 0), "tmp keeps its sticky bit");
    assert_eq!(owner_mode(&after[1]), (0o040755, 0, 0), "etc stays root's");
    assert_eq!(
        after[2], before[2],
        "srv, into which nothing was renamed, is untouched, mtime included"
    );
    assert_eq!(
        owner_mode(&after[3]),
        owner_mode(&before[3]),
        "usr/bin, through the bin symlink, keeps its metadata"
    );
    // An existing directory's mtime is what the renames into it left, never the archive's.
    for (i, dir) in [(0, "tmp"), (1, "etc"), (3, "usr/bin")] {
        assert!(after[i].3 > old && after[i].3 != MTIME, "{dir}: mtime {}", after[i].3);
    }
    // Directories the unpack made take the archive's owner, mode and mtime.
    assert_eq!(meta(&root.join("new")), (0o040750, 1234, 5678, MTIME));
    assert_eq!(meta(&root.join("new/inner")), (0o040700, 4321, 8765, MTIME));
}

/// A root-only file beside the root, as a racing user would aim at.
fn root_only_file(fs: &Scratch) -> PathBuf {
    let outside = fs.path().join("shadow");
    std::fs::write(&outside, b"root only\n").unwrap();
    chmod(&outside, 0o600);
    outside
}

/// Runs `unpack -s STRATEGY DEB ROOT` under strace, which stops it (SIGSTOP) right after the
/// first `syscall` returns; runs `swap` while it is stopped, lets it go on and returns the run.
fn unpack_stopped_after(
    syscall: &str,
    strategy: &str,
    deb: &Path,
    root: &Path,
    log: &Path,
    swap: impl FnOnce(),
) -> Run {
    // Under timeout(1), so that an unpack that hangs fails the test instead of hanging it.
    let mut child = Command::new("timeout")
        .args(["300", "strace", "-f", "-qq", "-e"])
        .arg(format!("trace={syscall}"))
        .arg("-e")
        .arg(format!("inject={syscall}:signal=STOP:when=1"))
        .arg("-o")
        .arg(log)
        .arg(unpack_bin())
        .args(["-q", "-s", strategy])
        .arg(deb)
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strace runs");
    // strace writes "PID --- stopped by SIGSTOP ---" once the engine is stopped: only then the
    // swap, so that the order of events is fixed, whatever the machine's speed.
    let started = Instant::now();
    let pid = loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.ends_with("--- stopped by SIGSTOP ---")) {
            break line.split_whitespace().next().unwrap().parse::<i32>().unwrap();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("unpack ended ({status}) before it was stopped: {text}");
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("never stopped: {text}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Resumed whatever the swap does: a stopped unpack would keep the scratch filesystem busy.
    let swapped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(swap));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::CONT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    if let Err(panic) = swapped {
        std::panic::resume_unwind(panic);
    }
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_symlink_swapped_in_after_mknodat_does_not_lend_a_fifo_s_mode_to_a_file_outside_the_root() {
    assert!(is_root(), "the integration tests run as root");
    let fs = scratch("ext4", "defaults");
    let outside = root_only_file(&fs);
    let fifo = data_tar(&[rec(b"./srv/fifo", EntryType::Fifo, 0o4777, (0, 0))]);
    let deb = common::deb_builder::write_deb(fs.dir.path(), "fifo.deb", "data.tar", &fifo);
    // The FIFO's directory is one another user can write.
    let root = fs.subdir("root");
    std::fs::create_dir(root.join("srv")).unwrap();
    chmod(&root.join("srv"), 0o777);
    let temp = root.join("srv/fifo.unpack-new");
    let r = unpack_stopped_after(
        "mknodat",
        "none",
        &deb,
        &root,
        &fs.dir.path().join("strace.log"),
        || {
            std::fs::remove_file(&temp).unwrap();
            std::os::unix::fs::symlink(&outside, &temp).unwrap();
        },
    );
    assert_eq!(meta(&outside).0, 0o100600, "the file outside the root kept its mode: {}", r.stderr);
    assert_eq!(std::fs::read(&outside).unwrap(), b"root only\n");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("srv/fifo: replaced by someone else while it was being made"),
        "{}",
        r.stderr
    );
    assert!(
        !root.join("srv/fifo").exists() && std::fs::symlink_metadata(&temp).is_err(),
        "rolled back"
    );

    // A device node is checked for its number too: one another device swapped in is not it.
    let null =
        data_tar(&[Rec { dev: (1, 3), ..rec(b"./srv/null", EntryType::Char, 0o666, (0, 0)) }]);
    let deb_null = common::deb_builder::write_deb(fs.dir.path(), "null.deb", "data.tar", &null);
    let root = fs.subdir("device");
    std::fs::create_dir(root.join("srv")).unwrap();
    chmod(&root.join("srv"), 0o777);
    let temp = root.join("srv/null.unpack-new");
    let r = unpack_stopped_after(
        "mknodat",
        "none",
        &deb_null,
        &root,
        &fs.dir.path().join("strace-null.log"),
        || {
            std::fs::remove_file(&temp).unwrap();
            let zero = rustix::fs::makedev(1, 5);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &temp,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::from_raw_mode(0o600),
                zero,
            )
            .unwrap();
        },
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("srv/null: replaced by someone else while it was being made"),
        "{}",
        r.stderr
    );
    assert!(!root.join("srv/null").exists(), "rolled back");

    // Without the race the FIFO gets every bit of its mode, and its mtime, through the descriptor.
    let root = fs.subdir("calm");
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(meta(&root.join("srv/fifo")), (0o014777, 0, 0, MTIME));
}

#[test]
fn a_hard_link_swapped_in_after_symlinkat_does_not_give_a_file_outside_the_root_away() {
    assert!(is_root(), "the integration tests run as root");
    let fs = scratch("ext4", "defaults");
    let outside = root_only_file(&fs);
    let link =
        Rec { link: "target", ..rec(b"./srv/link", EntryType::Symlink, 0o777, (1000, 1000)) };
    let deb =
        common::deb_builder::write_deb(fs.dir.path(), "link.deb", "data.tar", &data_tar(&[link]));
    let root = fs.subdir("root");
    std::fs::create_dir(root.join("srv")).unwrap();
    chmod(&root.join("srv"), 0o777);
    let temp = root.join("srv/link.unpack-new");
    let r = unpack_stopped_after(
        "symlinkat",
        "none",
        &deb,
        &root,
        &fs.dir.path().join("strace.log"),
        || {
            std::fs::remove_file(&temp).unwrap();
            std::fs::hard_link(&outside, &temp).unwrap();
        },
    );
    let m = meta(&outside);
    assert_eq!(
        (m.1, m.2, m.3 != MTIME),
        (0, 0, true),
        "the file outside the root kept its owner and mtime: {}",
        r.stderr
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("srv/link: replaced by someone else while it was being made"),
        "{}",
        r.stderr
    );

    // Without the race the symlink itself gets the archive's owner and mtime.
    let root = fs.subdir("calm");
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let m = meta(&root.join("srv/link"));
    assert_eq!((m.1, m.2, m.3), (1000, 1000, MTIME));
    assert_eq!(std::fs::read_link(root.join("srv/link")).unwrap(), Path::new("target"));
}

/// A .deb whose control file names package `name` at `version`, holding `data`.
fn deb_with_control(dir: &Path, file: &str, name: &str, version: &str, data: &[u8]) -> PathBuf {
    let text = format!("Package: {name}\nVersion: {version}\nArchitecture: all\n");
    let mut header = Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    let mut control = tar::Builder::new(Vec::new());
    control.append_data(&mut header, "./control", text.as_bytes()).unwrap();
    let control = control.into_inner().unwrap();
    let path = dir.join(file);
    let members: [(&str, &[u8]); 3] =
        [("debian-binary", b"2.0\n"), ("control.tar", &control), ("data.tar", data)];
    std::fs::write(&path, common::deb_builder::ar(&members)).unwrap();
    path
}

/// What a terminal would act on: ESC, BEL, CSI (U+009B) and the bidi override U+202E.
fn has_raw_controls(text: &str) -> bool {
    text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'])
}

#[test]
fn escape_sequences_from_packages_and_roots_reach_the_terminal_escaped_and_json_exact() {
    let fs = scratch("ext4", "defaults");
    // Control fields: the human report escapes them, the JSON report keeps them exact.
    let version = "1.0\u{1b}]0;pwned\u{7}\u{9b}2J\u{202e}";
    let deb = deb_with_control(
        fs.dir.path(),
        "esc.deb",
        "esc\u{1b}[31m",
        version,
        &data_tar(&[file(b"./f", b"x")]),
    );
    let root = fs.subdir("report");
    let r = unpack(["-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!has_raw_controls(&r.stdout), "{:?}", r.stdout);
    assert!(
        r.stdout
            .starts_with("esc\\033[31m 1.0\\033]0;pwned\\007\\302\\2332J\\342\\200\\256 (all): "),
        "{}",
        r.stdout
    );
    let root = fs.subdir("json");
    let r = unpack(["--json", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["packages"][0]["version"], version);
    assert_eq!(r.json()["packages"][0]["name"], "esc\u{1b}[31m");

    // Entry names in the messages of a refused package, invalid UTF-8 byte for byte.
    let root = fs.subdir("refused");
    for (name, shown) in
        [(&b"./a\x1b[2Jb"[..], "'a\\033[2Jb'"), (b"./bad\xff\xfe", "'bad\\377\\376'")]
    {
        let link = Rec { link: "./missing", ..rec(name, EntryType::Link, 0o644, (0, 0)) };
        let deb = deb_with_control(fs.dir.path(), "link.deb", "link", "1", &data_tar(&[link]));
        let r = unpack(["-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
        assert_eq!(r.code, 3, "{}", r.stderr);
        assert!(!has_raw_controls(&r.stderr) && !r.stderr.contains('\u{fffd}'), "{:?}", r.stderr);
        assert!(r.stderr.contains(&format!("hard link {shown} -> 'missing'")), "{}", r.stderr);
    }

    // A name from the root in a conflict's message.
    let root = fs.subdir("conflict");
    std::fs::create_dir_all(root.join("x\u{1b}[8m/inside")).unwrap();
    let deb = deb_with_control(
        fs.dir.path(),
        "conflict.deb",
        "c",
        "1",
        &data_tar(&[file(b"./x\x1b[8m", b"x")]),
    );
    let r = unpack(["-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!has_raw_controls(&r.stderr), "{:?}", r.stderr);
    assert!(
        r.stderr.contains(
            "/x\\033[8m: the package has a file here, the root has a non-empty directory"
        ),
        "{}",
        r.stderr
    );
}

/// `writeback` opens each written file again by name at its barrier. Someone who can write the
/// directory may have put a FIFO at that name meanwhile: the open must neither wait on it for
/// ever nor flush it; the unpack fails, rolls back, and says what it found.
#[test]
fn a_fifo_swapped_in_before_the_barrier_reopens_a_file_fails_the_unpack_instead_of_hanging_it() {
    let fs = scratch("ext4", "defaults");
    let deb = common::deb_builder::write_deb(
        fs.dir.path(),
        "file.deb",
        "data.tar",
        &data_tar(&[file(b"./srv/file", b"data\n")]),
    );
    let root = fs.subdir("root");
    std::fs::create_dir(root.join("srv")).unwrap();
    chmod(&root.join("srv"), 0o777);
    let temp = root.join("srv/file.unpack-new");
    // The first sync_file_range is the one after the file is written, before the barrier.
    let r = unpack_stopped_after(
        "sync_file_range",
        "writeback",
        &deb,
        &root,
        &fs.dir.path().join("strace.log"),
        || {
            std::fs::remove_file(&temp).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &temp,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o666),
                0,
            )
            .unwrap();
        },
    );
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("srv/file: opening the written file to flush it: replaced by something that is not a regular file"), "{}", r.stderr);
    assert!(
        !root.join("srv/file").exists() && std::fs::symlink_metadata(&temp).is_err(),
        "rolled back"
    );
}
