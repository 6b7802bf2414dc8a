//! A multi-block xz member decoded on several threads, handed out in order, in bounded memory.
//!
//! dpkg-deb (1.21 and later) compresses with xz's multi-threaded encoder, which cuts the tar
//! stream into independent blocks (24 MiB each at the default level) and records every block's
//! sizes in the stream's index. On one thread, decoding is the floor of an unpack: emacs-common
//! decompresses in 0.46 s of a 0.53 s unpack. So each worker here decodes whole blocks from its
//! own offset in the package file, and the reader hands their bytes out in the stream's order.
//!
//! A second worker pays only where decoding is what the unpack waits for. On two cores, when
//! writing the files costs as much CPU as decoding them (linux-headers: 10,000 small files), a
//! second decoder only takes the writer's core, and the unpack is 10% slower than with one
//! (`scripts/ab.sh none 11 PKG` over builds with one and two workers: 0.32 against 0.36 s);
//! where the files are few and large (emacs-common) the writer idles and a second decoder
//! makes it 27% faster (0.48 against 0.35 s). So the reader starts with one worker and engages
//! another only while the workers keep their cores busy and the rest of the process leaves a
//! core idle, as the CPU clocks say (see [`Load`]).
//!
//! Why not liblzma's own threaded decoder: it gives every thread an output buffer as large as a
//! whole block and keeps it until the block has been read, about +75 MiB on two threads for a
//! dpkg-deb package, more than an unpack may use in all (64 MiB). Here the block being read
//! is streamed out as it is decoded, and only the blocks ahead of it are held, within
//! [`AHEAD_BUDGET`] bytes in all. liblzma has no such reader, and no crate does; the block and
//! index decoders themselves are liblzma's, called through liblzma-sys.
//!
//! This reader must never accept what the one-thread decoder rejects. liblzma checks the stream
//! header and footer (CRC32s, matching flags), the index (CRC32, exact length), and every
//! block's header, sizes, padding and check against the index. Whatever [`open`] does not find
//! to be one well-formed stream of several blocks exactly filling the member (a single block,
//! concatenated streams, stream padding, a huge index, a block needing more memory than the
//! budget) it leaves to the one-thread decoder by returning `None`, which then reports any
//! fault with the errors it always has.

use liblzma_sys as sys;
use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of blocks decoded ahead of the one being read, at most, all workers together. Two
/// thirds of a dpkg-deb block at the default level: on emacs-common as fast as a whole block
/// (24 MiB) and 8 MiB less memory; 8 MiB is 18% slower (`scripts/ab.sh none 7 PKG` over
/// builds with each budget).
pub const AHEAD_BUDGET: usize = 16 << 20;
/// Bytes of the block being read that may wait in its queue.
const HEAD_QUEUE: usize = 2 << 20;
/// Everything the workers may hold: their decoders and their queues. With the 9 MiB a block
/// of xz -6 needs to decode, that is two workers (an unpack of emacs-common peaks at 50 MiB);
/// xz -7 and above get fewer than two, and the stream is decoded on one thread.
pub const MEMORY_BUDGET: u64 = 40 << 20;
/// Most workers, whatever the machine: past four, one writer cannot keep up anyway.
const MAX_WORKERS: usize = 4;
/// The largest index read; a real one is a few bytes per block.
const MAX_INDEX: u64 = 1 << 20;
/// The most blocks looked at; more means blocks too small for threads to pay.
const MAX_BLOCKS: u64 = 4096;
/// One piece of decoded output.
const OUT_CHUNK: usize = 256 * 1024;
/// One read of compressed input.
const IN_CHUNK: usize = 64 * 1024;
/// The shortest time the load is weighed over: twenty pieces decoded, so that their
/// granularity is lost in it, and more than one burst of small files.
const LOAD_SPAN: Duration = Duration::from_millis(40);
/// The longest: past it the weighing starts afresh, so that a package whose files grow larger
/// further on still gets its worker there.
const LOAD_SPAN_MAX: Duration = Duration::from_millis(200);
/// How much of a core must be idle beside the workers for another to be engaged. Not just any
/// idle time: what the kernel does for the unpack (writeback for `syncfs`, journal commits)
/// runs outside the process, on the time it leaves idle. Over the first 40 ms, with one worker
/// on two cores, the rest of the process used 0.13 to 0.15 of a core on emacs-common, and 0.68
/// to 0.95 on linux-headers (`none` and `syncfs`, four runs each), where a second worker makes
/// the unpack slower.
const IDLE_TO_ENGAGE: f64 = 0.5;

