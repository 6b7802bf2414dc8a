//! Disk images of crash states, rebuilt from the write log.
//!
//! Why this way: a crash state must be built from what the device held, never from an image
//! that was mounted since (a mount replays the journal and writes). The log holds every write
//! the device ever saw, mkfs included, so one base image, sparse and all zeros at first, is
//! carried forward through the log; at the opening of each epoch that has chosen states, each
//! state is a sparse copy of the base plus the subset of the epoch's writes it names. Zero
//! writes (mkfs's zeroing arrives as written zeros) become holes, so a 512 MiB image costs the
//! few MiB the filesystem really uses, and a copy costs that much again. States are built one
//! at a time, handed to the caller, and removed. This module never mounts anything.

use super::states::{State, Timeline};
use super::CrashError;
use crate::vdisk::log::{LogEntry, LogReader, SECTOR_SIZE};
use rustix::fs::{FallocateFlags, SeekFrom};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A sparse disk image that log entries are applied to.
#[derive(Debug)]
pub struct Image {
    path: PathBuf,
    file: File,
}

impl Image {
    /// A new image of `size` bytes, all zeros (a hole).
    pub fn create(path: &Path, size: u64) -> Result<Image, CrashError> {
        let io_err =
            |source| CrashError::Io { path: path.to_path_buf(), what: "creating an image", source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_err)?;
        file.set_len(size).map_err(io_err)?;
        Ok(Image { path: path.to_path_buf(), file })
    }

    /// A sparse copy of this image at `path`.
    pub fn copy_to(&self, path: &Path) -> Result<Image, CrashError> {
        let size = self.file.metadata().map_err(|e| self.err("stat", e))?.len();
        let copy = Image::create(path, size)?;
        copy_data(&self.file, &copy.file, size)
            .map_err(|e| copy.err("copying an image into", e))?;
        Ok(copy)
    }

    /// Applies a write (a discard writes zeros); other entries change nothing.
    pub fn apply(&self, e: &LogEntry) -> Result<(), CrashError> {
        self.apply_part(e, e.sector, e.nr_sectors)
    }

    /// Applies the sectors `sector..sector + sectors` of a write or discard (the part of `e`
    /// that lies there).
    pub fn apply_part(&self, e: &LogEntry, sector: u64, sectors: u64) -> Result<(), CrashError> {
        if !(e.is_write() || e.is_discard()) {
            return Ok(());
        }
        let unit = u64::from(SECTOR_SIZE);
        let beyond = || CrashError::BadLog {
            path: self.path.clone(),
            reason: format!("entry {}: sectors {sector}+{sectors} lie beyond any disk", e.index),
        };
        let (offset, len) =
            sector.checked_mul(unit).zip(sectors.checked_mul(unit)).ok_or_else(beyond)?;
        let data = match sector.checked_sub(e.sector).filter(|_| !e.is_discard()) {
            Some(skip) => usize::try_from(skip * unit)
                .ok()
                .and_then(|from| e.data.get(from..from.checked_add(len as usize)?)),
            None => None,
        };
        match data {
            Some(d) if d.iter().any(|&b| b != 0) => {
                self.file.write_all_at(d, offset).map_err(|e| self.err("writing", e))
            }
            _ if e.is_discard() || data.is_some() => {
                let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
                rustix::fs::fallocate(&self.file, mode, offset, len)
                    .map_err(|e| self.err("punching a hole in", e.into()))
            }
            _ => Err(CrashError::BadLog {
                path: self.path.clone(),
                reason: format!("entry {} has no sectors {sector}+{sectors}", e.index),
            }),
        }
    }

    /// The image file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, what: &'static str, source: io::Error) -> CrashError {
        CrashError::Io { path: self.path.clone(), what, source }
    }
}

