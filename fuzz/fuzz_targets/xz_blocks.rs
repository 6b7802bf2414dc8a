//! Any bytes as an xz stream: the multi-block reader (src/xz_blocks.rs) must give exactly what
//! the one-thread decoder gives, or fail where it fails, or leave the stream to it; never hang
//! (the reader is dropped at once on a failure, which must stop its two workers).
#![no_main]

use liblzma::stream::{Stream, CONCATENATED};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // SAFETY: memfd_create with a valid name; the descriptor is owned by the File.
    let fd = unsafe { libc::memfd_create(c"xz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(data).unwrap();
    let Some(mut reader) = unpack::read::xz_blocks::open_threads(
        &file,
        0,
        data.len() as u64,
        Arc::new(AtomicU64::new(0)),
        2,
        2,
    ) else {
        return;
    };
    let mut ours = Vec::new();
    let ours = reader.read_to_end(&mut ours).map(|_| ours);
    drop(reader);
    let stream =
        Stream::new_stream_decoder(unpack::read::deb::DECODER_MEMORY_LIMIT, CONCATENATED).unwrap();
    let mut theirs = Vec::new();
    let theirs = liblzma::bufread::XzDecoder::new_stream(data, stream)
        .read_to_end(&mut theirs)
        .map(|_| theirs);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => assert!(a == b, "the parallel reader gave other bytes"),
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) => {
            panic!("the parallel reader accepted a stream the one-thread decoder rejects: {e}")
        }
        (Err(e), Ok(_)) => {
            panic!("the parallel reader rejected a stream the one-thread decoder accepts: {e}")
        }
    }
});