/// One block: where its header starts in the package file and its sizes from the index.
#[derive(Debug, Clone, Copy)]
struct Block {
    offset: u64,
    unpadded: u64,
    total: u64,
    uncompressed: u64,
}

/// The member's blocks, and how to decode them.
#[derive(Debug)]
struct Layout {
    check: sys::lzma_check,
    blocks: Vec<Block>,
    /// The most memory one block's decoder needs.
    decoder_memory: u64,
}

/// What a worker puts in its queue.
enum Piece {
    Data(Vec<u8>),
    /// The worker's current block is complete and checked.
    End,
    Failed(io::Error),
}

struct State {
    /// The block being read.
    head: usize,
    /// The next block no worker has taken yet.
    next: usize,
    /// Workers `0..engaged` take blocks; the others wait for the load to call for them.
    engaged: usize,
    /// The CPU time the workers reported, and the window it is measured over.
    decode_cpu: Duration,
    window: Window,
    /// One queue per block, and the bytes in it.
    queues: Vec<VecDeque<Piece>>,
    queued: Vec<usize>,
    total_queued: usize,
    /// Emptied buffers, for the workers to fill again, so memory is touched once.
    free: Vec<Vec<u8>>,
    stop: bool,
    /// Who is asleep, so that nobody is woken for nothing: a wake-up per 256 KiB piece made
    /// five times the context switches of the one-thread decoder.
    reader_waiting: bool,
    /// For each worker, the block it waits to queue a piece of, if it waits.
    worker_waits_with: Vec<Option<usize>>,
}

/// The start of a load window: when, and the process's and the workers' CPU time then.
#[derive(Clone, Copy)]
struct Window {
    at: Instant,
    process_cpu: Duration,
    decode_cpu: Duration,
}

impl State {
    /// Whether a waiting worker should be woken: the reader has read its queue, or all the
    /// queues, down to well below the budget that stopped it (not one piece below), or has
    /// moved on to another block.
    fn room_for_workers(&self, head_moved: bool) -> bool {
        self.worker_waits_with.iter().any(|waits| match *waits {
            None => false,
            Some(_) if head_moved => true,
            Some(b) if b == self.head => self.queued[b] <= HEAD_QUEUE / 2,
            Some(_) => self.total_queued <= AHEAD_BUDGET * 3 / 4,
        })
    }

    /// Weighs the load since the window began (see [`Load`]) and engages one more of the
    /// `workers` if it calls for one (true if so); `cores` is how many the workers may use. The
    /// window is weighed once it spans [`LOAD_SPAN`], and begins afresh after an engagement or
    /// after [`LOAD_SPAN_MAX`].
    fn weigh_load(&mut self, cores: usize, workers: usize) -> bool {
        let now = Instant::now();
        let wall = now.saturating_duration_since(self.window.at);
        if wall < LOAD_SPAN {
            return false;
        }
        let process_cpu = process_cpu();
        let decode = self.decode_cpu.saturating_sub(self.window.decode_cpu);
        let load = Load {
            wall,
            decode,
            rest: process_cpu.saturating_sub(self.window.process_cpu).saturating_sub(decode),
        };
        let engage = load.calls_for_another_worker(self.engaged, cores);
        if engage || wall >= LOAD_SPAN_MAX {
            self.window = Window { at: now, process_cpu, decode_cpu: self.decode_cpu };
        }
        if engage {
            self.engaged = (self.engaged + 1).min(workers);
        }
        engage
    }
}