/// Copies the data regions of `from` (of `size` bytes) to the same offsets of `to`, leaving
/// holes as holes.
fn copy_data(from: &File, to: &File, size: u64) -> io::Result<()> {
    let mut pos = 0u64;
    while pos < size {
        let start = match rustix::fs::seek(from, SeekFrom::Data(pos)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break, // only a hole from here on
            Err(e) => return Err(e.into()),
        };
        let end = rustix::fs::seek(from, SeekFrom::Hole(start))?.min(size);
        let (mut src, mut dst) = (start, start);
        while src < end {
            let want = (end - src) as usize;
            let n = rustix::fs::copy_file_range(from, Some(&mut src), to, Some(&mut dst), want)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the image shrank while it was copied",
                ));
            }
        }
        pos = end;
    }
    Ok(())
}

/// Copies `from` to `to` with every all-zero 4 KiB block left as a hole: a write log is mostly
/// mkfs's zeros, and a kept log should cost what it says, not what it counts.
pub fn copy_sparse(from: &Path, to: &Path) -> Result<(), CrashError> {
    let read_err = |source| CrashError::Io { path: from.to_path_buf(), what: "reading", source };
    let write_err = |source| CrashError::Io { path: to.to_path_buf(), what: "writing", source };
    let src = File::open(from).map_err(read_err)?;
    let size = src.metadata().map_err(read_err)?.len();
    let dst = File::create(to).map_err(write_err)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    while pos < size {
        let n = ((size - pos) as usize).min(buf.len());
        src.read_exact_at(&mut buf[..n], pos).map_err(read_err)?;
        for (i, block) in buf[..n].chunks(4096).enumerate() {
            if block.iter().any(|&b| b != 0) {
                dst.write_all_at(block, pos + (i * 4096) as u64).map_err(write_err)?;
            }
        }
        pos += n as u64;
    }
    dst.set_len(size).map_err(write_err)
}

