//! The multi-block xz reader (src/xz_blocks.rs) gives exactly what the one-thread decoder gives,
//! for streams written by xz's threaded encoder (sizes in every block header, as dpkg-deb
//! writes them) and by a flushing one-thread encoder (sizes only in the index); it refuses to
//! take streams it was not made for; it never accepts a damaged stream the one-thread decoder
//! rejects; dropping it midway stops its threads; and it engages a second worker where decoding
//! is what its reader waits for, and not where the reader is the slower. The same reader in a
//! real unpack, against dpkg-deb -x, is at the end.

mod common;

use common::deb_builder::{sample, text_tree, write_deb, xz_threaded};
use common::*;
use liblzma::stream::{Action, Check, Status, Stream, CONCATENATED};
use proptest::prelude::*;
use std::io::{Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use unpack::read::xz_blocks;

/// The tests run one at a time: some count this process's threads.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `data` as a one-thread encoder writes it when flushed every `block` bytes: block headers
/// without sizes, which only the index records.
fn xz_flushed(data: &[u8], block: usize) -> Vec<u8> {
    let mut stream = Stream::new_easy_encoder(1, Check::Crc32).unwrap();
    let mut out = Vec::with_capacity(data.len() + 1024);
    for (i, piece) in data.chunks(block).enumerate() {
        let last = (i + 1) * block >= data.len();
        let mut input = piece;
        loop {
            out.reserve(64 * 1024);
            let before = stream.total_in();
            let action = if last { Action::Finish } else { Action::FullFlush };
            let status = stream.process_vec(input, &mut out, action).unwrap();
            input = &input[(stream.total_in() - before) as usize..];
            if status == Status::StreamEnd
                || (input.is_empty() && !last && status == Status::Ok && out.capacity() > out.len())
            {
                break;
            }
        }
    }
    out
}

/// What the one-thread decoder (the engine's own, deb.rs) makes of `xz`.
fn one_thread(xz: &[u8]) -> Result<Vec<u8>, String> {
    let stream =
        Stream::new_stream_decoder(unpack::read::deb::DECODER_MEMORY_LIMIT, CONCATENATED).unwrap();
    let mut out = Vec::new();
    liblzma::bufread::XzDecoder::new_stream(xz, stream)
        .read_to_end(&mut out)
        .map(|_| out)
        .map_err(|e| e.to_string())
}

/// `xz` written into a file between some bytes of other members, as in a .deb.
fn in_file(xz: &[u8]) -> (tempfile::NamedTempFile, u64) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&[b'!'; 1001]).unwrap();
    file.write_all(xz).unwrap();
    file.write_all(b"trailing member bytes").unwrap();
    (file, 1001)
}

/// The parallel reader over `xz` with `threads` workers, all decoding from the start, read
/// `piece` bytes at a time; `None` if it leaves the stream to the one-thread decoder.
fn parallel(xz: &[u8], threads: usize, piece: usize) -> Option<Result<Vec<u8>, String>> {
    parallel_engaged(xz, threads, threads, piece)
}

/// [`parallel`] with `engaged` of the workers decoding from the start.
fn parallel_engaged(
    xz: &[u8],
    threads: usize,
    engaged: usize,
    piece: usize,
) -> Option<Result<Vec<u8>, String>> {
    let (file, start) = in_file(xz);
    let consumed = Arc::new(AtomicU64::new(0));
    let mut reader = xz_blocks::open_threads(
        file.as_file(),
        start,
        xz.len() as u64,
        consumed.clone(),
        threads,
        engaged,
    )?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; piece];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Some(Err(e.to_string())),
        }
    }
    drop(reader);
    let read = consumed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(read <= xz.len() as u64, "counted {read} compressed bytes of {}", xz.len());
    Some(Ok(out))
}

#[test]
fn threaded_encoder_streams_decode_in_order() {
    let _one = one_at_a_time();
    let data = sample(3 << 20, 1);
    let xz = xz_threaded(&data, 3, 200_000);
    for threads in [2, 3, 4] {
        for piece in [1, 4096, 1 << 20] {
            let out =
                parallel(&xz, threads, piece).expect("a 16-block stream is decoded in parallel");
            assert!(out == Ok(data.clone()), "{threads} threads, reads of {piece}: differs");
        }
    }
}

#[test]
fn flushed_streams_without_sizes_in_their_headers_decode_in_order() {
    let _one = one_at_a_time();
    let data = sample(1 << 20, 2);
    let xz = xz_flushed(&data, 100_000);
    let out = parallel(&xz, 2, 65536).expect("an 11-block stream is decoded in parallel");
    assert!(out == Ok(data), "differs");
}