struct Shared {
    state: Mutex<State>,
    /// The reader waits here for a piece of the block it reads.
    for_reader: Condvar,
    /// The workers wait here for room in the budget, or to be engaged.
    for_workers: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(guard: MutexGuard<'a, State>, on: &Condvar) -> MutexGuard<'a, State> {
        on.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the workers and wakes everyone.
    fn stop(&self) {
        self.lock().stop = true;
        self.for_reader.notify_all();
        self.for_workers.notify_all();
    }
}

/// The decoded tar stream of a multi-block xz member. Dropping it stops and joins its workers.
/// The stream's header, index and footer are verified when it opens, each block's check when
/// its last byte has been read, so the stream has verified only once a read returned 0: a tar
/// reader stops before (`MemberStream::finish` in deb.rs reads the rest).
pub struct ParallelXz {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    blocks: usize,
    current: Vec<u8>,
    offset: usize,
    /// The first failure, given again to every later read.
    failed: Option<(io::ErrorKind, String)>,
}

/// What one load window saw: how long it was, the CPU time the engaged workers used, and the
/// CPU time the rest of the process used.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub wall: Duration,
    pub decode: Duration,
    pub rest: Duration,
}

impl Load {
    /// Whether one more worker would decode on an otherwise idle core, with `engaged` at work
    /// on `cores` cores: the workers kept at least half of each of their cores busy (decoding
    /// is what the unpack waits for) and the rest of the process left at least
    /// `IDLE_TO_ENGAGE` (half) of a core beside them. On two cores with one worker: writing costs at
    /// most half of decoding. A writer that waits for the disk (`fsync`) passes while the
    /// queues behind the reader first fill, and gets a second worker that then waits with the
    /// first: memory, not time.
    pub fn calls_for_another_worker(&self, engaged: usize, cores: usize) -> bool {
        let (wall, decode, rest) =
            (self.wall.as_secs_f64(), self.decode.as_secs_f64(), self.rest.as_secs_f64());
        let free_beside_workers = cores.saturating_sub(engaged) as f64;
        decode >= 0.5 * engaged as f64 * wall
            && rest <= (free_beside_workers - IDLE_TO_ENGAGE) * wall
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU time of all of this process's threads.
fn process_cpu() -> Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Through libc, not rustix: rustix finds the vDSO by parsing it itself, which valgrind's
/// address space does not allow (rustix issue 1559), and an xz package must unpack under
/// callgrind, the engine's deterministic instruction count. glibc uses the same vDSO.
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to write; on failure `t` stays zero.
    unsafe { libc::clock_gettime(clock, &mut t) };
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// A parallel reader over the xz stream in `file` at `start`, `len` bytes long, with up to a
/// worker per core (one at first, more as the load calls for them), adding the compressed
/// bytes it reads to `consumed`; `None` if the stream is not one to decode in parallel (see
/// the module's documentation) and the caller should decode it on one thread.
pub fn open(file: &File, start: u64, len: u64, consumed: Arc<AtomicU64>) -> Option<ParallelXz> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    open_threads(file, start, len, consumed, cores, 1)
}

/// [`open`] with at most `threads` workers whatever the machine, `engaged` of them decoding
/// from the start (the tests' way to run two on one core, or to watch the load engage them).
pub fn open_threads(
    file: &File,
    start: u64,
    len: u64,
    consumed: Arc<AtomicU64>,
    threads: usize,
    engaged: usize,
) -> Option<ParallelXz> {
    let layout = layout(file, start, len)?;
    let per_worker = layout.decoder_memory.saturating_add(IN_CHUNK as u64);
    let affordable = MEMORY_BUDGET.saturating_sub((AHEAD_BUDGET + HEAD_QUEUE) as u64) / per_worker;
    let workers = threads.min(MAX_WORKERS).min(layout.blocks.len()).min(affordable as usize);
    if workers < 2 {
        return None;
    }
    let file = Arc::new(file.try_clone().ok()?);
    let layout = Arc::new(layout);
    let blocks = layout.blocks.len();
    let state = State {
        head: 0,
        next: 0,
        engaged: engaged.clamp(1, workers),
        decode_cpu: Duration::ZERO,
        window: Window {
            at: Instant::now(),
            process_cpu: process_cpu(),
            decode_cpu: Duration::ZERO,
        },
        queues: (0..blocks).map(|_| VecDeque::new()).collect(),
        queued: vec![0; blocks],
        total_queued: 0,
        free: Vec::new(),
        stop: false,
        reader_waiting: false,
        worker_waits_with: vec![None; workers],
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        for_reader: Condvar::new(),
        for_workers: Condvar::new(),
    });
    let mut reader = ParallelXz {
        shared: shared.clone(),
        workers: Vec::new(),
        blocks,
        current: Vec::new(),
        offset: 0,
        failed: None,
    };
    for w in 0..workers {
        let worker = Worker {
            shared: shared.clone(),
            file: file.clone(),
            layout: layout.clone(),
            index: w,
            count: workers,
            cores: threads,
            consumed: consumed.clone(),
            block: Cell::new(None),
            cpu_reported: Cell::new(Duration::ZERO),
        };
        // A thread that cannot start leaves `reader` to stop and join the ones that did.
        let handle =
            std::thread::Builder::new().name("xz-block".into()).spawn(move || worker.run()).ok()?;
        reader.workers.push(handle);
    }
    Some(reader)
}

impl ParallelXz {
    /// How many workers decode by now (for the tests).
    #[cfg(feature = "fuzzing")]
    pub fn engaged(&self) -> usize {
        self.shared.lock().engaged
    }
}

impl Read for ParallelXz {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.offset < self.current.len() {
                let n = buf.len().min(self.current.len() - self.offset);
                buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
                self.offset += n;
                return Ok(n);
            }
            if let Some((kind, message)) = &self.failed {
                return Err(io::Error::new(*kind, message.clone()));
            }
            let mut state = self.shared.lock();
            // Every buffer is kept for reuse: there are never more than the budget allows, and
            // a fresh one costs 64 page faults.
            if !self.current.is_empty() {
                let mut used = std::mem::take(&mut self.current);
                used.clear();
                state.free.push(used);
            }
            self.current.clear();
            self.offset = 0;
            if state.head == self.blocks {
                return Ok(0);
            }
            let head = state.head;
            let piece = loop {
                if let Some(piece) = state.queues[head].pop_front() {
                    break piece;
                }
                state.reader_waiting = true;
                state = Shared::wait(state, &self.shared.for_reader);
                state.reader_waiting = false;
            };
            let head_moved = match piece {
                Piece::Data(data) => {
                    state.queued[head] -= data.len();
                    state.total_queued -= data.len();
                    self.current = data;
                    false
                }
                Piece::End => {
                    state.head += 1;
                    true
                }
                Piece::Failed(e) => {
                    self.failed = Some((e.kind(), e.to_string()));
                    false
                }
            };
            let wake = state.room_for_workers(head_moved);
            drop(state);
            if wake {
                self.shared.for_workers.notify_all();
            }
        }
    }
}