/// Rebuilds `states` (ids with their states, any order) from the log at `log` of a disk of
/// `disk_bytes`, in `dir`, one at a time: `visit(id, state, image)` sees each one, which is
/// removed afterwards. The base image is carried forward through the log once.
pub fn build_states(
    log: &Path,
    timeline: &Timeline,
    states: &[(usize, &State)],
    disk_bytes: u64,
    dir: &Path,
    visit: &mut dyn FnMut(usize, &State, &Image) -> Result<(), CrashError>,
) -> Result<(), CrashError> {
    let Some(first) = timeline.epochs.first() else { return Ok(()) };
    let ended = |what: String| CrashError::BadLog { path: log.to_path_buf(), reason: what };
    let base = Image::create(&dir.join("base.img"), disk_bytes)?;
    let result = (|| {
        let mut reader = LogReader::open(log)?;
        loop {
            let e = reader
                .next_entry()?
                .ok_or_else(|| ended("the log ends before the start mark".into()))?;
            if e.index == first.opened_by {
                break;
            }
            base.apply(&e)?;
        }
        let last_needed = states.iter().map(|(_, s)| s.epoch).max();
        for (k, epoch) in timeline.epochs.iter().enumerate() {
            if last_needed.is_none_or(|last| k > last) {
                break;
            }
            // The epoch's log entries, in order; its units point into them.
            let mut entries: Vec<LogEntry> = Vec::new();
            for w in &epoch.writes {
                while entries.last().is_none_or(|e| e.index < w.index) {
                    let e = reader
                        .next_entry()?
                        .ok_or_else(|| ended(format!("the log ends before entry {}", w.index)))?;
                    if e.index == w.index {
                        entries.push(e);
                    }
                }
            }
            let entry = |index: u64| {
                entries.binary_search_by_key(&index, |e| e.index).ok().and_then(|i| entries.get(i))
            };
            for &(id, state) in states.iter().filter(|(_, s)| s.epoch == k) {
                let image = base.copy_to(&dir.join(format!("state-{id}.img")))?;
                let applied =
                    state.writes.iter().filter_map(|&i| epoch.writes.get(i)).try_for_each(|w| {
                        let e =
                            entry(w.index).ok_or_else(|| ended(format!("no entry {}", w.index)))?;
                        image.apply_part(e, w.sector, w.sectors())
                    });
                let visited = applied.and_then(|()| visit(id, state, &image));
                let removed = std::fs::remove_file(image.path()).map_err(|source| CrashError::Io {
                    path: image.path().to_path_buf(),
                    what: "removing",
                    source,
                });
                visited?;
                removed?;
            }
            entries.iter().try_for_each(|e| base.apply(e))?;
        }
        Ok(())
    })();
    let removed = std::fs::remove_file(base.path()).map_err(|source| CrashError::Io {
        path: base.path().to_path_buf(),
        what: "removing",
        source,
    });
    result.and(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::states::{MARK_RETURNED, MARK_SETTLED, MARK_START};
    use crate::vdisk::log::LogWriter;

    #[test]
    fn each_state_is_its_prefix_plus_its_writes_and_holes_stay_holes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut w = LogWriter::create(&log).unwrap();
        w.write(0, &vec![0u8; 8 * 512]).unwrap(); // mkfs zeroing: a hole
        w.write(1, &[1u8; 512]).unwrap();
        w.mark(MARK_START).unwrap();
        w.write(2, &[2u8; 512]).unwrap();
        w.write(3, &[3u8; 512]).unwrap();
        w.flush().unwrap();
        w.mark(MARK_RETURNED).unwrap();
        w.write(1, &[4u8; 512]).unwrap();
        w.mark(MARK_SETTLED).unwrap();
        w.finish().unwrap();
        let size = 1 << 20;
        let t = Timeline::read(&log, size).unwrap();
        let sel = t.select(100, 3);
        let states: Vec<(usize, &State)> = sel.states.iter().enumerate().collect();
        let mut seen = Vec::new();
        build_states(&log, &t, &states, size, dir.path(), &mut |id, state, image| {
            let bytes = std::fs::read(image.path()).unwrap();
            let sector = |i: usize| bytes[i * 512];
            let expected: Vec<u8> = match (state.epoch, &state.writes[..]) {
                (0, []) => vec![1, 0, 0],
                (0, [0]) => vec![1, 2, 0],
                (0, [1]) => vec![1, 0, 3],
                (1, []) => vec![1, 2, 3],
                (1, [0]) => vec![4, 2, 3],
                other => panic!("unexpected state {other:?}"),
            };
            assert_eq!((1..4).map(sector).collect::<Vec<_>>(), expected, "state {id}: {state:?}");
            let blocks = std::fs::metadata(image.path())
                .map(|m| std::os::unix::fs::MetadataExt::blocks(&m))
                .unwrap();
            assert!(blocks <= 64, "the copy is sparse: {blocks} blocks");
            seen.push(id);
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(seen, (0..5).collect::<Vec<_>>());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the log is left");
    }

    #[test]
    fn a_state_can_hold_one_block_of_a_write_without_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut w = LogWriter::create(&log).unwrap();
        w.mark(MARK_START).unwrap();
        let mut data = vec![5u8; 8 * 512];
        data.extend(vec![6u8; 8 * 512]);
        w.write(8, &data).unwrap();
        w.finish().unwrap();
        let size = 1 << 20;
        let t = Timeline::read(&log, size).unwrap();
        let sel = t.select(10, 1);
        let states: Vec<(usize, &State)> = sel.states.iter().enumerate().collect();
        let mut seen = Vec::new();
        build_states(&log, &t, &states, size, dir.path(), &mut |_, state, image| {
            let bytes = std::fs::read(image.path()).unwrap();
            seen.push((state.writes.clone(), bytes[8 * 512], bytes[16 * 512]));
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(seen, [(vec![], 0, 0), (vec![0], 5, 0), (vec![0, 1], 5, 6), (vec![1], 0, 6)]);
    }

    #[test]
    fn a_kept_log_is_sparse_and_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a"), dir.path().join("b"));
        let mut data = vec![0u8; 3 << 20];
        data[5000] = 7;
        data[(3 << 20) - 1] = 9;
        std::fs::write(&from, &data).unwrap();
        copy_sparse(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), data);
        let blocks =
            std::fs::metadata(&to).map(|m| std::os::unix::fs::MetadataExt::blocks(&m)).unwrap();
        assert!(blocks <= 32, "{blocks} blocks");
    }
}
