//! Any bytes as a control file and as a control.tar: the deb822 parser and the search for
//! `./control` in the tar. Neither may panic, and a control they accept names its package and
//! version, which is all the report relies on.
#![no_main]

use std::path::Path;
use unpack::read::control::Control;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Control::parse(&String::from_utf8_lossy(data)) {
        assert!(!c.name.is_empty() && !c.version.is_empty(), "{c:?}");
    }
    if let Ok(c) = Control::from_tar(Path::new("fuzz.deb"), "control.tar", data) {
        assert!(!c.name.is_empty() && !c.version.is_empty(), "{c:?}");
    }
});
