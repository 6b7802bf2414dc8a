//! The device's write log, in the format of the kernel's dm-log-writes target.
//!
//! Every write the device acknowledged, every flush, every discard, and labelled marks from the
//! harness, in the order the device saw them. The crash test rebuilds crash states from it
//! (any prefix up to a flush is a state a power cut may leave; writes after the last flush may
//! be lost), and because the format is dm-log-writes', xfstests' `replay-log` reads it too.
//!
//! Layout (reference: `drivers/md/dm-log-writes.c` in Linux, and xfstests'
//! `src/log-writes/log-writes.{h,c}`, which reads it back); all integers little-endian:
//!
//! ```text
//! sector 0          struct log_write_super { u64 magic = 0x6a736677736872; u64 version = 1;
//!                                            u64 nr_entries; u32 sectorsize; } zero-padded
//! then per entry:   one sector: struct log_write_entry { u64 sector; u64 nr_sectors;
//!                                                        u64 flags; u64 data_len; }
//!                   followed, inside that same sector, by a MARK's label (data_len bytes, at
//!                   least one zero after it), the rest zero-padded
//!                   then, unless the entry is a DISCARD, nr_sectors sectors of written data
//! ```
//!
//! `sector` and `nr_sectors` count in units of `sectorsize`, which is the logical block size of
//! the logged device: 512 here, the loop device's. Flags: FLUSH = 1, FUA = 2, DISCARD = 4,
//! MARK = 8 (and METADATA = 16, which xfstests knows and this writer never sets). A FLUSH or
//! MARK entry has `nr_sectors == 0`; an entry with neither flags nor sectors is malformed.
//! The superblock's `nr_entries` is rewritten after every flush and mark (the kernel does the
//! same after FUA writes and marks), so a log cut short by a crash still reads back to its last
//! flush.
//!
//! The reader refuses malformed input with an error naming the file and offset; it never
//! panics and never allocates more than the file holds.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `WRITE_LOG_MAGIC`.
pub const MAGIC: u64 = 0x6a_7366_7773_6872;
/// `WRITE_LOG_VERSION`.
pub const VERSION: u64 = 1;
/// The sector size this writer uses: the loop device's logical block size.
pub const SECTOR_SIZE: u32 = 512;
/// `LOG_FLUSH_FLAG`: everything logged before this entry is on stable storage.
pub const FLAG_FLUSH: u64 = 1;
/// `LOG_FUA_FLAG`: this write itself went to stable storage.
pub const FLAG_FUA: u64 = 2;
/// `LOG_DISCARD_FLAG`: the range was discarded; the entry carries no data.
pub const FLAG_DISCARD: u64 = 4;
/// `LOG_MARK_FLAG`: a label from the harness, stored inline.
pub const FLAG_MARK: u64 = 8;

const ENTRY_HEADER: usize = 32;
const SUPER_LEN: usize = 28;

/// The longest mark label a 512-byte-sector log holds (one sector, minus the entry header,
/// minus the terminating zero).
pub const MAX_MARK_LEN: usize = SECTOR_SIZE as usize - ENTRY_HEADER - 1;

/// A write log that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file itself failed.
    #[error("write log {path}")]
    Io { path: PathBuf, source: io::Error },
    /// The file is not a dm-log-writes log, or is damaged at `offset`.
    #[error("write log {path}: at byte {offset}: {reason}")]
    Format { path: PathBuf, offset: u64, reason: String },
    /// A mark label that cannot be stored.
    #[error("write log {path}: mark '{label}': {reason}")]
    Mark { path: PathBuf, label: String, reason: String },
}

/// Checks that `label` fits in a mark entry: not empty, no NUL, at most [`MAX_MARK_LEN`] bytes.
pub fn check_mark(label: &str) -> Result<(), String> {
    if label.is_empty() {
        Err("a mark needs a label".to_string())
    } else if label.contains('\0') {
        Err("a mark label cannot contain NUL".to_string())
    } else if label.len() > MAX_MARK_LEN {
        Err(format!("a mark label is at most {MAX_MARK_LEN} bytes, this one is {}", label.len()))
    } else {
        Ok(())
    }
}