impl Drop for ParallelXz {
    fn drop(&mut self) {
        self.shared.stop();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// One decoding thread.
struct Worker {
    shared: Arc<Shared>,
    file: Arc<File>,
    layout: Arc<Layout>,
    index: usize,
    count: usize,
    cores: usize,
    consumed: Arc<AtomicU64>,
    /// The block it decodes.
    block: Cell<Option<usize>>,
    /// Its CPU time as last added to the shared count.
    cpu_reported: Cell<Duration>,
}

/// A worker that panics still ends its block's queue, so the reader reports it instead of
/// waiting.
impl Drop for Worker {
    fn drop(&mut self) {
        if let (true, Some(b)) = (std::thread::panicking(), self.block.get()) {
            self.shared.lock().queues[b]
                .push_back(Piece::Failed(io::Error::other("an xz decoding thread failed")));
            self.shared.for_reader.notify_all();
        }
    }
}

/// The reader went away: stop quietly.
struct Stopped;

impl Worker {
    fn run(self) {
        while let Some(b) = self.claim() {
            self.block.set(Some(b));
            let piece = match self.decode(b) {
                Ok(()) => Piece::End,
                Err(Fault::Stopped) => return,
                Err(Fault::Io(e)) => Piece::Failed(e),
            };
            let failed = matches!(piece, Piece::Failed(_));
            if self.push(b, piece).is_err() || failed {
                return;
            }
        }
    }

    /// The next block no worker has taken, once this worker is engaged; `None` when there are
    /// no more or the reader went away.
    fn claim(&self) -> Option<usize> {
        let mut state = self.shared.lock();
        while self.index >= state.engaged && !state.stop && state.next < state.queues.len() {
            state = Shared::wait(state, &self.shared.for_workers);
        }
        if state.stop || state.next == state.queues.len() {
            return None;
        }
        state.next += 1;
        if state.next == state.queues.len() {
            // The workers still waiting to be engaged have nothing left to wait for.
            self.shared.for_workers.notify_all();
        }
        Some(state.next - 1)
    }

    /// Decodes block `b` into its queue.
    fn decode(&self, b: usize) -> Result<(), Fault> {
        let block = &self.layout.blocks[b];
        let fault = |e| Fault::Io(in_block(b, e));
        let mut decoder = BlockDecoder::new(&self.file, self.layout.check, block).map_err(fault)?;
        let mut out = self.take_buffer();
        loop {
            let finished = decoder.decode(&self.file, &mut out, &self.consumed).map_err(fault)?;
            if out.len() == out.capacity() || (finished && !out.is_empty()) {
                self.push(b, Piece::Data(std::mem::take(&mut out)))?;
                out = self.take_buffer();
            }
            if finished {
                return decoder.verify(block).map_err(fault);
            }
        }
    }

    /// An empty buffer of [`OUT_CHUNK`] bytes, a used one if the reader gave one back.
    fn take_buffer(&self) -> Vec<u8> {
        self.shared.lock().free.pop().unwrap_or_else(|| Vec::with_capacity(OUT_CHUNK))
    }

    /// Queues a piece of block `b`, once the budget allows: the block being read may have
    /// [`HEAD_QUEUE`] bytes waiting, the blocks ahead [`AHEAD_BUDGET`] bytes in all. While a
    /// worker is still to be engaged, it first adds its CPU time to the load and weighs it.
    fn push(&self, b: usize, piece: Piece) -> Result<(), Stopped> {
        let size = match &piece {
            Piece::Data(d) => d.len(),
            _ => 0,
        };
        let w = self.index;
        let mut state = self.shared.lock();
        if state.engaged < self.count {
            let cpu = thread_cpu();
            state.decode_cpu += cpu.saturating_sub(self.cpu_reported.replace(cpu));
            if state.weigh_load(self.cores, self.count) {
                self.shared.for_workers.notify_all();
            }
        }
        loop {
            if state.stop {
                return Err(Stopped);
            }
            let room = if state.head == b {
                state.queued[b] < HEAD_QUEUE
            } else {
                state.total_queued < AHEAD_BUDGET
            };
            if room || size == 0 {
                break;
            }
            state.worker_waits_with[w] = Some(b);
            state = Shared::wait(state, &self.shared.for_workers);
            state.worker_waits_with[w] = None;
        }
        state.queues[b].push_back(piece);
        state.queued[b] += size;
        state.total_queued += size;
        let wake = state.reader_waiting && state.head == b;
        drop(state);
        if wake {
            self.shared.for_reader.notify_one();
        }
        Ok(())
    }
}

/// Why a worker stopped early.
enum Fault {
    Stopped,
    Io(io::Error),
}

impl From<Stopped> for Fault {
    fn from(_: Stopped) -> Fault {
        Fault::Stopped
    }
}

fn in_block(b: usize, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("xz block {}: {e}", b + 1))
}

/// The blocks of the single xz stream at `start`, or `None` (see [`open`]).
fn layout(file: &File, start: u64, len: u64) -> Option<Layout> {
    let header_len = u64::from(sys::LZMA_STREAM_HEADER_SIZE);
    if len < 2 * header_len {
        return None;
    }
    let header = read_at(file, start, header_len)?;
    let footer = read_at(file, start + len - header_len, header_len)?;
    // SAFETY: both are 12-byte buffers, as the decoders read; the flags are plain data.
    let (mut header_flags, mut footer_flags) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    unsafe {
        if sys::lzma_stream_header_decode(&mut header_flags, header.as_ptr()) != sys::LZMA_OK
            || sys::lzma_stream_footer_decode(&mut footer_flags, footer.as_ptr()) != sys::LZMA_OK
            || sys::lzma_stream_flags_compare(&header_flags, &footer_flags) != sys::LZMA_OK
        {
            return None;
        }
    }
    // SAFETY: a plain query.
    if unsafe { sys::lzma_check_is_supported(header_flags.check) } == 0 {
        return None;
    }
    let index_len = footer_flags.backward_size;
    if index_len > MAX_INDEX || index_len + 2 * header_len > len {
        return None;
    }
    let index = Index::decode(&read_at(file, start + len - header_len - index_len, index_len)?)?;
    let count = index.block_count();
    // The blocks, index, header and footer are the whole member, not a byte more.
    if !(2..=MAX_BLOCKS).contains(&count) || index.total_size() + index_len + 2 * header_len != len
    {
        return None;
    }
    let mut blocks = Vec::with_capacity(count as usize);
    let mut decoder_memory = 0;
    for mut block in index.blocks() {
        block.offset += start;
        decoder_memory = decoder_memory
            .max(BlockHeader::read(file, header_flags.check, &block).ok()?.decoder_memory());
        blocks.push(block);
    }
    Some(Layout { check: header_flags.check, blocks, decoder_memory })
}

/// `len` bytes of `file` at `at`.
fn read_at(file: &File, at: u64, len: u64) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact_at(&mut bytes, at).ok()?;
    Some(bytes)
}

