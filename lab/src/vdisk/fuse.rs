//! The FUSE server behind an emulated device: one file, `disk.img`, whose every write, fsync
//! and fallocate is a block-device event the loop driver forwarded.
//!
//! The loop driver turns block writes into writes of `disk.img`, and every cache flush (FLUSH,
//! and the flush the block layer adds after a FUA write, since loop has no native FUA) into an
//! fsync of it; discards and write-zeroes become fallocate. So this server sees the device's
//! whole life, and is where flush latency is slept, writes are paced, counters are bumped and
//! the write log is written.
//!
//! What it must never do, each a known trap:
//! - answer fsync or fallocate with ENOSYS: the kernel would remember it and silently stop
//!   sending them, and every flush would be lost;
//! - ask the kernel for writeback caching (`FUSE_WRITEBACK_CACHE`): writes would reach the
//!   server late and merged, and the log would lie about order (fuser does not request it and
//!   this module does not add it);
//! - serve from more than one thread: the log's order is the order requests were answered;
//! - allocate or write through a path that needs the loop device it serves: its thread is an
//!   IO flusher where the process may be one (`PR_SET_IO_FLUSHER`, set before the session's
//!   thread is spawned, which inherits it; see `VDisk::is_io_flusher`), and its bytes live in
//!   a memfd, never on a filesystem that could sit on top of this very device;
//! - answer `getxattr`: it stays ENOSYS so the kernel stops asking for `security.capability`
//!   before every write. Marks arrive as `setxattr` of [`MARK_XATTR`], in band, so a mark is
//!   logged after every write that completed before it was set.

use super::counters::LiveCounters;
use super::log::{check_mark, LogError, LogWriter, SECTOR_SIZE};
use super::pacer::Pacer;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request,
    TimeOrNow,
};
use rustix::fs::FallocateFlags;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The name of the one file the server exposes.
pub const IMAGE_NAME: &str = "disk.img";
/// Setting this extended attribute on `disk.img` to a label adds a MARK entry to the log.
pub const MARK_XATTR: &str = "user.unpack.mark";

const IMAGE: INodeNo = INodeNo(2);
/// The attributes never change behind the kernel's back, so it may cache them for long.
const TTL: Duration = Duration::from_secs(3600);

/// State the server shares with its owner, who reads counters while it runs and finishes the
/// log after it stopped.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) counters: LiveCounters,
    pub(crate) log: Mutex<Option<LogWriter>>,
    /// The first log failure; the device keeps answering EIO to logged operations after it.
    pub(crate) log_failure: Mutex<Option<LogError>>,
}

impl Shared {
    pub(crate) fn new(log: Option<LogWriter>) -> Shared {
        Shared { log: Mutex::new(log), ..Shared::default() }
    }
}

/// Locks a mutex even if a panicking holder poisoned it: the data are counters and a log
/// writer, whose state stays meaningful.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
pub(crate) struct Server {
    size: u64,
    flush_latency: Duration,
    backing: File,
    pacer: Mutex<Pacer>,
    shared: Arc<Shared>,
    created: SystemTime,
}

