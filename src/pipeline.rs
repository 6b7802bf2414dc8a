//! The reading half of an unpack on its own thread: packages in, validated entries and their
//! bytes out, through a bounded queue.
//!
//! Decompression (xz above all) costs as much as creating the files, so the two run on two
//! cores, as dpkg gets from its decompressor process and tar from its pipe. Messages travel in
//! batches of about [`CHUNK`] bytes (one queue operation, and so at most one futex wake-up, per
//! batch rather than per file), and the queue holds at most [`QUEUE`] batches, so memory stays
//! bounded whatever the package. The reader never touches the root: everything it learns goes through the queue,
//! and it stops as soon as the writer hangs up (an error or a signal on the writing side).
//!
//! The end of the queue is a promise: the reader ends it without a [`Message::Failed`] only
//! once every member has been read to its end and its checksums verified
//! ([`crate::deb::MemberStream::finish`]), so a writer that commits only after the queue ended
//! cleanly, as `unpack()` does, never commits a package whose checksums failed.

use crate::control::ControlArchive;
use crate::deb::Deb;
use crate::entry::{self, Entry, Kind};
use crate::error::{escape, Error, Result};
use crate::ProgressFn;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, SyncSender};


/// Largest piece of file data in one message, and the size at which a batch is sent.
pub const CHUNK: usize = 128 * 1024;
/// Batches in flight: at most about `QUEUE * 2 * CHUNK` bytes of file data are buffered.
pub const QUEUE: usize = 16;
/// Most messages in one batch (a batch of empty files or symlinks carries no bytes).
const BATCH_MESSAGES: usize = 512;

/// What the reader sends.
pub enum Message {
    /// A new package starts; its control file says what it is.
    Package { index: usize, path: PathBuf, control: Box<ControlArchive> },
    /// The next entry; a regular file's bytes follow as [`Message::Data`].
    Entry(Entry),
    Data(Vec<u8>),
    /// The reader failed; nothing follows.
    Failed(Error),
}

/// Reads `packages` in order and sends what they hold. Returns when done, on the first error
/// (sent as [`Message::Failed`]), or when the receiver is gone.
pub fn read(packages: &[PathBuf], tx: SyncSender<Vec<Message>>, progress: Option<&ProgressFn>, skips: Option<Skips>) {
    let mut out = Batcher { tx, batch: Vec::new(), bytes: 0 };
    if let Err(e) = read_all(packages, &mut out, progress, skips.as_ref()) {
        out.batch.push(Message::Failed(e));
    }
    out.flush();
}

/// Packages whose data the writer may not need (the bootstrap's second stage adopts the files
/// its first stage wrote): after such a package's control archive the reader waits for the
/// writer's word, and reads the data only on `false`. A writer that hangs up instead stops
/// the reader.
pub struct Skips {
    /// By package index.
    pub asked: Vec<bool>,
    pub answers: Receiver<bool>,
}

/// Collects messages into batches.
struct Batcher {
    tx: SyncSender<Vec<Message>>,
    batch: Vec<Message>,
    bytes: usize,
}

impl Batcher {
    /// Adds a message; false when the writer hung up (stop quietly: it reports its own error).
    fn send(&mut self, m: Message) -> bool {
        if let Message::Data(d) = &m {
            self.bytes += d.len();
        }
        self.batch.push(m);
        if self.bytes >= CHUNK || self.batch.len() >= BATCH_MESSAGES {
            return self.flush();
        }
        true
    }

    fn flush(&mut self) -> bool {
        self.bytes = 0;
        self.batch.is_empty() || self.tx.send(std::mem::take(&mut self.batch)).is_ok()
    }
}

/// Reads and verifies `deb`'s control archive (it comes first: the data member follows).
fn control_archive(package: &Path, deb: &mut Deb) -> Result<ControlArchive> {
    let (member, mut stream) = deb.control()?;
    let control = ControlArchive::from_tar(package, &member, &mut stream)?;
    stream.finish()?;
    Ok(control)
}

/// The control archive of `package` alone, for a decision made before the transaction reads
/// the package (the bootstrap's first stage).
pub fn read_control(package: &Path) -> Result<ControlArchive> {
    control_archive(package, &mut Deb::open(package)?)
}