/// A decoded xz index, freed on drop.
struct Index(*mut sys::lzma_index);

impl Index {
    /// The index in `bytes`, which must hold it exactly.
    fn decode(bytes: &[u8]) -> Option<Index> {
        let mut index = std::ptr::null_mut();
        let mut memlimit = 16 << 20;
        let mut pos = 0;
        // SAFETY: liblzma reads `bytes` within its length and sets `index` only on success.
        let ret = unsafe {
            sys::lzma_index_buffer_decode(
                &mut index,
                &mut memlimit,
                std::ptr::null(),
                bytes.as_ptr(),
                &mut pos,
                bytes.len(),
            )
        };
        (ret == sys::LZMA_OK && pos == bytes.len() && !index.is_null()).then_some(Index(index))
    }

    fn block_count(&self) -> u64 {
        // SAFETY: a valid index, owned by self.
        unsafe { sys::lzma_index_block_count(self.0) }
    }

    /// The size of all blocks, padding included.
    fn total_size(&self) -> u64 {
        // SAFETY: as above.
        unsafe { sys::lzma_index_total_size(self.0) }
    }

    /// The blocks in stream order, offsets from the start of the stream.
    fn blocks(&self) -> Vec<Block> {
        let mut blocks = Vec::new();
        // SAFETY: the iterator reads the index owned by self, which outlives it.
        unsafe {
            let mut iter = std::mem::zeroed();
            sys::lzma_index_iter_init(&mut iter, self.0);
            while sys::lzma_index_iter_next(
                &mut iter,
                sys::lzma_index_iter_mode_LZMA_INDEX_ITER_BLOCK,
            ) == 0
            {
                let b = iter.block;
                blocks.push(Block {
                    offset: b.compressed_file_offset,
                    unpadded: b.unpadded_size,
                    total: b.total_size,
                    uncompressed: b.uncompressed_size,
                });
            }
        }
        blocks
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: allocated by lzma_index_buffer_decode, freed once.
        unsafe { sys::lzma_index_end(self.0, std::ptr::null()) }
    }
}