impl Server {
    /// `backing` holds the image's bytes and is exactly `size` bytes long.
    pub(crate) fn new(
        backing: File,
        size: u64,
        flush_latency: Duration,
        bandwidth: Option<u64>,
        shared: Arc<Shared>,
    ) -> Server {
        Server {
            size,
            flush_latency,
            backing,
            pacer: Mutex::new(Pacer::new(bandwidth)),
            shared,
            created: SystemTime::now(),
        }
    }

    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = match ino {
            INodeNo::ROOT => (FileType::Directory, 0o755, 0, 2),
            IMAGE => (FileType::RegularFile, 0o600, self.size, 1),
            _ => return None,
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Runs `f` on the log if there is one; a failure is kept for `stop` and turns into EIO.
    fn log(&self, f: impl FnOnce(&mut LogWriter) -> Result<(), LogError>) -> Result<(), Errno> {
        if lock(&self.shared.log_failure).is_some() {
            return Err(Errno::EIO);
        }
        let mut log = lock(&self.shared.log);
        let Some(writer) = log.as_mut() else { return Ok(()) };
        f(writer).map_err(|e| {
            lock(&self.shared.log_failure).get_or_insert(e);
            Errno::EIO
        })
    }

    /// The sector-aligned bytes covering `[offset, end)`, read back from the backing file.
    /// Loop writes are already aligned to its 512-byte blocks; this covers other writers.
    fn aligned(&self, offset: u64, data: &[u8]) -> Result<(u64, Vec<u8>), Errno> {
        let sector = u64::from(SECTOR_SIZE);
        let end = offset + data.len() as u64;
        if offset % sector == 0 && end % sector == 0 {
            return Ok((offset / sector, data.to_vec()));
        }
        let first = offset / sector * sector;
        let last = end.div_ceil(sector) * sector;
        let mut buf = vec![0u8; (last - first) as usize];
        self.backing.read_exact_at(&mut buf, first).map_err(|_| Errno::EIO)?;
        Ok((first / sector, buf))
    }

    fn do_write(&self, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let len = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        let end = offset.checked_add(u64::from(len)).ok_or(Errno::EINVAL)?;
        if end > self.size {
            return Err(Errno::ENOSPC);
        }
        self.backing.write_all_at(data, offset).map_err(|_| Errno::EIO)?;
        if len > 0 {
            if lock(&self.shared.log).is_some() {
                let (sector, bytes) = self.aligned(offset, data)?;
                self.log(|l| l.write(sector, &bytes))?;
            }
            self.shared.counters.write(u64::from(len));
        }
        let wait = lock(&self.pacer).write(u64::from(len), Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
            self.shared.counters.write_wait(wait);
        }
        Ok(len)
    }

    fn do_flush(&self) -> Result<(), Errno> {
        self.log(LogWriter::flush)?;
        self.shared.counters.flush();
        if !self.flush_latency.is_zero() {
            std::thread::sleep(self.flush_latency);
            self.shared.counters.flush_wait(self.flush_latency);
        }
        Ok(())
    }

    fn do_fallocate(&self, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let end = offset.checked_add(length).ok_or(Errno::EINVAL)?;
        if end > self.size {
            return Err(Errno::ENOSPC);
        }
        let mode = FallocateFlags::from_bits(mode as u32).ok_or(Errno::EOPNOTSUPP)?;
        let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        let zero = FallocateFlags::ZERO_RANGE;
        let sector = u64::from(SECTOR_SIZE);
        if mode.is_empty() || mode == FallocateFlags::KEEP_SIZE {
            // Preallocation inside a device that is always fully there: nothing to do.
            return Ok(());
        }
        if mode != punch && mode != zero && mode != zero | FallocateFlags::KEEP_SIZE {
            return Err(Errno::EOPNOTSUPP);
        }
        if length == 0 {
            return Ok(());
        }
        // The memfd's tmpfs only punches holes; a hole reads back as zeros, which is what both
        // a discard (any content is allowed) and a write-zeroes (zeros are required) leave.
        rustix::fs::fallocate(&self.backing, punch, offset, length)
            .map_err(|e| Errno::from_i32(e.raw_os_error()))?;
        let (first, last) = (offset / sector, end.div_ceil(sector));
        if mode == punch {
            self.log(|l| l.discard(first, last - first))?;
            self.shared.counters.discard();
        } else {
            // A write-zeroes must read back as zeros, which a DISCARD entry does not promise:
            // log the zeros, in chunks so that memory stays bounded.
            let mut sector_at = first;
            while sector_at < last {
                let n = (last - sector_at).min(2048);
                let mut chunk = vec![0u8; (n * sector) as usize];
                // Partial sectors at either end keep their surviving bytes.
                self.backing
                    .read_exact_at(&mut chunk, sector_at * sector)
                    .map_err(|_| Errno::EIO)?;
                self.log(|l| l.write(sector_at, &chunk))?;
                sector_at += n;
            }
            self.shared.counters.zeroes();
        }
        Ok(())
    }
}

impl Filesystem for Server {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent, self.attr(IMAGE)) {
            (INodeNo::ROOT, Some(attr)) if name == IMAGE_NAME => {
                reply.entry(&TTL, &attr, Generation(0))
            }
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A device's size is fixed; other attribute changes are accepted and forgotten.
        match (self.attr(ino), size) {
            (None, _) => reply.error(Errno::ENOENT),
            (Some(_), Some(s)) if s != self.size => reply.error(Errno::EPERM),
            (Some(attr), _) => reply.attr(&TTL, &attr),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino {
            IMAGE => reply.opened(FileHandle(0), FopenFlags::empty()),
            INodeNo::ROOT => reply.error(Errno::EISDIR),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        if ino != IMAGE {
            return reply.error(Errno::EBADF);
        }
        let end = offset.saturating_add(u64::from(size)).min(self.size);
        let mut buf = vec![0u8; end.saturating_sub(offset) as usize];
        match self.backing.read_exact_at(&mut buf, offset) {
            Ok(()) => reply.data(&buf),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: fuser::WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino != IMAGE {
            return reply.error(Errno::EBADF);
        }
        match self.do_write(offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2), not a cache flush: nothing reaches the device.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino != IMAGE {
            return reply.ok();
        }
        match self.do_flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (IMAGE, FileType::RegularFile, IMAGE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if ino != IMAGE || name != MARK_XATTR {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let Ok(label) = std::str::from_utf8(value) else {
            return reply.error(Errno::EINVAL);
        };
        if check_mark(label).is_err() {
            return reply.error(Errno::EINVAL);
        }
        match self.log(|l| l.mark(label)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != IMAGE {
            return reply.error(Errno::EBADF);
        }
        match self.do_fallocate(offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