/// Appends entries to a new log file.
#[derive(Debug)]
pub struct LogWriter {
    out: BufWriter<File>,
    path: PathBuf,
    entries: u64,
}

impl LogWriter {
    /// Creates (or truncates) `path` and writes an empty log's superblock.
    pub fn create(path: &Path) -> Result<LogWriter, LogError> {
        let file = File::create(path)
            .map_err(|source| LogError::Io { path: path.to_path_buf(), source })?;
        let mut w = LogWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            entries: 0,
        };
        w.io(|out| out.write_all(&[0; SECTOR_SIZE as usize]))?;
        w.update_super()?;
        Ok(w)
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Logs a write of `data` (a whole number of sectors, not empty) at sector `sector`.
    pub fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), LogError> {
        if data.is_empty() || data.len() % SECTOR_SIZE as usize != 0 {
            return Err(LogError::Format {
                path: self.path.clone(),
                offset: 0,
                reason: format!(
                    "a logged write must be whole {SECTOR_SIZE}-byte sectors, got {} bytes",
                    data.len()
                ),
            });
        }
        self.entry(sector, data.len() as u64 / u64::from(SECTOR_SIZE), 0, &[])?;
        self.io(|out| out.write_all(data))
    }

    /// Logs a cache flush, then makes the superblock count everything so far.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.entry(0, 0, FLAG_FLUSH, &[])?;
        self.update_super()
    }

    /// Logs a discard of `nr_sectors` sectors at `sector`.
    pub fn discard(&mut self, sector: u64, nr_sectors: u64) -> Result<(), LogError> {
        self.entry(sector, nr_sectors, FLAG_DISCARD, &[])
    }

    /// Logs a labelled mark, then makes the superblock count everything so far.
    pub fn mark(&mut self, label: &str) -> Result<(), LogError> {
        check_mark(label).map_err(|reason| LogError::Mark {
            path: self.path.clone(),
            label: label.to_string(),
            reason,
        })?;
        self.entry(0, 0, FLAG_MARK, label.as_bytes())?;
        self.update_super()
    }

    /// Writes the final superblock and makes the log durable. Returns the number of entries.
    pub fn finish(mut self) -> Result<u64, LogError> {
        self.update_super()?;
        let entries = self.entries;
        self.io(|out| out.get_ref().sync_all())?;
        Ok(entries)
    }

    fn entry(
        &mut self,
        sector: u64,
        nr_sectors: u64,
        flags: u64,
        inline: &[u8],
    ) -> Result<(), LogError> {
        let mut block = [0u8; SECTOR_SIZE as usize];
        block[0..8].copy_from_slice(&sector.to_le_bytes());
        block[8..16].copy_from_slice(&nr_sectors.to_le_bytes());
        block[16..24].copy_from_slice(&flags.to_le_bytes());
        block[24..32].copy_from_slice(&(inline.len() as u64).to_le_bytes());
        // Callers pass at most MAX_MARK_LEN bytes; `get` keeps a slip from panicking.
        if let Some(dst) = block.get_mut(ENTRY_HEADER..ENTRY_HEADER + inline.len()) {
            dst.copy_from_slice(inline);
        }
        self.io(|out| out.write_all(&block))?;
        self.entries += 1;
        Ok(())
    }

    fn update_super(&mut self) -> Result<(), LogError> {
        let mut sb = [0u8; SUPER_LEN];
        sb[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        sb[8..16].copy_from_slice(&VERSION.to_le_bytes());
        sb[16..24].copy_from_slice(&self.entries.to_le_bytes());
        sb[24..28].copy_from_slice(&SECTOR_SIZE.to_le_bytes());
        self.io(|out| {
            out.flush()?;
            out.get_ref().write_all_at(&sb, 0)
        })
    }

    fn io(
        &mut self,
        f: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
    ) -> Result<(), LogError> {
        f(&mut self.out).map_err(|source| LogError::Io { path: self.path.clone(), source })
    }
}