/// A block's decoded header: its filter chain, whose options liblzma allocated. Boxed: the
/// block decoder keeps a pointer to the `lzma_block` and writes to it until it ends.
struct BlockHeader {
    block: Box<sys::lzma_block>,
    filters: Box<[sys::lzma_filter; sys::LZMA_FILTERS_MAX as usize + 1]>,
}

impl BlockHeader {
    /// Reads and checks the header of `block` against the index's sizes.
    fn read(file: &File, check: sys::lzma_check, block: &Block) -> io::Result<BlockHeader> {
        let corrupt = |what: &str| {
            io::Error::new(io::ErrorKind::InvalidData, format!("corrupt xz block header: {what}"))
        };
        let mut bytes = [0u8; sys::LZMA_BLOCK_HEADER_SIZE_MAX as usize];
        file.read_exact_at(&mut bytes[..1], block.offset)?;
        if bytes[0] == 0 {
            return Err(corrupt("an index where a block was expected"));
        }
        let size = (u32::from(bytes[0]) + 1) * 4;
        if u64::from(size) >= block.unpadded {
            return Err(corrupt("longer than its block"));
        }
        file.read_exact_at(&mut bytes[1..size as usize], block.offset + 1)?;
        // SAFETY: a zeroed lzma_block is its documented initial state; a chain of filters whose
        // ids are all LZMA_VLI_UNKNOWN is empty, so dropping it before decoding frees nothing.
        let mut header = BlockHeader {
            block: Box::new(unsafe { std::mem::zeroed() }),
            filters: Box::new(
                [sys::lzma_filter { id: sys::LZMA_VLI_UNKNOWN, options: std::ptr::null_mut() };
                    sys::LZMA_FILTERS_MAX as usize + 1],
            ),
        };
        header.block.version = 1;
        header.block.header_size = size;
        header.block.check = check;
        header.block.filters = header.filters.as_mut_ptr();
        // SAFETY: `bytes` holds `size` bytes of header; the filters array has the
        // LZMA_FILTERS_MAX + 1 entries liblzma requires, and is left empty on failure.
        let ret = unsafe {
            sys::lzma_block_header_decode(&mut *header.block, std::ptr::null(), bytes.as_ptr())
        };
        if ret != sys::LZMA_OK {
            return Err(lzma_error(ret));
        }
        // SAFETY: a decoded block, as the function requires.
        let ret = unsafe { sys::lzma_block_compressed_size(&mut *header.block, block.unpadded) };
        if ret != sys::LZMA_OK {
            return Err(corrupt("its sizes disagree with the index"));
        }
        match header.block.uncompressed_size {
            sys::LZMA_VLI_UNKNOWN => header.block.uncompressed_size = block.uncompressed,
            size if size != block.uncompressed => {
                return Err(corrupt("its sizes disagree with the index"))
            }
            _ => {}
        }
        Ok(header)
    }

