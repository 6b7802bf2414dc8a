//! The sandbox the fuzz targets run the whole engine in, and what they check after each run.
//!
//! libFuzzer by itself catches panics, hangs and runaway memory. What it cannot see is the
//! engine's other promise for hostile input: nothing is ever written outside the root, and a
//! failed unpack leaves the root exactly as it was. So every run unpacks into a root laid out
//! with the traps a hostile root can hold (symlinks out of it, absolute and relative, a loop,
//! a merged /usr, a file where a package may want a directory), next to a `host` directory
//! that those symlinks point at, and compares snapshots of both before and after.
//!
//! Everything lives under `$UNPACK_FUZZ_DIR` (scripts/fuzz.sh mounts a small tmpfs there, so
//! that a decompression bomb fills that and not the machine), else /dev/shm.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use unpack::Error;

/// The control.tar of the packages the `tar_entries` target wraps around its input.
const CONTROL: &[u8] = b"Package: fuzz\nVersion: 1.0\nArchitecture: all\n";

/// The per-process working directory: `in.deb` and `box/{root,host}`.
fn work() -> &'static Path {
    static WORK: OnceLock<PathBuf> = OnceLock::new();
    WORK.get_or_init(|| {
        let base = std::env::var_os("UNPACK_FUZZ_DIR")
            .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from);
        let work = base.join(format!("unpack-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{}: {e}", work.display()));
        work
    })
}

/// Unpacks `deb` (the bytes of a package file) into a fresh trapped root with the `none`
/// strategy, then checks that nothing outside the root changed and that a failure changed
/// nothing at all. Panics (a libFuzzer crash) when either is not so.
pub fn unpack_in_sandbox(deb: &[u8]) {
    let work = work();
    let package = work.join("in.deb");
    std::fs::write(&package, deb).unwrap_or_else(|e| panic!("{}: {e}", package.display()));
    let sandbox = work.join("box");
    // What the previous run left; remove_dir_all works by descriptor, so depth is no problem.
    let _ = std::fs::remove_dir_all(&sandbox);
    lay_traps(&sandbox);
    let root = sandbox.join("root");
    let before = snapshot(&sandbox, true);
    let options = unpack::Options::new(
        unpack::durability::by_name("none", 1).expect("the none strategy exists"),
    );
    match unpack::unpack(&[package], &root, &options) {
        Ok(_) => {
            // The root is the package's now; everything beside it must be as it was.
            assert_same(
                &snapshot(&sandbox, false),
                &before.into_iter().filter(|(p, _)| !p.starts_with("root")).collect(),
                "a successful unpack",
            );
        }
        Err(e) => {
            assert_blames_the_package(&e);
            assert_same(&snapshot(&sandbox, true), &before, &format!("a failed unpack ({e})"));
        }
    }
}

/// Wraps `data` into a valid .deb as its uncompressed `data.tar`, so that every input reaches
/// the tar reader, entry validation and path resolution.
pub fn deb_with_data(data: &[u8]) -> Vec<u8> {
    static CONTROL_TAR: OnceLock<Vec<u8>> = OnceLock::new();
    let control = CONTROL_TAR.get_or_init(|| {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(CONTROL.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, "./control", CONTROL).expect("an in-memory tar");
        builder.into_inner().expect("an in-memory tar")
    });
    let mut deb = b"!<arch>\n".to_vec();
    for (name, member) in
        [("debian-binary", &b"2.0\n"[..]), ("control.tar", control), ("data.tar", data)]
    {
        writeln!(deb, "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`", 0, 0, 0, 100644, member.len())
            .expect("writing to a Vec");
        deb.extend_from_slice(member);
        if member.len() % 2 == 1 {
            deb.push(b'\n');
        }
    }
    deb
}

/// A hostile package may fail as a bad package (exit 3) or as a conflict with what the root
/// holds (exit 1, the traps invite it); an I/O error in the root (exit 4) would tell an
/// installer that its disk is broken, which is only true when the small tmpfs is full.
fn assert_blames_the_package(e: &Error) {
    match e {
        Error::BadPackage { .. } | Error::Conflict { .. } => {}
        Error::Root { source, .. } if source.raw_os_error() == Some(libc::ENOSPC) => {}
        other => panic!("a package's content was reported as something else: {other:?}"),
    }
}

