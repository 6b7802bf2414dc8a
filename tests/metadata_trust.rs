//! Whose metadata the engine applies: a directory the root already has keeps its owner, group
//! and mode (a package's `./tmp/` does not drop /tmp's sticky bit), only the directories an
//! unpack makes take the archive's.

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use tar::{EntryType, Header};

/// The archive's mtime for every entry here.
const MTIME: i64 = 1_700_000_000;

/// One tar entry with a raw name (at most 100 bytes) and the given metadata.
struct Rec {
    path: &'static str,
    kind: EntryType,
    mode: u32,
    owner: (u64, u64),
    data: &'static [u8],
    link: &'static str,
}

fn rec(path: &'static str, kind: EntryType, mode: u32, owner: (u64, u64)) -> Rec {
    Rec { path, kind, mode, owner, data: b"", link: "" }
}

fn file(path: &'static str, data: &'static [u8]) -> Rec {
    Rec { data, ..rec(path, EntryType::Regular, 0o644, (0, 0)) }
}

/// A data.tar of `recs`, each at mtime [`MTIME`].
fn data_tar(recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..r.path.len()].copy_from_slice(r.path.as_bytes());
        h.as_old_mut().linkname[..r.link.len()].copy_from_slice(r.link.as_bytes());
        h.set_entry_type(r.kind);
        h.set_size(r.data.len() as u64);
        h.set_mode(r.mode);
        h.set_uid(r.owner.0);
        h.set_gid(r.owner.1);
        h.set_mtime(MTIME as u64);
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
    rustix::fs::utimensat(rustix::fs::CWD, path, &rustix::fs::Timestamps { last_access: t, last_modification: t }, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).unwrap();
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
    let before: Vec<_> = ["tmp", "etc", "srv", "usr/bin"].iter().map(|d| meta(&root.join(d))).collect();
    let data = data_tar(&[
        rec("./", EntryType::Directory, 0o755, (0, 0)),
        rec("./tmp/", EntryType::Directory, 0o755, (0, 0)),
        file("./tmp/file", b"x"),
        rec("./etc/", EntryType::Directory, 0o777, (1000, 1000)),
        file("./etc/conf", b"x"),
        rec("./srv/", EntryType::Directory, 0o777, (1000, 1000)),
        rec("./bin/", EntryType::Directory, 0o700, (1000, 1000)),
        file("./bin/tool", b"x"),
        rec("./new/", EntryType::Directory, 0o750, (1234, 5678)),
        rec("./new/inner/", EntryType::Directory, 0o700, (4321, 8765)),
        file("./new/inner/f", b"x"),
    ]);
    let deb = common::deb_builder::write_deb(fs.dir.path(), "dirs.deb", "data.tar", &data);
    let r = unpack(["-q", "-s", "fsync", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(root.join("tmp/file").is_file() && root.join("usr/bin/tool").is_file());

    let after: Vec<_> = ["tmp", "etc", "srv", "usr/bin"].iter().map(|d| meta(&root.join(d))).collect();
    let owner_mode = |m: &(u32, u32, u32, i64)| (m.0, m.1, m.2);
    assert_eq!(owner_mode(&after[0]), (0o041777, 0, 0), "tmp keeps its sticky bit");
    assert_eq!(owner_mode(&after[1]), (0o040755, 0, 0), "etc stays root's");
    assert_eq!(after[2], before[2], "srv, into which nothing was renamed, is untouched, mtime included");
    assert_eq!(owner_mode(&after[3]), owner_mode(&before[3]), "usr/bin, through the bin symlink, keeps its metadata");
    // An existing directory's mtime is what the renames into it left, never the archive's.
    for (i, dir) in [(0, "tmp"), (1, "etc"), (3, "usr/bin")] {
        assert!(after[i].3 > old && after[i].3 != MTIME, "{dir}: mtime {}", after[i].3);
    }
    // Directories the unpack made take the archive's owner, mode and mtime.
    assert_eq!(meta(&root.join("new")), (0o040750, 1234, 5678, MTIME));
    assert_eq!(meta(&root.join("new/inner")), (0o040700, 4321, 8765, MTIME));
}