#[test]
fn more_than_the_budget_ahead_still_decodes_in_order() {
    let _one = one_at_a_time();
    // Blocks decode faster than a reader taking a byte at a time, so the workers ahead fill
    // AHEAD_BUDGET and wait, and must resume as the reader gets to their blocks.
    let data = sample(3 * xz_blocks::AHEAD_BUDGET, 3);
    let xz = xz_threaded(&data, 3, 4 << 20);
    let out = parallel(&xz, 3, 7).expect("a 12-block stream is decoded in parallel");
    assert!(out == Ok(data), "differs");
}

#[test]
fn streams_it_was_not_made_for_are_left_to_one_thread() {
    let _one = one_at_a_time();
    let data = sample(600_000, 4);
    let one_block = xz_threaded(&data, 3, 1 << 20);
    assert!(parallel(&one_block, 2, 4096).is_none(), "a single block");
    let blocks = xz_threaded(&data, 3, 100_000);
    assert!(parallel(&blocks, 1, 4096).is_none(), "one thread");
    let mut two_streams = blocks.clone();
    two_streams.extend_from_slice(&blocks);
    assert!(parallel(&two_streams, 2, 4096).is_none(), "concatenated streams");
    let mut padded = blocks.clone();
    padded.extend_from_slice(&[0; 4]);
    assert!(parallel(&padded, 2, 4096).is_none(), "stream padding");
    assert_eq!(one_thread(&two_streams).unwrap().len(), 2 * data.len());
    assert_eq!(one_thread(&padded).unwrap(), data);
    // xz -9 needs 65 MiB a block: more than two workers may hold.
    let nine = xz_threaded(&data, 9, 100_000);
    assert!(parallel(&nine, 2, 4096).is_none(), "xz -9");
}

#[test]
fn dropping_the_reader_midway_stops_its_threads() {
    let _one = one_at_a_time();
    assert_eq!(threads_left("xz-block"), 0, "workers of an earlier test");
    // More than the workers may decode ahead: they are all still there, waiting, when it drops.
    let data = sample(2 * xz_blocks::AHEAD_BUDGET, 5);
    let xz = xz_threaded(&data, 3, 1 << 20);
    let (file, start) = in_file(&xz);
    let mut reader = xz_blocks::open_threads(
        file.as_file(),
        start,
        xz.len() as u64,
        Arc::new(AtomicU64::new(0)),
        3,
        3,
    )
    .unwrap();
    let mut some = [0u8; 1000];
    reader.read_exact(&mut some).unwrap();
    assert_eq!(&some[..], &data[..1000]);
    // A thread names itself once it runs: wait for all three (they cannot finish: the budget).
    let mut running = threads_named("xz-block");
    for _ in 0..200 {
        if running == 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        running = threads_named("xz-block");
    }
    assert_eq!(running, 3, "workers running");
    drop(reader);
    assert_eq!(threads_left("xz-block"), 0, "the workers outlived their reader");
}

/// Reads all of `xz` through a reader on two cores that starts with one worker, calling
/// `consume` on every piece read, and returns what it read and how many workers decode at the
/// end.
fn read_engaging(xz: &[u8], mut consume: impl FnMut(&[u8])) -> (Vec<u8>, usize) {
    let (file, start) = in_file(xz);
    let mut reader = xz_blocks::open_threads(
        file.as_file(),
        start,
        xz.len() as u64,
        Arc::new(AtomicU64::new(0)),
        2,
        1,
    )
    .unwrap();
    assert_eq!(reader.engaged(), 1, "one worker to start with");
    let mut out = Vec::with_capacity(xz.len() * 8);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        consume(&buf[..n]);
        out.extend_from_slice(&buf[..n]);
    }
    (out, reader.engaged())
}

/// The cores this process gets right now: as many threads as there are CPUs spin for 200 ms
/// and count the CPU time they were given.
fn cores_we_get() -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spin = || {
        let start = std::time::Instant::now();
        let cpu = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes into the timespec it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let begin = cpu();
        while start.elapsed() < std::time::Duration::from_millis(200) {
            std::hint::spin_loop();
        }
        (cpu() - begin) / start.elapsed().as_secs_f64()
    };
    std::thread::scope(|s| {
        (0..cpus)
            .map(|_| s.spawn(spin))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum()
    })
}

/// Why the load rule cannot be judged now, if it cannot: it weighs this process's CPU time
/// against the wall clock, so other programs taking the cores (a shared machine, a parallel
/// build) change what it sees. Asked before such a test and again when its verdict differs.
fn machine_busy() -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let got = cores_we_get();
    (got < cpus as f64 - 0.4)
        .then(|| format!("other programs take the cores: this process gets {got:.2} of {cpus}"))
}

