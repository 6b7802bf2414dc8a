//! Any bytes as a package file: the ar container, the member names and sizes, the
//! decompressors, then everything after them, through a full unpack in the sandbox.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| unpack_fuzz::unpack_in_sandbox(data));
