//! Any bytes as the recovery journal `var/lib/unpack/txn` of a trapped root, with an intent
//! beside it, recovered: the journal decoder, the confinement of its names and directories,
//! roll forward and roll back. The oracle is the `host` tree beside the root, which must not
//! change, whatever the journal names (see `recover_in_sandbox`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| unpack_fuzz::recover_in_sandbox(data));
