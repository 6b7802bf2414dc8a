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
//! Several packages are read at once, one per *lane* (a thread with a queue of its own, lane k
//! reading packages k, k + lanes, ...), and the writer takes them from the lanes in the call's
//! order: a call of many packages (a base system, an upgrade) decompresses the next package
//! while the writer writes this one, where one reader left the writer waiting on
//! decompression (see docs/minbase.md for what it bought).
//!
//! The end of the queue is a promise: the reader ends it without a [`Message::Failed`] only
//! once every member has been read to its end and its checksums verified
//! ([`crate::read::deb::MemberStream::finish`]), so a writer that commits only after the queue ended
//! cleanly, as `unpack()` does, never commits a package whose checksums failed.

use crate::error::{escape, Error, Result};
use crate::options::ProgressFn;
use crate::read::control::ControlArchive;
use crate::read::deb::Deb;
use crate::read::entry::{self, Entry, Kind};
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, SyncSender};

/// Largest piece of file data in one message, and the size at which a batch is sent.
pub const CHUNK: usize = 128 * 1024;
/// Batches in flight per lane: at most about `QUEUE * 2 * CHUNK` bytes of file data are
/// buffered in each (8 MiB: the next package of a base system, most of them smaller, is read
/// whole while the writer writes this one).
pub const QUEUE: usize = 32;
/// The most lanes (packages read at once), whatever the number of CPUs: the writer, one
/// thread, cannot take more.
const MAX_LANES: usize = 4;
/// Most messages in one batch (a batch of empty files or symlinks carries no bytes).
const BATCH_MESSAGES: usize = 512;

/// What the reader sends.
pub enum Message {
    /// A new package starts; its control file says what it is.
    Package {
        index: usize,
        path: PathBuf,
        control: Box<ControlArchive>,
    },
    /// The next entry; a regular file's bytes follow as [`Message::Data`].
    Entry(Entry),
    Data(Vec<u8>),
    /// The reader failed; nothing follows.
    Failed(Error),
    /// The package's entries are all sent and its members verified: the writer's queue goes on
    /// to the next lane. Never seen by the writer.
    End,
}

/// Reads `packages` on lanes for `write`, which takes the writer's end. Of a package
/// `skipped` (by index) only the control archive is sent, then its end: the bootstrap's second
/// stage adopts the files its first stage wrote, and reads a package again itself where it
/// cannot. Each lane stops on its first error (sent as [`Message::Failed`] where the package's
/// entries were), or when the writer's end is dropped, which happens when `write` returns;
/// every lane is joined before this returns: left to the scope, a thread would still be running
/// its thread-local destructors after unpack() returned (LeakSanitizer, in the fuzzer, caught
/// one such moment).
pub fn with_lanes<R>(
    packages: &[PathBuf],
    progress: Option<&ProgressFn>,
    skipped: Vec<bool>,
    write: impl FnOnce(Queue) -> R,
) -> R {
    let lanes = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_LANES)
        .min(packages.len().max(1));
    let progress = progress.map(|report| Progress {
        report,
        total: packages.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum(),
        read: AtomicU64::new(0),
    });
    let (progress, skipped) = (progress.as_ref(), skipped.as_slice());
    std::thread::scope(|scope| {
        let mut queue =
            Queue { lanes: Vec::new(), batches: Vec::new(), next: 0, count: packages.len() };
        let mut handles = Vec::with_capacity(lanes);
        for index in 0..lanes {
            let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
            handles.push(scope.spawn(move || {
                let mut out = Batcher { tx, batch: Vec::new(), bytes: 0 };
                if let Err(e) =
                    read_lane(packages, &Lane { index, lanes, skipped }, &mut out, progress)
                {
                    out.batch.push(Message::Failed(e));
                }
                out.flush();
            }));
            queue.lanes.push(rx);
            queue.batches.push(Vec::new().into_iter());
        }
        let written = write(queue);
        for lane in handles {
            if let Err(panic) = lane.join() {
                std::panic::resume_unwind(panic);
            }
        }
        written
    })
}