/// The root and its neighbour: `host` is where an escape would land, `root` holds symlinks
/// that lead there if followed naively, and the engine's state directory made in advance so
/// that a failed run must leave every byte and time as it found it.
fn lay_traps(sandbox: &Path) {
    let root = sandbox.join("root");
    let host = sandbox.join("host");
    for dir in
        [root.join("var/lib/unpack"), root.join("usr/bin"), root.join("empty"), host.join("sub")]
    {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let files = [
        (root.join("var/lib/unpack/lock"), ""),
        (root.join("file"), "a file"),
        (host.join("secret"), "host data"),
    ];
    let links = [
        ("usr/bin", "bin"),
        ("/etc", "etc"),
        ("../..", "up"),
        ("../host", "host"),
        (host.to_str().expect("a UTF-8 sandbox path"), "hostabs"),
        ("loop", "loop"),
        ("usr/bin/x/../../nowhere", "dangling"),
    ];
    for (path, content) in files {
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for (target, name) in links {
        symlink(target, root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// What a path holds, with everything an unpack could change. The lock file's content and
/// times are the engine's own, so only its existence counts.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Lock,
    Other {
        kind: u32,
        mode: u32,
        uid: u32,
        gid: u32,
        mtime: (i64, i64),
        content: Vec<u8>,
        rdev: u64,
    },
}

/// Every path under `sandbox` (the sandbox itself excluded), or only those outside the root
/// when `with_root` is false: a successful unpack may have built paths too deep for std::fs.
fn snapshot(sandbox: &Path, with_root: bool) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let full = sandbox.join(&rel);
        let entries =
            std::fs::read_dir(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", full.display()));
            let rel = rel.join(entry.file_name());
            if !with_root && rel == Path::new("root") {
                continue;
            }
            let path = sandbox.join(&rel);
            let m = std::fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let content = if m.is_symlink() {
                std::fs::read_link(&path).map(|t| t.into_os_string().into_encoded_bytes())
            } else if m.is_file() {
                std::fs::read(&path)
            } else {
                Ok(Vec::new())
            }
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if m.is_dir() {
                todo.push(rel.clone());
            }
            let node = if rel == Path::new("root/var/lib/unpack/lock") {
                Node::Lock
            } else {
                Node::Other {
                    kind: m.mode() & 0o170000,
                    mode: m.mode() & 0o7777,
                    uid: m.uid(),
                    gid: m.gid(),
                    mtime: (m.mtime(), m.mtime_nsec()),
                    content,
                    rdev: m.rdev(),
                }
            };
            out.insert(rel, node);
        }
    }
    out
}

fn assert_same(now: &BTreeMap<PathBuf, Node>, before: &BTreeMap<PathBuf, Node>, after_what: &str) {
    let mut diffs = Vec::new();
    for (path, node) in now {
        match before.get(path) {
            None => diffs.push(format!("new: {} {node:?}", path.display())),
            Some(old) if old != node => {
                diffs.push(format!("changed: {}\n  was {old:?}\n  now {node:?}", path.display()))
            }
            Some(_) => {}
        }
    }
    diffs.extend(
        before.keys().filter(|p| !now.contains_key(*p)).map(|p| format!("gone: {}", p.display())),
    );
    assert!(diffs.is_empty(), "{after_what} changed what it must not:\n{}", diffs.join("\n"));
}

/// Recovers a trapped root whose journal is `data` (see the `journal_recover` target), with an
/// intent file beside it, and checks that `host` beside the root did not change in any byte,
/// mode or time, whatever recovery did or refused. `@H` in `data` is the absolute path of
/// `host`, so that inputs can aim at it wherever the sandbox is. When the first byte is odd the
/// rest is taken as journal records and sealed with a valid count and checksum, so that
/// mutations reach recovery and not only the checksum.
pub fn recover_in_sandbox(data: &[u8]) {
    let Some((&mode, records)) = data.split_first() else { return };
    let sandbox = work().join("jbox");
    let _ = std::fs::remove_dir_all(&sandbox);
    lay_traps(&sandbox);
    let (root, host) = (sandbox.join("root"), sandbox.join("host"));
    let host_bytes = host.to_str().expect("a UTF-8 sandbox path").as_bytes();
    let records = replace(records, b"@H", host_bytes);
    let journal = if mode % 2 == 1 {
        unpack::txn::journal::seal(&records).expect("fuzz inputs are small")
    } else {
        records
    };
    let state = root.join("var/lib/unpack");
    // What a journal could aim at: temporary names and an empty directory in the root and in
    // the host, a new tree of the engine's in both.
    for file in [
        root.join("usr/bin/tool"),
        root.join("usr/bin/tool.unpack-new"),
        host.join("secret.unpack-new"),
        host.join("sub/x.unpack-new"),
        host.join("sub/x"),
    ] {
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    for dir in [
        root.join("new.unpack-new/inner"),
        host.join("tree.unpack-new/inner"),
        host.join("sub/empty"),
    ] {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(state.join(unpack::JOURNAL), &journal).expect("the state directory");
    std::fs::write(state.join(unpack::INTENT), "").expect("the state directory");
    let before = snapshot(&host, true);
    let options = unpack::Options::new(
        unpack::durability::by_name("none", 1).expect("the none strategy exists"),
    );
    // Refusing (an error) is as fine as recovering: only a change outside the root is not.
    let outcome = unpack::recover_root(&root, &options);
    assert_same(&snapshot(&host, true), &before, &format!("recovery ({outcome:?})"));
}

/// `data` with every `from` replaced by `to`.
fn replace(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while !rest.is_empty() {
        if rest.starts_with(from) {
            out.extend_from_slice(to);
            rest = &rest[from.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}
