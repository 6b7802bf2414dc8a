//! Generated packages of N files of SIZE bytes (`--synthetic 10000:4k`): how each strategy
//! scales with the number of files, which is where per-file flushing hurts.
//!
//! Why written directly (ar + tar with the `tar` crate's Builder, gzip at the fastest level)
//! instead of staging a tree for `dpkg-deb -b`: a 100,000-file package would first be written
//! to disk and read back, which costs more than the runs it feeds. The archive is an ordinary
//! format-2.0 `.deb` (dpkg-deb reads it; the tests check that). File contents are pseudo-random
//! so that compression cannot make the package trivially small, and deterministic so that two
//! benches of the same spec unpack the same bytes. It never writes outside the given directory.

use super::{Error, Result};
use flate2::write::GzEncoder;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// N files of SIZE bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub files: u64,
    pub size: u64,
}

/// At most this many files per directory, as real packages rarely put more in one.
const FILES_PER_DIR: u64 = 1000;
/// A fixed mtime (2020-01-01) so generated packages are reproducible.
const MTIME: u64 = 1_577_836_800;

impl std::str::FromStr for Spec {
    type Err = String;

    /// `N:SIZE`, SIZE in bytes with an optional binary suffix k, m or g (`10000:4k`).
    fn from_str(s: &str) -> std::result::Result<Spec, String> {
        let bad =
            |why: &str| format!("synthetic package '{s}': {why} (expected N:SIZE, e.g. 10000:4k)");
        let (files, size) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let files: u64 = files.parse().map_err(|_| bad("N is not a number"))?;
        if files == 0 {
            return Err(bad("N must be at least 1"));
        }
        let lower = size.to_ascii_lowercase();
        let (digits, unit) = match lower.as_bytes().last() {
            Some(b'k') => (&lower[..lower.len() - 1], 1 << 10),
            Some(b'm') => (&lower[..lower.len() - 1], 1 << 20),
            Some(b'g') => (&lower[..lower.len() - 1], 1 << 30),
            _ => (lower.as_str(), 1),
        };
        let size = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .ok_or_else(|| bad("SIZE is not a size"))?;
        Ok(Spec { files, size })
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.files, human_size(self.size))
    }
}

/// `1.5 GiB`, for messages.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// `4096` -> `4k`, `1048576` -> `1m`, `1000` -> `1000`.
pub fn human_size(bytes: u64) -> String {
    for (shift, suffix) in [(30, "g"), (20, "m"), (10, "k")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

impl Spec {
    /// The package name: `synthetic-10000-4k`.
    pub fn package_name(&self) -> String {
        format!("synthetic-{}-{}", self.files, human_size(self.size))
    }

    /// About what `dir` must hold for the package and one unpacked copy of its files: the data
    /// does not compress, and each file adds a 512-byte tar header and pads to 512 bytes.
    fn bytes_needed(&self) -> u64 {
        let per_file = self.size.div_ceil(512).saturating_add(1).saturating_mul(512);
        self.files.saturating_mul(per_file).saturating_mul(2)
    }

    /// Writes the package into `dir` and returns its path. A package that would not fit in
    /// the space `dir` has free is a usage error, before anything is written: a slip of the
    /// finger (`100000:1g` for `100000:1k`) must not fill the disk. A signal stops the writing.
    pub fn generate(&self, dir: &Path) -> Result<PathBuf> {
        let need = self.bytes_needed();
        if let Ok(fs) = rustix::fs::statvfs(dir) {
            let free = fs.f_bavail.saturating_mul(fs.f_frsize);
            if need > free {
                return Err(Error::Usage(format!(
                    "synthetic package '{self}': it and its files need about {} in {}, which has {} free",
                    gib(need),
                    dir.display(),
                    gib(free)
                )));
            }
        }
        let path = dir.join(format!("{}_1.0_all.deb", self.package_name()));
        self.write(&path).map_err(|source| match unpack::interrupt::pending() {
            Some(signal) => Error::Interrupted { signal },
            None => Error::Package { path: path.clone(), source },
        })?;
        Ok(path)
    }

    fn write(&self, path: &Path) -> io::Result<()> {
        let mut ar = BufWriter::new(File::create(path)?);
        ar.write_all(unpack::read::deb::AR_MAGIC)?;
        ar_member(&mut ar, "debian-binary", |w| w.write_all(b"2.0\n"))?;
        ar_member(&mut ar, "control.tar.gz", |w| self.write_control(w))?;
        ar_member(&mut ar, "data.tar.gz", |w| self.write_data(w))?;
        ar.into_inner().map_err(|e| e.into_error())?.sync_all()
    }

    fn write_control(&self, out: &mut dyn Write) -> io::Result<()> {
        let installed_kib = self
            .files
            .saturating_mul(self.size.div_ceil(1024))
            .saturating_add(self.files.div_ceil(FILES_PER_DIR).saturating_mul(4));
        let control = format!(
            "Package: {}\nVersion: 1.0\nArchitecture: all\nMaintainer: unpack-bench <unpack-bench@localhost>\n\
             Installed-Size: {installed_kib}\nDescription: synthetic package of {} files of {} bytes\n \
             Generated by unpack-bench to measure per-file costs.\n",
            self.package_name(),
            self.files,
            self.size
        );
        let mut tar = tar::Builder::new(GzEncoder::new(out, flate2::Compression::fast()));
        append(&mut tar, tar::EntryType::Directory, "./", 0, io::empty())?;
        append(
            &mut tar,
            tar::EntryType::Regular,
            "./control",
            control.len() as u64,
            control.as_bytes(),
        )?;
        tar.into_inner()?.finish().map(drop)
    }

    fn write_data(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut tar = tar::Builder::new(GzEncoder::new(out, flate2::Compression::fast()));
        let base = format!("./usr/share/{}", self.package_name());
        for dir in ["./", "./usr/", "./usr/share/", &format!("{base}/")] {
            append(&mut tar, tar::EntryType::Directory, dir, 0, io::empty())?;
        }
        for i in 0..self.files {
            if i % FILES_PER_DIR == 0 {
                let dir = format!("{base}/d{:04}/", i / FILES_PER_DIR);
                append(&mut tar, tar::EntryType::Directory, &dir, 0, io::empty())?;
            }
            let name = format!("{base}/d{:04}/f{i:07}", i / FILES_PER_DIR);
            append(
                &mut tar,
                tar::EntryType::Regular,
                &name,
                self.size,
                Noise::new(i).take(self.size),
            )?;
        }
        tar.into_inner()?.finish().map(drop)
    }
}

/// Appends one entry owned by root, its name written as dpkg-deb writes it (`./usr/...`, a
/// trailing `/` on directories): the `tar` crate's own path setter would drop the `./`.
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    kind: tar::EntryType,
    path: &str,
    size: u64,
    data: impl Read,
) -> io::Result<()> {
    not_stopped()?;
    let mut h = tar::Header::new_gnu();
    let name = &mut h.as_old_mut().name;
    if path.len() > name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("tar entry name too long: {path}"),
        ));
    }
    name[..path.len()].copy_from_slice(path.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(if kind == tar::EntryType::Directory { 0o755 } else { 0o644 });
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(MTIME);
    // Both names are short ASCII constants, which always fit the header fields.
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    h.set_cksum();
    tar.append(&h, data)
}

