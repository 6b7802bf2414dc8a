//! `rust-version` in Cargo.toml is a promise to whoever builds or tests the workspace: that Rust
//! builds it as Cargo.lock pins it. A locked package that declares a newer Rust breaks the
//! promise, and dev-dependencies count (`cargo test --locked` builds them): proptest 1.12 asks
//! for 1.88 where the README named 1.85. `cargo metadata --locked` lists what is locked for
//! this machine's platform; every package of it must ask for no newer Rust than the packages of
//! the workspace declare.

use serde_json::Value;
use std::process::Command;

mod common;

/// A `rust-version` as numbers: `1.85` is `[1, 85, 0]`; `None` for what is not one.
fn version(text: &str) -> Option<[u64; 3]> {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    parts.next().is_none().then_some([major, minor, patch])
}

/// The workspace packages' `rust-version` (the same for all of them) in `metadata` (`cargo
/// metadata`'s JSON), and the packages of its resolve that declare a newer Rust, as
/// `name version (rust-version)`.
fn too_new(metadata: &Value) -> (String, Vec<String>) {
    let field = |p: &Value, key: &str| p[key].as_str().unwrap_or_default().to_string();
    let packages = metadata["packages"].as_array().expect("cargo metadata lists packages");
    let members: Vec<&Value> = metadata["workspace_members"].as_array().unwrap().iter().collect();
    let promises: Vec<String> = packages
        .iter()
        .filter(|p| members.contains(&&p["id"]))
        .map(|p| field(p, "rust_version"))
        .collect();
    assert!(!promises.is_empty(), "no workspace member in cargo metadata");
    assert!(
        promises.windows(2).all(|w| w[0] == w[1]),
        "the workspace's packages declare different rust-versions: {promises:?}"
    );
    let promised = version(&promises[0]).expect("the workspace declares a rust-version");
    let resolved: Vec<&Value> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("cargo metadata resolves")
        .iter()
        .map(|n| &n["id"])
        .collect();
    let newer = packages
        .iter()
        .filter(|p| resolved.contains(&&p["id"]))
        .filter(|p| p["rust_version"].as_str().and_then(version).is_some_and(|v| v > promised))
        .map(|p| {
            format!("{} {} ({})", field(p, "name"), field(p, "version"), field(p, "rust_version"))
        })
        .collect();
    (promises[0].clone(), newer)
}

/// This machine's target triple, the platform whose dependencies a build here compiles.
fn host() -> String {
    let r = common::run(Command::new("rustc").arg("-vV"));
    assert_eq!(r.code, 0, "rustc -vV: {}", r.stderr);
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .into()
}

#[test]
fn no_locked_package_needs_a_newer_rust_than_the_workspace_declares() {
    let manifest = common::repo().join("Cargo.toml");
    let r = common::run(
        Command::new(env!("CARGO"))
            .args(["metadata", "--locked", "--format-version", "1", "--filter-platform"])
            .arg(host())
            .arg("--manifest-path")
            .arg(&manifest),
    );
    assert_eq!(r.code, 0, "cargo metadata --locked: {}", r.stderr);
    let (promised, newer) = too_new(&r.json());
    assert_eq!(
        newer,
        Vec::<String>::new(),
        "Cargo.lock holds packages that need a newer Rust than rust-version = {promised} \
         (pin an older version with `cargo update -p NAME --precise VERSION`, or raise \
         rust-version in Cargo.toml, lab/Cargo.toml and the README)"
    );
}

#[test]
fn the_check_names_a_locked_dev_dependency_that_needs_a_newer_rust() {
    // What cargo metadata said before proptest was pinned to 1.11: the check must see it.
    let metadata = serde_json::json!({
        "workspace_members": ["engine"],
        "packages": [
            {"id": "engine", "name": "unpack-engine", "version": "0.1.0", "rust_version": "1.85"},
            {"id": "p", "name": "proptest", "version": "1.12.0", "rust_version": "1.88"},
            {"id": "t", "name": "tempfile", "version": "3.23.0", "rust_version": "1.63.0"},
            {"id": "w", "name": "wasip2", "version": "1.0.4", "rust_version": "1.87.0"},
            {"id": "x", "name": "old", "version": "1.0.0", "rust_version": null},
        ],
        "resolve": {"nodes": [{"id": "engine"}, {"id": "p"}, {"id": "t"}, {"id": "x"}]},
    });
    let (promised, newer) = too_new(&metadata);
    assert_eq!(promised, "1.85");
    assert_eq!(newer, ["proptest 1.12.0 (1.88)"], "wasip2 is not in this platform's resolve");
    assert_eq!(version("1.85"), Some([1, 85, 0]));
    assert_eq!(version("1.85.1"), Some([1, 85, 1]));
    assert_eq!(version("1.x"), None);
}