/// One lane's share of the call.
struct Lane<'a> {
    index: usize,
    lanes: usize,
    skipped: &'a [bool],
}

/// The progress callback, with the bytes of package files read by every lane so far.
struct Progress<'a> {
    report: &'a ProgressFn,
    total: u64,
    read: AtomicU64,
}

impl Progress<'_> {
    fn add(&self, bytes: u64) {
        let read = self.read.fetch_add(bytes, Relaxed) + bytes;
        (self.report)(read, self.total);
    }
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

/// Reads the lane's packages in order.
fn read_lane(
    packages: &[PathBuf],
    lane: &Lane<'_>,
    out: &mut Batcher,
    progress: Option<&Progress<'_>>,
) -> Result<()> {
    for index in (lane.index..packages.len()).step_by(lane.lanes) {
        let package = &packages[index];
        let mut deb = Deb::open(package)?;
        let consumed = deb.consumed();
        let control = control_archive(package, &mut deb)?;
        if !out.send(Message::Package { index, path: package.clone(), control: Box::new(control) })
        {
            return Ok(());
        }
        let size = deb.len();
        // The package file's bytes reported so far.
        let counted = std::cell::Cell::new(0u64);
        let tick = || {
            if let Some(p) = progress {
                let now = consumed.load(Relaxed).min(size).max(counted.get());
                p.add(now - counted.replace(now));
            }
        };
        if lane.skipped.get(index) != Some(&true) {
            let (member, mut stream) = deb.data()?;
            if !send_entries(package, &member, &mut stream, out, &tick)? {
                return Ok(());
            }
            // Before the writer can see the package's end, and so before the barrier: the
            // entries sent count only once the stream they came from has verified.
            stream.finish()?;
        }
        if let Some(p) = progress {
            p.add(size - counted.get());
        }
        if !out.send(Message::End) {
            return Ok(());
        }
    }
    Ok(())
}

