//! Dependencies and conflicts at unpack (issue 27, item 2), held to dpkg: `dpkg --unpack`
//! with the same options as the engine's call (`unpack::unpack_each`, the front end's), into
//! two roots with a shell, the same scenario in each; the exit, the maintainer scripts' calls,
//! the tree and the database must agree. dpkg's messages are held where the engine's say the
//! same thing.
//!
//! `DPKG_ORACLE_SELF_CHECK=1 cargo test --test depcon` runs dpkg on both sides.

mod common;

use common::dpkg::*;
use common::scripts::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use unpack::events::Event;

/// What a call may add to dpkg's defaults, each the same option on both sides.
#[derive(Clone, Copy, PartialEq)]
enum Flag {
    AutoDeconfigure,
    ForceDepends,
    ForceConflicts,
    ForceBreaks,
}

impl Flag {
    fn dpkg(self) -> &'static str {
        match self {
            Flag::AutoDeconfigure => "--auto-deconfigure",
            Flag::ForceDepends => "--force-depends",
            Flag::ForceConflicts => "--force-conflicts",
            Flag::ForceBreaks => "--force-breaks",
        }
    }
}

/// Two roots with a shell, `theirs` by dpkg, `ours` by the engine.
struct Pair {
    ours: DbRoot,
    theirs: DbRoot,
    debs: tempfile::TempDir,
}

impl Pair {
    fn new() -> Pair {
        let debs = tempfile::Builder::new().prefix("unpack-depcon-debs").tempdir().unwrap();
        Pair { ours: DbRoot::with_shell(), theirs: DbRoot::with_shell(), debs }
    }

    fn build(&self, pkg: Pkg) -> PathBuf {
        pkg.build(self.debs.path())
    }

    /// A package `name` `version` with the four logging scripts and a file of its own, and
    /// the control fields `fields`.
    fn logged(&self, name: &str, version: &str, fields: &[(&str, &str)]) -> PathBuf {
        let mut pkg = Pkg::new(name, version, "all").file(
            &format!("/usr/share/{name}/file"),
            format!("{name} {version}\n").as_bytes(),
            0o644,
        );
        for (field, value) in fields {
            pkg = pkg.field(field, value);
        }
        self.build(logging(pkg, name, version))
    }

    /// `dpkg -i` of `debs` in both (dependencies forced: the scenario's starting point).
    fn install(&self, debs: &[&Path]) {
        for root in [self.theirs.path(), self.ours.path()] {
            Via::Dpkg.install(root, debs, &[]);
        }
    }

    /// The unpack of `deb` with `flags` in both: each must exit `code` (dpkg's), say
    /// `message` when given, and the roots then agree. Returns the engine's standard error.
    fn unpack(&self, deb: &Path, flags: &[Flag], code: i32, message: Option<&str>) -> String {
        let mut args: Vec<&str> = vec!["--no-triggers"];
        args.extend(flags.iter().map(|f| f.dpkg()));
        args.extend(["--unpack", deb.to_str().unwrap()]);
        let theirs = dpkg(self.theirs.path(), &args);
        assert_eq!(theirs.code, code, "dpkg {args:?}:\n{}{}", theirs.stdout, theirs.stderr);
        let (ours_code, ours_said) = if ours_via() == Via::Dpkg {
            let r = dpkg(self.ours.path(), &args);
            (r.code, r.stderr)
        } else {
            engine(self.ours.path(), deb, flags)
        };
        assert_eq!(
            ours_code,
            code,
            "unpack_each {deb:?} {}:\n{ours_said}",
            self.ours.path().display()
        );
        if let Some(m) = message {
            assert!(theirs.stderr.contains(m), "dpkg said:\n{}", theirs.stderr);
            assert!(ours_said.contains(m), "the engine said:\n{ours_said}");
        }
        self.check("after the unpack");
        ours_said
    }