    fn decoder_memory(&self) -> u64 {
        // SAFETY: a decoded filter chain.
        unsafe { sys::lzma_raw_decoder_memusage(self.filters.as_ptr()) }
    }
}

impl Drop for BlockHeader {
    fn drop(&mut self) {
        // SAFETY: the options were allocated by lzma_block_header_decode, or there are none.
        unsafe { sys::lzma_filters_free(self.filters.as_mut_ptr(), std::ptr::null()) }
    }
}

/// liblzma's block decoder over one block, reading it from the package file; freed on drop.
struct BlockDecoder {
    stream: sys::lzma_stream,
    /// What the decoder points at; dropped after it.
    header: BlockHeader,
    /// Compressed bytes; `stream.next_in` points into this heap buffer, which never grows.
    input: Vec<u8>,
    /// The next compressed byte to read, and the end of the block, in the package file.
    at: u64,
    end: u64,
}

impl BlockDecoder {
    fn new(file: &File, check: sys::lzma_check, block: &Block) -> io::Result<BlockDecoder> {
        let header = BlockHeader::read(file, check, block)?;
        let at = block.offset + u64::from(header.block.header_size);
        // SAFETY: a zeroed lzma_stream is LZMA_STREAM_INIT.
        let mut decoder = BlockDecoder {
            stream: unsafe { std::mem::zeroed() },
            header,
            input: vec![0; IN_CHUNK],
            at,
            end: block.offset + block.total,
        };
        // SAFETY: the block is decoded and boxed inside `decoder`, which outlives the stream.
        let ret =
            unsafe { sys::lzma_block_decoder(&mut decoder.stream, &mut *decoder.header.block) };
        if ret != sys::LZMA_OK {
            return Err(lzma_error(ret));
        }
        Ok(decoder)
    }

