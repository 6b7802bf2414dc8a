//! The older version of a package, for the upgrade scenario: the same paths, other contents and
//! other lengths.
//!
//! Why: an upgrade is where atomic replacement is at stake (the old content must survive until
//! the new one is durable, and filesystems treat a rename over an existing file specially, like
//! ext4's `auto_da_alloc`), and a crash test needs, for every path, an old content that can be
//! told apart from the new one and from any mix of the two. So every regular file gets bytes
//! derived from its path and a length that differs from the new one; directories, symlinks,
//! hard links, FIFOs and devices stay as they are, and so does the control member.
//!
//! The `.deb` is written here with the `tar` crate's builder and a minimal ar writer (format
//! 2.0, uncompressed members), which the engine's reader and dpkg-deb both read. `unpack-bench`
//! grows a package generator of its own; the two writers can become one once both are on main.
//! This module never changes anything but the file it writes.

use super::expect::engine_error;
use super::CrashError;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use unpack::read::deb::Deb;
use unpack::read::entry::{self, Kind};

/// The biggest control member copied (real ones are a few KiB).
const MAX_CONTROL: u64 = 16 << 20;

/// The length of the older version of a file whose new length is `new_len`: never equal.
fn older_len(new_len: u64) -> u64 {
    if new_len < 64 {
        new_len + 17
    } else {
        new_len - new_len / 3
    }
}

/// The older version's bytes for `path`: a line naming the path, repeated, cut to `len`.
fn older_bytes(path: &Path, len: u64) -> Vec<u8> {
    let line = format!("older version of /{}\n", path.display());
    line.bytes().cycle().take(len as usize).collect()
}

/// Writes the older version of `package` to `out`.
pub fn write(package: &Path, out: &Path) -> Result<(), CrashError> {
    let bad = |reason: String| CrashError::Package { path: package.to_path_buf(), reason };
    let write_err = |source: io::Error| CrashError::Io {
        path: out.to_path_buf(),
        what: "writing the older version",
        source,
    };
    let mut deb = Deb::open(package).map_err(|e| engine_error(package, e))?;
    let mut control = Vec::new();
    {
        let (member, stream) = deb.control().map_err(|e| engine_error(package, e))?;
        stream
            .take(MAX_CONTROL + 1)
            .read_to_end(&mut control)
            .map_err(|e| bad(format!("{member}: {e}")))?;
        if control.len() as u64 > MAX_CONTROL {
            return Err(bad(format!("{member}: larger than {MAX_CONTROL} bytes")));
        }
    }
    let (member, stream) = deb.data().map_err(|e| engine_error(package, e))?;
    let mut data = tar::Builder::new(Vec::new());
    let mut archive = tar::Archive::new(stream);
    for item in archive.entries().map_err(|e| bad(format!("{member}: {e}")))? {
        let mut item = item.map_err(|e| bad(format!("{member}: {e}")))?;
        let e = entry::validate(&mut item).map_err(|e| bad(format!("{member}: {e}")))?;
        let mut header = tar::Header::new_gnu();
        header.set_mode(e.mode);
        header.set_uid(u64::from(e.uid));
        header.set_gid(u64::from(e.gid));
        header.set_mtime(u64::try_from(e.mtime.0).unwrap_or(0));
        header.set_size(0);
        // Directories keep a trailing slash, as dpkg-deb writes them; `.` for the root.
        let name = if e.path.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            Path::new(".").join(&e.path)
        };
        let appended = match &e.kind {
            Kind::File { size } => {
                let bytes = older_bytes(&e.path, older_len(*size));
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(bytes.len() as u64);
                data.append_data(&mut header, &name, &bytes[..])
            }
            Kind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                data.append_data(&mut header, &name, io::empty())
            }
            Kind::Symlink { target } => {
                header.set_entry_type(tar::EntryType::Symlink);
                data.append_link(&mut header, &name, Path::new(target))
            }
            Kind::Hardlink { target } => {
                header.set_entry_type(tar::EntryType::Link);
                data.append_link(&mut header, &name, Path::new(".").join(target))
            }
            Kind::Fifo => {
                header.set_entry_type(tar::EntryType::Fifo);
                data.append_data(&mut header, &name, io::empty())
            }
            Kind::CharDevice { major, minor } | Kind::BlockDevice { major, minor } => {
                let block = matches!(e.kind, Kind::BlockDevice { .. });
                header.set_entry_type(if block {
                    tar::EntryType::Block
                } else {
                    tar::EntryType::Char
                });
                header
                    .set_device_major(*major)
                    .and_then(|()| header.set_device_minor(*minor))
                    .map_err(write_err)?;
                data.append_data(&mut header, &name, io::empty())
            }
        };
        appended.map_err(|err| {
            bad(format!("{}: cannot write its older version: {err}", e.path.display()))
        })?;
    }
    let data = data.into_inner().map_err(write_err)?;
    let file = File::create(out).map_err(write_err)?;
    let mut ar = BufWriter::new(file);
    ar.write_all(unpack::read::deb::AR_MAGIC).map_err(write_err)?;
    for (name, bytes) in
        [("debian-binary", &b"2.0\n"[..]), ("control.tar", &control[..]), ("data.tar", &data[..])]
    {
        crate::ar::write_member(&mut ar, name, 0, bytes).map_err(write_err)?;
    }
    ar.into_inner().map_err(|e| write_err(e.into_error()))?.sync_all().map_err(write_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::expect::{Content, Tree};
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name)
    }

    #[test]
    fn older_lengths_always_differ() {
        for n in [0, 1, 2, 17, 63, 64, 65, 1000, 1 << 40] {
            assert_ne!(older_len(n), n);
        }
    }

    #[test]
    fn the_older_version_has_the_same_paths_with_other_files_and_the_rest_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["types_1.0_all.deb", "pkg-v2_2.0_all.deb", "gnulong_1.0_all.deb"] {
            let out = dir.path().join(name);
            write(&fixture(name), &out).unwrap();
            let new = Tree::of_deb(&fixture(name)).unwrap();
            let old = Tree::of_deb(&out).unwrap();
            assert_eq!(
                new.0.keys().collect::<Vec<_>>(),
                old.0.keys().collect::<Vec<_>>(),
                "{name}"
            );
            for (path, n) in &new.0 {
                let o = &old.0[path];
                match (n, o) {
                    (Content::File { len: a, hash: x }, Content::File { len: b, hash: y }) => {
                        assert_ne!(a, b, "{name}: {}", path.display());
                        assert_ne!(x, y, "{name}: {}", path.display());
                    }
                    _ => assert_eq!(n, o, "{name}: {}", path.display()),
                }
            }
        }
    }

    #[test]
    fn dpkg_deb_reads_the_older_version() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("old.deb");
        write(&fixture("pkg-v2_2.0_all.deb"), &out).unwrap();
        let r =
            std::process::Command::new("dpkg-deb").arg("--contents").arg(&out).output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let r = std::process::Command::new("dpkg-deb")
            .arg("--field")
            .arg(&out)
            .arg("Version")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), "2.0");
    }
}