/// One entry read back from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Position in the log, from 0.
    pub index: u64,
    /// First sector written or discarded, in units of the log's sector size.
    pub sector: u64,
    /// Number of sectors written or discarded.
    pub nr_sectors: u64,
    /// The raw dm-log-writes flags.
    pub flags: u64,
    /// The written bytes (`nr_sectors` sectors), empty for flushes, discards and marks.
    pub data: Vec<u8>,
    /// The label of a MARK entry.
    pub mark: Option<String>,
}

impl LogEntry {
    /// Everything logged before this entry had reached stable storage when it completed.
    pub fn is_flush(&self) -> bool {
        self.flags & FLAG_FLUSH != 0
    }

    /// This write was forced to stable storage by itself.
    pub fn is_fua(&self) -> bool {
        self.flags & FLAG_FUA != 0
    }

    /// The range was discarded.
    pub fn is_discard(&self) -> bool {
        self.flags & FLAG_DISCARD != 0
    }

    /// A harness mark.
    pub fn is_mark(&self) -> bool {
        self.flags & FLAG_MARK != 0
    }

    /// A write carrying data.
    pub fn is_write(&self) -> bool {
        !self.is_discard() && !self.is_mark() && self.nr_sectors > 0
    }
}

/// Reads a log's entries in order.
#[derive(Debug)]
pub struct LogReader {
    input: BufReader<File>,
    path: PathBuf,
    sector_size: u32,
    nr_entries: u64,
    next: u64,
    offset: u64,
    len: u64,
}

impl LogReader {
    /// Opens `path` and checks its superblock.
    pub fn open(path: &Path) -> Result<LogReader, LogError> {
        let io_err = |source| LogError::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let mut r = LogReader {
            input: BufReader::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            sector_size: 0,
            nr_entries: 0,
            next: 0,
            offset: 0,
            len,
        };
        let mut sb = [0u8; SUPER_LEN];
        r.read_exact(&mut sb, "the superblock")?;
        if le64(&sb[0..8]) != MAGIC {
            return Err(r.format(0, "not a dm-log-writes log (bad magic)".to_string()));
        }
        let version = le64(&sb[8..16]);
        if version != VERSION {
            return Err(r.format(8, format!("version {version}, only version {VERSION} is known")));
        }
        r.nr_entries = le64(&sb[16..24]);
        let sector_size = u32::from_le_bytes([sb[24], sb[25], sb[26], sb[27]]);
        if !(512..=65536).contains(&sector_size) || !sector_size.is_power_of_two() {
            return Err(r.format(
                24,
                format!("sector size {sector_size} is not a power of two in 512..=65536"),
            ));
        }
        r.sector_size = sector_size;
        r.seek(u64::from(sector_size))?;
        Ok(r)
    }

    /// The log's sector size in bytes.
    pub fn sector_size(&self) -> u32 {
        self.sector_size
    }

    /// The number of entries the superblock counts.
    pub fn nr_entries(&self) -> u64 {
        self.nr_entries
    }