    /// Decodes into the spare capacity of `out`, reading input as needed (and counting it in
    /// `consumed`); true when the block is complete.
    fn decode(&mut self, file: &File, out: &mut Vec<u8>, consumed: &AtomicU64) -> io::Result<bool> {
        if self.stream.avail_in == 0 && self.at < self.end {
            let n = IN_CHUNK.min((self.end - self.at) as usize);
            file.read_exact_at(&mut self.input[..n], self.at)?;
            consumed.fetch_add(n as u64, Relaxed);
            self.at += n as u64;
            self.stream.next_in = self.input.as_ptr();
            self.stream.avail_in = n;
        }
        let spare = out.spare_capacity_mut();
        self.stream.next_out = spare.as_mut_ptr().cast();
        self.stream.avail_out = spare.len();
        let action = if self.at == self.end { sys::LZMA_FINISH } else { sys::LZMA_RUN };
        // SAFETY: next_in/avail_in describe unread bytes of `self.input`; next_out/avail_out
        // describe `out`'s spare capacity.
        let ret = unsafe { sys::lzma_code(&mut self.stream, action) };
        let written = spare.len() - self.stream.avail_out;
        // SAFETY: liblzma initialised `written` bytes of the spare capacity.
        unsafe { out.set_len(out.len() + written) };
        match ret {
            sys::LZMA_OK => Ok(false),
            sys::LZMA_STREAM_END => Ok(true),
            _ => Err(lzma_error(ret)),
        }
    }

    /// After the end: liblzma has checked the sizes, padding and check; all input was used.
    fn verify(&self, block: &Block) -> io::Result<()> {
        let header_size = u64::from(self.header.block.header_size);
        if self.at != self.end
            || self.stream.avail_in != 0
            || self.stream.total_in + header_size != block.total
            || self.stream.total_out != block.uncompressed
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "corrupt xz block: its sizes disagree with the index",
            ));
        }
        Ok(())
    }
}

impl Drop for BlockDecoder {
    fn drop(&mut self) {
        // SAFETY: initialised by lzma_block_decoder (or still zeroed, which lzma_end accepts).
        unsafe { sys::lzma_end(&mut self.stream) }
    }
}
/// What a liblzma return code means, in the words of the one-thread decoder's errors.
fn lzma_error(ret: sys::lzma_ret) -> io::Error {
    let (kind, text) = match ret {
        sys::LZMA_DATA_ERROR => {
            (io::ErrorKind::InvalidData, "its data or its check does not verify")
        }
        sys::LZMA_FORMAT_ERROR => (io::ErrorKind::InvalidData, "not xz data"),
        sys::LZMA_OPTIONS_ERROR => (io::ErrorKind::InvalidData, "unsupported xz options"),
        sys::LZMA_BUF_ERROR => (io::ErrorKind::UnexpectedEof, "xz data is truncated"),
        sys::LZMA_MEM_ERROR | sys::LZMA_MEMLIMIT_ERROR => {
            (io::ErrorKind::OutOfMemory, "out of memory decoding xz")
        }
        sys::LZMA_UNSUPPORTED_CHECK => {
            (io::ErrorKind::InvalidData, "unsupported xz integrity check")
        }
        _ => (io::ErrorKind::Other, "xz decoder failed"),
    };
    io::Error::new(kind, text)
}