fn read_all(packages: &[PathBuf], out: &mut Batcher, progress: Option<&ProgressFn>, skips: Option<&Skips>) -> Result<()> {
    let total: u64 = packages.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let mut done_before = 0;
    for (index, package) in packages.iter().enumerate() {
        let mut deb = Deb::open(package)?;
        let consumed = deb.consumed();
        let control = control_archive(package, &mut deb)?;
        if !out.send(Message::Package { index, path: package.clone(), control: Box::new(control) }) {
            return Ok(());
        }
        let size = deb.len();
        if let Some(skips) = skips.filter(|s| s.asked.get(index) == Some(&true)) {
            if !out.flush() {
                return Ok(());
            }
            match skips.answers.recv() {
                Ok(true) => {
                    done_before += size;
                    continue;
                }
                Ok(false) => {}
                Err(_) => return Ok(()),
            }
        }
        let (member, mut stream) = deb.data()?;
        let tick = || {
            if let Some(p) = progress {
                p(done_before + consumed.load(Relaxed), total);
            }
        };
        if !send_entries(package, &member, &mut stream, out, &tick)? {
            return Ok(());
        }
        // Before the writer can see the end of the queue, and so before the barrier: the
        // entries sent count only once the stream they came from has verified.
        stream.finish()?;
        done_before += size;
    }
    Ok(())
}

/// Sends the entries of the tar archive in `stream` (member `member` of `package`) and their
/// bytes, up to the archive's end, calling `tick` after each; false when the writer hung up.
fn send_entries(package: &Path, member: &str, stream: impl Read, out: &mut Batcher, tick: &dyn Fn()) -> Result<bool> {
    let bad = |e: io::Error| Error::bad(package, format!("{member}: {e}"));
    let (stream, meter) = entry::metered(stream);
    let mut archive = tar::Archive::new(stream);
    for item in archive.entries_with_seek().map_err(bad)? {
        let mut item = item.map_err(bad)?;
        let _held = meter.entry();
        let Some(entry) = entry::validate(&mut item).map_err(|e| Error::bad(package, format!("{member}: {e}")))? else {
            continue;
        };
        let size = match entry.kind {
            Kind::File { size } => size,
            _ => 0,
        };
        let shown = entry.path.clone();
        if !out.send(Message::Entry(entry)) {
            return Ok(false);
        }
        let mut left = size;
        while left > 0 {
            // Straight into the message's own buffer: no zeroing, no second copy.
            let want = left.min(CHUNK as u64);
            let mut chunk = Vec::with_capacity(want as usize);
            let n = (&mut item)
                .take(want)
                .read_to_end(&mut chunk)
                .map_err(|e| Error::bad(package, format!("{member}: entry '{}': {e}", escape(&shown))))?;
            if n == 0 {
                return Err(Error::bad(
                    package,
                    format!("{member}: entry '{}': archive ends after {} of {size} bytes", escape(&shown), size - left),
                ));
            }
            left -= n as u64;
            if !out.send(Message::Data(chunk)) {
                return Ok(false);
            }
        }
        tick();
    }
    Ok(true)
}

/// The writer's end of the queue: messages one by one out of the batches.
pub struct Queue {
    rx: Receiver<Vec<Message>>,
    batch: std::vec::IntoIter<Message>,
}

impl Queue {
    pub fn new(rx: Receiver<Vec<Message>>) -> Queue {
        Queue { rx, batch: Vec::new().into_iter() }
    }

    /// The next message; `None` when the reader is done.
    pub fn recv(&mut self) -> Option<Message> {
        loop {
            if let Some(m) = self.batch.next() {
                return Some(m);
            }
            self.batch = self.rx.recv().ok()?.into_iter();
        }
    }
}

/// The writer's view of one regular file's bytes: a `BufRead` over the queue's data messages,
/// whose buffers the writer writes from directly. A reader failure in the middle of a file is
/// kept in `failed` for the writer to report.
pub struct FileData<'a> {
    rx: &'a mut Queue,
    left: u64,
    pending: Vec<u8>,
    offset: usize,
    failed: &'a mut Option<Error>,
}

impl<'a> FileData<'a> {
    /// The next `size` bytes of the queue.
    pub fn new(rx: &'a mut Queue, size: u64, failed: &'a mut Option<Error>) -> FileData<'a> {
        FileData { rx, left: size, pending: Vec::new(), offset: 0, failed }
    }
}

impl BufRead for FileData<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.offset == self.pending.len() {
            if self.left == 0 {
                return Ok(&[]);
            }
            match self.rx.recv() {
                Some(Message::Data(d)) => {
                    self.left = self.left.saturating_sub(d.len() as u64);
                    self.pending = d;
                    self.offset = 0;
                }
                Some(Message::Failed(e)) => {
                    *self.failed = Some(e);
                    return Err(io::Error::other("the package reader failed"));
                }
                Some(_) | None => return Err(io::Error::other("the package reader stopped in the middle of a file")),
            }
        }
        Ok(&self.pending[self.offset..])
    }

    fn consume(&mut self, n: usize) {
        self.offset += n;
    }
}

impl Read for FileData<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = buf.len().min(available.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}