    /// The next entry, or `None` after the last one the superblock counts.
    pub fn next_entry(&mut self) -> Result<Option<LogEntry>, LogError> {
        if self.next >= self.nr_entries {
            return Ok(None);
        }
        let start = self.offset;
        let mut block = vec![0u8; self.sector_size as usize];
        self.read_exact(&mut block, "an entry")?;
        let sector = le64(&block[0..8]);
        let nr_sectors = le64(&block[8..16]);
        let flags = le64(&block[16..24]);
        let data_len = le64(&block[24..32]);
        if flags == 0 && nr_sectors == 0 {
            return Err(self.format(start, "entry with neither flags nor sectors".to_string()));
        }
        let mut entry =
            LogEntry { index: self.next, sector, nr_sectors, flags, data: Vec::new(), mark: None };
        if flags & FLAG_MARK != 0 {
            let room = block.len() - ENTRY_HEADER - 1;
            let n = usize::try_from(data_len).ok().filter(|n| *n <= room).ok_or_else(|| {
                self.format(
                    start + 24,
                    format!(
                        "mark of {data_len} bytes does not fit in a {}-byte sector",
                        block.len()
                    ),
                )
            })?;
            let label = &block[ENTRY_HEADER..ENTRY_HEADER + n];
            entry.mark = Some(String::from_utf8_lossy(label).into_owned());
        } else if block[ENTRY_HEADER] != 0 {
            return Err(self.format(
                start + ENTRY_HEADER as u64,
                "entry header is not zero-padded".to_string(),
            ));
        }
        if flags & FLAG_DISCARD == 0 && nr_sectors > 0 {
            let bytes = nr_sectors
                .checked_mul(u64::from(self.sector_size))
                .filter(|b| *b <= self.len.saturating_sub(self.offset))
                .ok_or_else(|| {
                    self.format(
                        start + 8,
                        format!("{nr_sectors} sectors of data run past the end of the log"),
                    )
                })?;
            let mut data = vec![0u8; bytes as usize];
            self.read_exact(&mut data, "an entry's data")?;
            entry.data = data;
        }
        self.next += 1;
        Ok(Some(entry))
    }

    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), LogError> {
        match self.input.read_exact(buf) {
            Ok(()) => {
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(self.format(self.offset, format!("the log ends inside {what}")))
            }
            Err(source) => Err(LogError::Io { path: self.path.clone(), source }),
        }
    }

    fn seek(&mut self, to: u64) -> Result<(), LogError> {
        self.input
            .seek(SeekFrom::Start(to))
            .map_err(|source| LogError::Io { path: self.path.clone(), source })?;
        self.offset = to;
        Ok(())
    }

    fn format(&self, offset: u64, reason: String) -> LogError {
        LogError::Format { path: self.path.clone(), offset, reason }
    }
}

impl Iterator for LogReader {
    type Item = Result<LogEntry, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_entry() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                // Stop after the first error: the position is unknown from here on.
                self.next = self.nr_entries;
                Some(Err(e))
            }
        }
    }
}

fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sectors(n: usize, byte: u8) -> Vec<u8> {
        vec![byte; n * SECTOR_SIZE as usize]
    }

    #[test]
    fn round_trip_keeps_order_flags_data_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.mark("mkfs").unwrap();
        w.write(8, &sectors(2, 0xab)).unwrap();
        w.discard(100, 16).unwrap();
        w.flush().unwrap();
        w.write(0, &sectors(1, 0x01)).unwrap();
        w.mark("returned").unwrap();
        assert_eq!(w.finish().unwrap(), 6);

        let r = LogReader::open(&path).unwrap();
        assert_eq!((r.sector_size(), r.nr_entries()), (512, 6));
        let entries: Vec<LogEntry> = r.map(Result::unwrap).collect();
        assert_eq!(entries.len(), 6);
        assert_eq!(entries[0].mark.as_deref(), Some("mkfs"));
        assert!(entries[1].is_write() && entries[1].sector == 8 && entries[1].nr_sectors == 2);
        assert_eq!(entries[1].data, sectors(2, 0xab));
        assert!(entries[2].is_discard() && entries[2].sector == 100 && entries[2].nr_sectors == 16);
        assert!(entries[2].data.is_empty());
        assert!(entries[3].is_flush() && !entries[3].is_write());
        assert_eq!(entries[4].data, sectors(1, 0x01));
        assert_eq!(entries[5].mark.as_deref(), Some("returned"));
        assert_eq!(entries.iter().map(|e| e.index).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn on_disk_layout_is_dm_log_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.write(3, &sectors(1, 0x5a)).unwrap();
        w.mark("start").unwrap();
        w.flush().unwrap();
        w.finish().unwrap();
        let raw = std::fs::read(&path).unwrap();
        // superblock + (header + 1 data sector) + mark + flush
        assert_eq!(raw.len(), 512 * 5);
        assert_eq!(&raw[0..8], &0x6a736677736872u64.to_le_bytes());
        assert_eq!(&raw[8..16], &1u64.to_le_bytes());
        assert_eq!(&raw[16..24], &3u64.to_le_bytes());
        assert_eq!(&raw[24..28], &512u32.to_le_bytes());
        assert!(raw[28..512].iter().all(|b| *b == 0));
        let e = &raw[512..1024];
        assert_eq!(&e[0..8], &3u64.to_le_bytes());
        assert_eq!(&e[8..16], &1u64.to_le_bytes());
        assert_eq!(&e[16..24], &0u64.to_le_bytes());
        assert_eq!(&e[24..32], &0u64.to_le_bytes());
        assert!(e[32..].iter().all(|b| *b == 0));
        assert!(raw[1024..1536].iter().all(|b| *b == 0x5a));
        let m = &raw[1536..2048];
        assert_eq!(&m[8..16], &0u64.to_le_bytes());
        assert_eq!(&m[16..24], &8u64.to_le_bytes());
        assert_eq!(&m[24..32], &5u64.to_le_bytes());
        assert_eq!(&m[32..37], b"start");
        assert!(m[37..].iter().all(|b| *b == 0));
        let f = &raw[2048..2560];
        assert_eq!(&f[16..24], &1u64.to_le_bytes());
        assert_eq!(&f[8..16], &0u64.to_le_bytes());
    }

    #[test]
    fn superblock_counts_up_to_the_last_flush_or_mark_before_finish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.write(0, &sectors(1, 1)).unwrap();
        w.flush().unwrap();
        w.write(1, &sectors(1, 2)).unwrap();
        // A crash now: the unfinished writer's file still reads back to the flush.
        drop(w);
        let entries: Vec<LogEntry> = LogReader::open(&path).unwrap().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 2);
        assert!(entries[1].is_flush());
    }

    #[test]
    fn bad_marks_and_unaligned_writes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(&dir.path().join("log")).unwrap();
        assert!(w.mark("").is_err());
        assert!(w.mark("a\0b").is_err());
        assert!(w.mark(&"x".repeat(MAX_MARK_LEN + 1)).is_err());
        w.mark(&"x".repeat(MAX_MARK_LEN)).unwrap();
        assert!(w.write(0, &[1; 100]).is_err());
        assert!(w.write(0, &[]).is_err());
    }

    #[test]
    fn damaged_logs_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&path).unwrap();
        w.write(0, &sectors(4, 7)).unwrap();
        w.mark("m").unwrap();
        w.finish().unwrap();
        let good = std::fs::read(&path).unwrap();

        let check = |bytes: &[u8], want: &str| {
            std::fs::write(&path, bytes).unwrap();
            let got = match LogReader::open(&path) {
                Err(e) => e.to_string(),
                Ok(r) => {
                    r.filter_map(Result::err).map(|e| e.to_string()).collect::<Vec<_>>().join(";")
                }
            };
            assert!(got.contains(want), "want '{want}', got '{got}'");
        };
        check(&good[..10], "ends inside the superblock");
        check(&[0u8; 512], "bad magic");
        let mut v = good.clone();
        v[8] = 2;
        check(&v, "version 2");
        let mut v = good.clone();
        v[24..28].copy_from_slice(&100u32.to_le_bytes());
        check(&v, "sector size 100");
        check(&good[..512 * 3], "run past the end");
        let mut v = good.clone();
        v[512 + 8..512 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        check(&v, "run past the end");
        let mut v = good.clone();
        v[512 * 6 + 24..512 * 6 + 32].copy_from_slice(&600u64.to_le_bytes());
        check(&v, "does not fit");
        let mut v = good.clone();
        v[512 + 32] = 1;
        check(&v, "not zero-padded");
        let mut v = good.clone();
        v[512..512 * 2].fill(0);
        check(&v, "neither flags nor sectors");
        let mut v = good;
        v[16..24].copy_from_slice(&9u64.to_le_bytes());
        check(&v, "ends inside an entry");
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_reader() {
        use proptest::prelude::*;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        proptest!(ProptestConfig::with_cases(200), |(mut bytes in proptest::collection::vec(any::<u8>(), 0..4096))| {
            if bytes.len() >= 28 {
                // Give most cases a valid superblock so the entry parser gets exercised.
                bytes[0..8].copy_from_slice(&MAGIC.to_le_bytes());
                bytes[8..16].copy_from_slice(&VERSION.to_le_bytes());
                bytes[24..28].copy_from_slice(&SECTOR_SIZE.to_le_bytes());
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(r) = LogReader::open(&path) {
                for e in r.take(100) {
                    let _ = e;
                }
            }
        });
    }
}
