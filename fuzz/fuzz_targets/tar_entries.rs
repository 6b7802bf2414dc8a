//! Any bytes as the uncompressed data.tar of an otherwise valid package: the tar reader,
//! entry validation, path resolution against the trapped root, and the transaction, without
//! spending the fuzzer's effort on getting past the container and a decompressor.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| unpack_fuzz::unpack_in_sandbox(
    &unpack_fuzz::deb_with_data(data)
));