/// Sends the entries of the tar archive in `stream` (member `member` of `package`) and their
/// bytes, up to the archive's end, calling `tick` after each; false when the writer hung up.
fn send_entries(
    package: &Path,
    member: &str,
    stream: impl Read,
    out: &mut Batcher,
    tick: &dyn Fn(),
) -> Result<bool> {
    let bad = |e: io::Error| Error::bad(package, format!("{member}: {e}"));
    let (stream, meter) = entry::metered(stream);
    let mut archive = tar::Archive::new(stream);
    for item in archive.entries_with_seek().map_err(bad)? {
        let mut item = item.map_err(bad)?;
        let _held = meter.entry();
        let entry = entry::validate(&mut item)
            .map_err(|e| Error::bad(package, format!("{member}: {e}")))?;
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
            let n = (&mut item).take(want).read_to_end(&mut chunk).map_err(|e| {
                Error::bad(package, format!("{member}: entry '{}': {e}", escape(&shown)))
            })?;
            if n == 0 {
                return Err(Error::bad(
                    package,
                    format!(
                        "{member}: entry '{}': archive ends after {} of {size} bytes",
                        escape(&shown),
                        size - left
                    ),
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

/// The writer's end: messages one by one out of the lanes' batches, each package from its
/// lane, in the call's order.
pub struct Queue {
    lanes: Vec<Receiver<Vec<Message>>>,
    batches: Vec<std::vec::IntoIter<Message>>,
    /// The package being taken.
    next: usize,
    count: usize,
}

impl Queue {
    /// The next message; `None` once every package's end came.
    pub fn recv(&mut self) -> Option<Message> {
        while self.next < self.count {
            let lane = self.next % self.lanes.len();
            match self.batches[lane].next() {
                Some(Message::End) => self.next += 1,
                Some(m) => return Some(m),
                None => match self.lanes[lane].recv() {
                    Ok(batch) => self.batches[lane] = batch.into_iter(),
                    Err(_) => {
                        // A lane ends early only after a failure it sent, or once the writer
                        // hung up: never end the queue as if every package were read.
                        self.next = self.count;
                        return Some(Message::Failed(Error::Internal(
                            "a package reader stopped before its package's end".into(),
                        )));
                    }
                },
            }
        }
        None
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
                Some(_) | None => {
                    return Err(io::Error::other(
                        "the package reader stopped in the middle of a file",
                    ))
                }
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
        crate::read::buffered::read(self, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
    }

    /// What the writer's end yields for `packages`: per message, the package index of a
    /// `Package`, the path of an `Entry`, or the error; and every progress call.
    fn read(packages: &[PathBuf], skipped: Vec<bool>) -> (Vec<String>, Vec<(u64, u64)>) {
        let calls = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mine = calls.clone();
        let record = move |done: u64, total: u64| mine.lock().unwrap().push((done, total));
        let messages = with_lanes(packages, Some(&record), skipped, |mut queue| {
            let mut out = Vec::new();
            while let Some(m) = queue.recv() {
                match m {
                    Message::Package { index, .. } => out.push(format!("package {index}")),
                    Message::Entry(e) => out.push(format!("entry {}", e.path.display())),
                    Message::Data(_) => {}
                    Message::Failed(e) => out.push(format!("failed {e}")),
                    Message::End => out.push("end".into()),
                }
            }
            out
        });
        let calls = calls.lock().unwrap().clone();
        (messages, calls)
    }

    #[test]
    fn the_lanes_deliver_every_package_in_the_calls_order_and_progress_only_grows_to_the_total() {
        let names = [
            "pkg-v1_1.0_all.deb",
            "comp-gz_1.0_all.deb",
            "comp-xz_1.0_all.deb",
            "comp-zst_1.0_all.deb",
            "comp-bz2_1.0_all.deb",
            "other_1.0_all.deb",
            "many_1.0_all.deb",
        ];
        let packages: Vec<PathBuf> = names.iter().map(|n| fixture(n)).collect();
        let (together, progress) = read(&packages, Vec::new());
        let alone: Vec<String> = packages
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                read(std::slice::from_ref(p), Vec::new()).0.into_iter().map(move |m| {
                    if m == "package 0" {
                        format!("package {i}")
                    } else {
                        m
                    }
                })
            })
            .collect();
        assert_eq!(
            together, alone,
            "the same messages as one package at a time, in the call's order"
        );
        assert!(
            !together.iter().any(|m| m == "end" || m.starts_with("failed")),
            "ends are the queue's own: {together:?}"
        );
        let total: u64 = packages.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
        assert!(
            progress.windows(2).all(|w| w[0].0 <= w[1].0),
            "progress never goes back: {progress:?}"
        );
        assert_eq!(progress.last(), Some(&(total, total)));
    }

    #[test]
    fn a_skipped_package_sends_its_control_only_and_a_corrupt_one_fails_where_it_stands() {
        let packages = [
            fixture("pkg-v1_1.0_all.deb"),
            fixture("corrupt-data.deb"),
            fixture("comp-gz_1.0_all.deb"),
        ];
        let (messages, _) = read(&packages, vec![false, true, false]);
        let at = |m: &str| {
            messages.iter().position(|x| x == m).unwrap_or_else(|| panic!("{m} in {messages:?}"))
        };
        assert_eq!(
            at("package 2"),
            at("package 1") + 1,
            "the skipped package has no entries: {messages:?}"
        );
        assert!(
            !messages.iter().any(|m| m.starts_with("failed")),
            "nor is its corrupt data read: {messages:?}"
        );
        let (messages, _) = read(&packages, Vec::new());
        let failed = messages
            .iter()
            .position(|m| m.starts_with("failed"))
            .unwrap_or_else(|| panic!("{messages:?}"));
        assert!(failed > messages.iter().position(|m| m == "package 1").unwrap(), "{messages:?}");
        assert!(messages[failed].contains("corrupt-data.deb"), "{}", messages[failed]);
        assert!(
            !messages.iter().any(|m| m == "package 2"),
            "nothing of a later package before the failure is seen: {messages:?}"
        );
    }
}
