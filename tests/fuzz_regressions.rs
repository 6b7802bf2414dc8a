//! Every input a fuzz target ever crashed on, fed again to the same code through the real
//! `unpack`: `tests/fuzz-regressions/TARGET/NAME` holds the bytes as the target got them
//! (minimized), so that `cp fuzz/artifacts/TARGET/crash-* tests/fuzz-regressions/TARGET/` is
//! all it takes to keep a fixed crash fixed. What a hostile package may do is what the fuzz
//! targets check: fail as a bad package (3) or a conflict (1) with the root unchanged, or
//! succeed; never panic, never blame the root (4).

mod common;

use common::deb_builder::deb;
use common::*;
use std::path::Path;

/// The package file the target `target` makes of `input`.
fn package(target: &str, input: Vec<u8>) -> Vec<u8> {
    match target {
        "deb_container" => input,
        "tar_entries" => deb("data.tar", &input),
        other => panic!("no regression inputs expected for target {other}"),
    }
}

#[test]
fn inputs_that_crashed_a_fuzz_target_are_refused_cleanly_or_unpacked() {
    let fs = scratch("ext4", "defaults");
    let dir = common::repo().join("tests/fuzz-regressions");
    let mut seen = 0;
    for target in std::fs::read_dir(&dir).unwrap() {
        let target = target.unwrap();
        let target_name = target.file_name().into_string().unwrap();
        for input in std::fs::read_dir(target.path()).unwrap() {
            let input = input.unwrap();
            let name = format!("{target_name}-{}", input.file_name().into_string().unwrap());
            let deb_path = fs.dir.path().join(format!("{name}.deb"));
            std::fs::write(&deb_path, package(&target_name, std::fs::read(input.path()).unwrap()))
                .unwrap();
            let root = fs.subdir(&name);
            let r = unpack(["-s", "none", deb_path.to_str().unwrap(), root.to_str().unwrap()]);
            assert!([0, 1, 3].contains(&r.code), "{name}: exit {}: {}", r.code, r.stderr);
            if r.code != 0 {
                assert!(
                    snapshot(&root).is_empty(),
                    "{name}: a failed unpack left {:?}",
                    snapshot(&root)
                );
            }
            seen += 1;
        }
    }
    assert!(seen > 0, "no inputs in {}", dir.display());
}

/// A failed unpack leaves the engine's own state directory's times as they were too: the fuzz
/// harness found its mtime moved, since the intent file comes and goes.
#[test]
fn a_failed_unpack_leaves_the_state_directory_times_as_they_were() {
    let fs = scratch("ext4", "defaults");
    let root = fs.subdir("root");
    let empty = fs.dir.path().join("empty.deb");
    std::fs::write(&empty, b"").unwrap();
    let run = || unpack(["-s", "none", empty.to_str().unwrap(), root.to_str().unwrap()]);
    // The first run makes var/lib/unpack and its lock; the second finds them there.
    assert_eq!(run().code, 3);
    let state = root.join("var/lib/unpack");
    let times = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.modified().unwrap(), m.accessed().unwrap())
    };
    let before = times(&state);
    let r = run();
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(times(&state), before, "{}", r.stderr);
}