#[test]
fn a_reader_that_waits_for_decoding_gets_a_second_worker() {
    let _one = one_at_a_time();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: one core");
        return;
    }
    if let Some(why) = machine_busy() {
        eprintln!("skipped: {why}");
        return;
    }
    // Decoding takes some hundreds of milliseconds, many load windows; the reader only copies.
    let data = sample(96 << 20, 7);
    let xz = xz_threaded(&data, 6, 8 << 20);
    let (out, engaged) = read_engaging(&xz, |_| {});
    assert!(out == data, "differs");
    if let (true, Some(why)) = (engaged != 2, machine_busy()) {
        eprintln!("no verdict: {why}");
        return;
    }
    assert_eq!(engaged, 2, "decoding was all the reader waited for, on two cores");
}

#[test]
fn a_reader_slower_than_decoding_keeps_one_worker() {
    let _one = one_at_a_time();
    if let Some(why) = machine_busy() {
        eprintln!("skipped: {why}");
        return;
    }
    // The reader spends more CPU on every byte than decoding it takes, like a writer of small
    // files: a second decoder would only take its core.
    let data = sample(12 << 20, 8);
    let xz = xz_threaded(&data, 6, 1 << 20);
    let mut sum = 0u64;
    let (out, engaged) = read_engaging(&xz, |piece| {
        for &b in piece {
            for i in 0..64u8 {
                sum = std::hint::black_box(sum.wrapping_mul(31).wrapping_add(u64::from(b ^ i)));
            }
        }
    });
    assert!(out == data, "differs");
    if let (true, Some(why)) = (engaged != 1, machine_busy()) {
        eprintln!("no verdict: {why}");
        return;
    }
    assert_eq!(engaged, 1, "the reader was the slower");
}

#[test]
fn the_load_rule_engages_only_beside_an_idle_core() {
    let ms = std::time::Duration::from_millis;
    let load = |decode, rest| xz_blocks::Load { wall: ms(40), decode: ms(decode), rest: ms(rest) };
    // The first 40 ms as measured on emacs-common and linux-headers (one worker, two cores).
    assert!(load(38, 6).calls_for_another_worker(1, 2), "emacs-common: the writer idles");
    assert!(!load(40, 38).calls_for_another_worker(1, 2), "linux-headers: the writer is as busy");
    assert!(
        !load(31, 28).calls_for_another_worker(1, 2),
        "what the writer leaves idle goes to kernel writeback"
    );
    assert!(
        !load(10, 2).calls_for_another_worker(1, 2),
        "the decoder idles too: the unpack waits for something else"
    );
    assert!(
        load(40, 40).calls_for_another_worker(1, 4),
        "four cores: one is idle beside the writer"
    );
    assert!(!load(80, 40).calls_for_another_worker(2, 3), "three cores, all busy");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Damage anywhere (flipped bytes, a cut) never makes the parallel reader accept what the
    /// one-thread decoder rejects, nor give other bytes than it gives, whether one worker or
    /// both decode from the start.
    #[test]
    fn damage_is_never_accepted(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        flushed in any::<bool>(),
        engaged in 1..=2usize,
    ) {
        let _one = one_at_a_time();
        let data = sample(300_000, 6);
        let mut xz = if flushed { xz_flushed(&data, 40_000) } else { xz_threaded(&data, 3, 40_000) };
        for (at, bits) in &flips {
            let i = at.index(xz.len());
            xz[i] ^= bits;
        }
        if let Some(cut) = cut {
            xz.truncate(cut.index(xz.len()));
        }
        let theirs = one_thread(&xz);
        if let Some(ours) = parallel_engaged(&xz, 2, engaged, 8192) {
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => prop_assert!(a == b, "different bytes"),
                (Err(_), Err(_)) => {}
                _ => prop_assert!(false, "parallel {:?}, one thread {:?}", ours.as_ref().map(Vec::len), theirs.as_ref().map(Vec::len)),
            }
        }
        prop_assert_eq!(threads_left("xz-block"), 0);
    }
}

/// A package as dpkg-deb writes one, its data member in many xz blocks, unpacked by the real
/// binary: the same tree as dpkg-deb -x.
#[test]
fn a_multi_block_package_unpacks_like_dpkg_deb() {
    let _one = one_at_a_time();
    let xz = xz_threaded(&text_tree(60, 20_000), 3, 100_000);
    let dir = tempfile::tempdir().unwrap();
    let deb = write_deb(dir.path(), "multi_1.0_all.deb", "data.tar.xz", &xz);
    assert!(parallel(&xz, 2, 65536).is_some(), "the data member is one the parallel reader takes");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let r = unpack(["-q", "-s", "none", deb.to_str().unwrap(), root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let theirs = reference_tree(&deb, &dir.path().join("reference"));
    assert_same_tree(&snapshot(&root), &theirs, "multi-block xz package");
}