/// Writes one ar member: a 60-byte header whose size field is patched once the content is
/// written (the content is streamed, its length unknown up front), then the content, padded to
/// an even length.
fn ar_member<W: Write + Seek>(
    ar: &mut W,
    name: &str,
    content: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let start = ar.stream_position()?;
    ar.write_all(&crate::ar::ar_header(name, MTIME, 0))?;
    content(ar)?;
    let end = ar.stream_position()?;
    let size = end - start - 60;
    ar.seek(SeekFrom::Start(start))?;
    ar.write_all(&crate::ar::ar_header(name, MTIME, size))?;
    ar.seek(SeekFrom::Start(end))?;
    if size % 2 == 1 {
        ar.write_all(b"\n")?;
    }
    Ok(())
}

/// An error once SIGINT, SIGTERM or SIGHUP came: checked before each entry and each piece of
/// a file's data, so that neither many files nor one huge one keep a stopped bench writing.
fn not_stopped() -> io::Result<()> {
    match unpack::interrupt::pending() {
        Some(signal) => Err(io::Error::other(format!("stopped by signal {signal}"))),
        None => Ok(()),
    }
}

/// A deterministic, incompressible byte stream per file (xorshift64*).
struct Noise {
    state: u64,
    buf: [u8; 8],
    pos: usize,
}

impl Noise {
    fn new(seed: u64) -> Noise {
        Noise { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, buf: [0; 8], pos: 8 }
    }
}

impl io::Read for Noise {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        not_stopped()?;
        for byte in out.iter_mut() {
            if self.pos == 8 {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                self.buf = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
                self.pos = 0;
            }
            *byte = self.buf[self.pos];
            self.pos += 1;
        }
        Ok(out.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn parses_counts_and_sizes() {
        assert_eq!("10000:4k".parse::<Spec>(), Ok(Spec { files: 10000, size: 4096 }));
        assert_eq!("3:1M".parse::<Spec>(), Ok(Spec { files: 3, size: 1 << 20 }));
        assert_eq!("1:0".parse::<Spec>(), Ok(Spec { files: 1, size: 0 }));
        assert_eq!("2:1g".parse::<Spec>(), Ok(Spec { files: 2, size: 1 << 30 }));
        for bad in ["", "10", "0:4k", "x:4k", "10:", "10:k", "10:4q", "1:99999999999999999999g"] {
            assert!(bad.parse::<Spec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_package_larger_than_the_free_space_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let spec: Spec = "100000000000:1g".parse().unwrap();
        match spec.generate(dir.path()) {
            Err(Error::Usage(message)) => assert!(
                message.contains("'100000000000:1g'") && message.contains("free"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(Spec { files: 3, size: 1000 }.bytes_needed(), 2 * 3 * (1024 + 512));
    }

    #[test]
    fn names_round_trip_through_display() {
        let spec: Spec = "250:4k".parse().unwrap();
        assert_eq!(spec.to_string(), "250:4k");
        assert_eq!(spec.package_name(), "synthetic-250-4k");
        assert_eq!(human_size(1000), "1000");
    }

    #[test]
    fn dpkg_deb_reads_the_generated_package_with_every_file_at_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let spec = Spec { files: 1003, size: 777 };
        let deb = spec.generate(dir.path()).unwrap();
        let info =
            Command::new("dpkg-deb").arg("--field").arg(&deb).arg("Package").output().unwrap();
        assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
        assert_eq!(String::from_utf8_lossy(&info.stdout).trim(), "synthetic-1003-777");
        let x = dir.path().join("x");
        let st = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x).status().unwrap();
        assert!(st.success());
        let base = x.join("usr/share/synthetic-1003-777");
        let mut count = 0;
        for d in std::fs::read_dir(&base).unwrap() {
            for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
                assert_eq!(f.unwrap().metadata().unwrap().len(), 777);
                count += 1;
            }
        }
        assert_eq!(count, 1003);
        let a = std::fs::read(base.join("d0000/f0000000")).unwrap();
        let b = std::fs::read(base.join("d0000/f0000001")).unwrap();
        assert_ne!(a, b, "files differ, so nothing deduplicates or compresses them away");
    }
}