    /// The roots must agree, but for the `not-installed` stanza dpkg leaves of a package it
    /// refused to unpack (the engine leaves the database as it was: docs/database.md).
    fn check(&self, stage: &str) {
        assert_eq!(
            calls(self.ours.path()),
            calls(self.theirs.path()),
            "{stage}: the scripts' calls"
        );
        let ours = DbSnapshot::take(self.ours.path());
        let mut theirs = DbSnapshot::take(self.theirs.path());
        let refused = |fields: &Vec<(String, String)>| {
            fields.iter().any(|(n, v)| n == "Status" && v == "install ok not-installed")
        };
        theirs.status.retain(|key, fields| ours.status.contains_key(key) || !refused(fields));
        let kept = theirs.status.clone();
        theirs.status_order.retain(|key| kept.contains_key(key));
        assert_same_db(&ours, &theirs, stage);
    }
}

/// The engine's call for a front end with `flags`: its exit code and what it said.
fn engine(root: &Path, deb: &Path, flags: &[Flag]) -> (i32, String) {
    let mut options = unpack::Options::new(unpack::durability::by_name("fsync", 1).unwrap());
    options.auto_deconfigure = flags.contains(&Flag::AutoDeconfigure);
    options.force.depends = flags.contains(&Flag::ForceDepends);
    options.force.conflicts = flags.contains(&Flag::ForceConflicts);
    options.force.breaks = flags.contains(&Flag::ForceBreaks);
    let notices: Arc<Mutex<String>> = Arc::default();
    let said = notices.clone();
    options.events = Some(Arc::new(move |e: &Event| {
        if let Event::Notice { message } = e {
            said.lock().unwrap().push_str(&format!("{message}\n"));
        }
    }));
    let mut outcome = (0, String::new());
    unpack::unpack_each(&[deb.to_path_buf()], root, &options, &mut |_, result| {
        if let Err(e) = result {
            outcome = (e.exit_code() as i32, e.to_string());
        }
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    outcome.1.insert_str(0, &notices.lock().unwrap());
    outcome
}

/// A rename, as trixie's 64-bit time_t libraries rename bookworm's: the new package Conflicts
/// with, Replaces and Provides the old one, and ships one of its files. dpkg removes the old
/// one in favour of it: `prerm remove in-favour`, its files but the conffile and what the new
/// one took, its info files but list and postrm, `postrm remove`, left `config-files`; the
/// package that depends on it is satisfied by the Provides.
#[test]
fn a_conflicting_package_the_new_one_replaces_is_removed_as_dpkg_removes_it() {
    let pair = Pair::new();
    let old = pair.build(
        logging(Pkg::new("dc-old", "1.0", "all"), "dc-old", "1.0")
            .file("/usr/lib/dc/libdc.so.1", b"old\n", 0o644)
            .file("/usr/share/dc-old/doc", b"doc\n", 0o644)
            .conffile("/etc/dc-old.conf", b"conf\n"),
    );
    let user = pair.logged("dc-user", "1.0", &[("Depends", "dc-old")]);
    let new = pair.build(
        logging(Pkg::new("dc-new", "1.0", "all"), "dc-new", "1.0")
            .field("Conflicts", "dc-old")
            .field("Replaces", "dc-old")
            .field("Provides", "dc-old")
            .file("/usr/lib/dc/libdc.so.1", b"new\n", 0o644),
    );
    pair.install(&[&old, &user]);
    pair.unpack(&new, &[Flag::AutoDeconfigure], 0, None);
    let ours = pair.ours.path();
    assert_eq!(std::fs::read(ours.join("usr/lib/dc/libdc.so.1")).unwrap(), b"new\n");
    assert!(!ours.join("usr/share/dc-old").exists());
    assert!(ours.join("etc/dc-old.conf").exists());
    let seq = sequence(ours);
    assert!(
        seq.contains(&"dc-old_1.0 prerm [remove] [in-favour] [dc-new] [1.0]".to_string()),
        "{seq:?}"
    );
    assert!(seq.contains(&"dc-old_1.0 postrm [remove]".to_string()), "{seq:?}");
}

/// The rename when a package depends on the old name and nothing provides it: dpkg refuses
/// without `--auto-deconfigure`, and with it deconfigures the dependent package first
/// (`prerm deconfigure in-favour NEW VER removing OLD VER`).
#[test]
fn a_removal_that_breaks_a_dependency_deconfigures_it_or_is_refused() {
    let pair = Pair::new();
    let old = pair.logged("dd-old", "1.0", &[]);
    let user = pair.logged("dd-user", "1.0", &[("Depends", "dd-old")]);
    let new = pair.logged("dd-new", "1.0", &[("Conflicts", "dd-old"), ("Replaces", "dd-old")]);
    pair.install(&[&old, &user]);
    pair.unpack(&new, &[], 1, Some("conflicting packages - not installing dd-new"));
    pair.unpack(&new, &[Flag::AutoDeconfigure], 0, None);
    let seq = sequence(pair.ours.path());
    assert!(
        seq.contains(
            &"dd-user_1.0 prerm [deconfigure] [in-favour] [dd-new] [1.0] [removing] [dd-old] [1.0]"
                .to_string()
        ),
        "{seq:?}"
    );
}

/// A conflict the new package does not replace is refused, as dpkg refuses it, and
/// `--force-conflicts` lets it through; what conflicts with the new package counts too.
#[test]
fn an_unresolved_conflict_is_refused_unless_forced() {
    let pair = Pair::new();
    let other = pair.logged("dx-other", "1.0", &[]);
    let against = pair.logged("dx-against", "1.0", &[("Conflicts", "dx-late (<< 2)")]);
    let new = pair.logged("dx-new", "1.0", &[("Conflicts", "dx-other")]);
    let late = pair.logged("dx-late", "1.0", &[]);
    pair.install(&[&other, &against]);
    pair.unpack(&new, &[], 1, Some("conflicting packages - not installing dx-new"));
    pair.unpack(&late, &[], 1, Some("conflicting packages - not installing dx-late"));
    pair.unpack(&new, &[Flag::ForceConflicts], 0, Some("ignoring conflict, may proceed anyway!"));
}

/// Breaks: refused without `--auto-deconfigure`, the broken package deconfigured with it,
/// a warning with `--force-breaks`; an unpacked (unconfigured) package is not broken.
#[test]
fn breaks_deconfigures_what_it_breaks_or_is_refused() {
    let pair = Pair::new();
    let broken = pair.logged("db-broken", "1.0", &[]);
    let new = pair.logged("db-new", "1.0", &[("Breaks", "db-broken (<< 2)")]);
    pair.install(&[&broken]);
    pair.unpack(&new, &[], 1, Some("installing db-new would break db-broken"));
    pair.unpack(&new, &[Flag::ForceBreaks], 0, Some("ignoring breakage"));
    let pair = Pair::new();
    let broken = pair.logged("db-broken", "1.0", &[]);
    let new = pair.logged("db-new", "1.0", &[("Breaks", "db-broken (<< 2)")]);
    pair.install(&[&broken]);
    pair.unpack(&new, &[Flag::AutoDeconfigure], 0, None);
    let seq = sequence(pair.ours.path());
    assert!(
        seq.contains(&"db-broken_1.0 prerm [deconfigure] [in-favour] [db-new] [1.0]".to_string()),
        "{seq:?}"
    );
}

/// Pre-Depends: a missing one is refused, `--force-depends` lets it through; one satisfied
/// by an installed package, or by a virtual package an installed one provides, is fine.
#[test]
fn pre_depends_must_be_configured_unless_forced() {
    let pair = Pair::new();
    let base = pair.logged("dp-base", "2.0", &[("Provides", "dp-virtual (= 3)")]);
    let needs =
        pair.logged("dp-needs", "1.0", &[("Pre-Depends", "dp-base (>= 2), dp-virtual (>= 3)")]);
    let missing =
        pair.logged("dp-missing", "1.0", &[("Pre-Depends", "dp-nowhere | dp-base (>= 5)")]);
    pair.install(&[&base]);
    pair.unpack(&needs, &[], 0, None);
    pair.unpack(&missing, &[], 1, Some("pre-dependency problem - not installing dp-missing"));
    pair.unpack(&missing, &[Flag::ForceDepends], 0, Some("ignoring pre-dependency problem!"));
}

/// Architecture qualifiers (lib/dpkg/depcon.c archsatisfied): `:any` is satisfied only by a
/// `Multi-Arch: allowed` package; `:native` is, in a binary package's relations, the name of
/// an architecture no package has (only build dependencies read it as the build machine's), so
/// nothing satisfies it; a Conflicts qualified with another architecture does not meet the
/// installed package, one qualified with its own does.
#[test]
fn architecture_qualifiers_are_satisfied_as_dpkg_satisfies_them() {
    let pair = Pair::new();
    let allowed = pair.logged("dq-allowed", "1.0", &[("Multi-Arch", "allowed")]);
    let plain = pair.logged("dq-plain", "1.0", &[]);
    let via_any = pair.logged("dq-via-any", "1.0", &[("Pre-Depends", "dq-allowed:any")]);
    let plain_any = pair.logged("dq-plain-any", "1.0", &[("Pre-Depends", "dq-plain:any")]);
    let native = pair.logged("dq-native", "1.0", &[("Pre-Depends", "dq-plain:native")]);
    let foreign = pair.logged("dq-foreign", "1.0", &[("Conflicts", "dq-plain:i386")]);
    let amd64 = pair.build(logging(
        Pkg::new("dq-amd64", "1.0", "amd64").file("/usr/share/dq-amd64/file", b"64\n", 0o644),
        "dq-amd64",
        "1.0",
    ));
    let native_64 = pair.logged("dq-native-64", "1.0", &[("Pre-Depends", "dq-amd64:native")]);
    let conflicts_64 = pair.logged("dq-conflicts-64", "1.0", &[("Conflicts", "dq-amd64:amd64")]);
    pair.install(&[&allowed, &plain, &amd64]);
    pair.unpack(&via_any, &[], 0, None);
    pair.unpack(&plain_any, &[], 1, Some("pre-dependency problem - not installing dq-plain-any"));
    pair.unpack(&native, &[], 1, Some("pre-dependency problem - not installing dq-native"));
    pair.unpack(&foreign, &[], 0, None);
    pair.unpack(&native_64, &[], 1, Some("pre-dependency problem - not installing dq-native-64"));
    pair.unpack(&conflicts_64, &[], 1, Some("conflicting packages - not installing"));
}

/// A conflictor that is only unpacked (never configured): no prerm, its files removed, its
/// postrm remove run; one with neither conffiles nor a postrm is forgotten altogether.
#[test]
fn an_unconfigured_conflictor_and_one_with_nothing_left_are_removed_as_dpkg_removes_them() {
    let pair = Pair::new();
    let unpacked = pair.logged("du-unpacked", "1.0", &[]);
    let bare =
        pair.build(Pkg::new("du-bare", "1.0", "all").file("/usr/share/du-bare/f", b"f\n", 0o644));
    let new = pair.logged(
        "du-new",
        "1.0",
        &[("Conflicts", "du-unpacked, du-bare"), ("Replaces", "du-unpacked, du-bare")],
    );
    for root in [pair.theirs.path(), pair.ours.path()] {
        Via::Dpkg.unpack(root, &[&unpacked]);
        Via::Dpkg.install(root, &[&bare], &[]);
    }
    pair.unpack(&new, &[], 0, None);
    let status = std::fs::read_to_string(pair.ours.admindir().join("status")).unwrap();
    assert!(!status.contains("Package: du-bare"), "{status}");
}
