//! `unpack::unpack_each`, the engine's call for a dpkg front end: the packages of one call one
//! after another, each a transaction of its own that sees the ones before it, a failing one
//! failing alone, and the events of each as dpkg notes them (status-fd's lines for apt).

mod common;

use common::dpkg::{dpkg, DbRoot, Pkg};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use unpack::events::Event;

/// The events of a call as dpkg writes them on status-fd (`processing: ACTION: PKG`, `status:
/// PKG: STATE`), names without architecture (the fixtures are `all`).
fn status_fd(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Unpacking { package, old, .. } => {
                let action = if old.is_some() { "upgrade" } else { "install" };
                format!("processing: {action}: {}", package.name)
            }
            Event::Status { package, state, .. } => format!("status: {}: {state}", package.name),
            Event::Disappeared { package, .. } => {
                format!("processing: disappear: {}", package.name)
            }
            Event::Failed { .. } => "error".to_string(),
            _ => "?".to_string(),
        })
        .collect()
}

/// `a` unpacked, then `b`, which ships `a`'s file without Replaces: `b` fails alone (exit 1's
/// conflict), `a` stays unpacked, and the third package still unpacks; the events are dpkg's
/// lines: `b`'s error before its unwinding, which leaves it `not-installed`.
#[test]
fn each_package_is_a_transaction_of_its_own_and_a_failing_one_fails_alone() {
    let debs = tempfile::tempdir().unwrap();
    let a = Pkg::new("each-a", "1.0", "all")
        .file("/usr/share/each/a", b"a\n", 0o644)
        .build(debs.path());
    let b = Pkg::new("each-b", "1.0", "all")
        .file("/usr/share/each/a", b"b\n", 0o644)
        .build(debs.path());
    let c = Pkg::new("each-c", "1.0", "all")
        .file("/usr/share/each/c", b"c\n", 0o644)
        .build(debs.path());
    let root = DbRoot::new();
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut options = unpack::Options::new(unpack::durability::by_name("none", 1).unwrap());
    let seen = events.clone();
    options.events = Some(Arc::new(move |e: &Event| seen.lock().unwrap().push(e.clone())));
    let mut outcomes: Vec<(PathBuf, i32)> = Vec::new();
    unpack::unpack_each(&[a.clone(), b.clone(), c.clone()], root.path(), &options, &mut |p, r| {
        outcomes.push((p.to_path_buf(), r.map_or_else(|e| e.exit_code() as i32, |_| 0)));
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(outcomes, [(a, 0), (b, 1), (c, 0)]);
    let query = dpkg(root.path(), &["-l", "each-a", "each-c"]);
    assert_eq!(query.code, 0, "{}", query.stderr);
    assert!(
        query.stdout.contains("iU  each-a") && query.stdout.contains("iU  each-c"),
        "{}",
        query.stdout
    );
    assert_eq!(std::fs::read_to_string(root.path().join("usr/share/each/a")).unwrap(), "a\n");
    let lines = status_fd(&events.lock().unwrap());
    assert_eq!(
        lines,
        [
            "processing: install: each-a",
            "status: each-a: half-installed",
            "status: each-a: unpacked",
            "processing: install: each-b",
            "status: each-b: half-installed",
            "error",
            "status: each-b: not-installed",
            "processing: install: each-c",
            "status: each-c: half-installed",
            "status: each-c: unpacked",
        ]
    );
}
