//! `unpack --bootstrap` (issue 18, a base system in one call): a first stage of files with no
//! script (the merged-/usr layout, an empty database, the Essential packages and their
//! closure), then every package in database mode with its maintainer scripts; then the real
//! `dpkg --configure -a` finishes the system.
//!
//! The small cases build their packages here, with the host's statically linked busybox as the
//! Essential package's `/bin/sh` (busybox-static); the minbase cases download a Debian minbase
//! with fixtures/fetch-minbase.sh (about 90 packages, 32 MB: they need the network).

mod common;

use common::dpkg::*;
use common::{run, snapshot, unpack, Run};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Three packages: `shell` (Essential, ships `/bin/sh`, the host's static busybox, and
/// depends on `libfake`), `libfake` (not Essential), and `tool`, whose preinst writes its
/// arguments to `/tool.preinst` and fails while the root has `/fail-tool`.
struct Set {
    _dir: tempfile::TempDir,
    debs: Vec<PathBuf>,
}

impl Set {
    fn new() -> Set {
        let dir = tempfile::Builder::new().prefix("unpack-bootstrap-debs").tempdir().unwrap();
        let busybox =
            std::fs::read("/bin/busybox").expect("/bin/busybox (apt-get install busybox-static)");
        let preinst = "#!/bin/sh\necho \"$@\" > /tool.preinst\nif [ -e /fail-tool ]; then exit 1; fi\nexit 0\n";
        let debs = vec![
            Pkg::new("shell", "1.0", "amd64")
                .field("Essential", "yes")
                .field("Depends", "libfake (>= 1), missing | libfake")
                .file("/bin/sh", &busybox, 0o755)
                .build(dir.path()),
            Pkg::new("libfake", "1.0", "amd64")
                .file("/lib/x86_64-linux-gnu/libfake.so.1", b"not really\n", 0o644)
                .build(dir.path()),
            Pkg::new("tool", "1.0", "amd64")
                .file("/usr/bin/tool", b"#!/bin/sh\n", 0o755)
                .script("preinst", preinst)
                .build(dir.path()),
        ];
        Set { _dir: dir, debs }
    }

    /// `unpack --bootstrap --json -s fsync DEBS... ROOT`.
    fn bootstrap(&self, root: &Path) -> Run {
        let mut args: Vec<&std::ffi::OsStr> =
            ["--bootstrap", "--json", "-s", "fsync"].iter().map(|a| a.as_ref()).collect();
        args.extend(self.debs.iter().map(|d| d.as_os_str()));
        args.push(root.as_os_str());
        unpack(args)
    }
}

fn status_of(root: &Path, package: &str) -> String {
    let q = run(Command::new("dpkg-query")
        .arg(format!("--admindir={}", root.join("var/lib/dpkg").display()))
        .args(["-W", "-f", "${Status}", package]));
    q.stdout
}

#[test]
fn a_bootstrap_lays_out_a_merged_usr_root_extracts_the_essential_closure_then_runs_the_scripts() {
    let set = Set::new();
    let root = tempfile::Builder::new().prefix("unpack-bootstrap").tempdir().unwrap();
    let r = root.path();
    let out = set.bootstrap(r);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.json();
    assert_eq!(
        report["first_stage"]["packages"],
        serde_json::json!(["shell", "libfake"]),
        "the Essential package and its closure, not tool"
    );
    assert_eq!(
        report["packages"].as_array().unwrap().len(),
        3,
        "the second stage unpacks every package"
    );
    for dir in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        assert_eq!(
            std::fs::read_link(r.join(dir)).unwrap(),
            Path::new("usr").join(dir),
            "debootstrap's merged /usr for amd64"
        );
        assert!(r.join("usr").join(dir).is_dir());
    }
    assert!(
        r.join("usr/bin/sh").is_file() && r.join("usr/lib/x86_64-linux-gnu/libfake.so.1").is_file()
    );
    assert_eq!(
        std::fs::read_to_string(r.join("tool.preinst")).unwrap(),
        "install\n",
        "tool's preinst ran, with the first stage's /bin/sh"
    );
    for package in ["shell", "libfake", "tool"] {
        assert_eq!(status_of(r, package), "install ok unpacked", "{package}");
    }
    dpkg_configure(r, &[]);
    for package in ["shell", "libfake", "tool"] {
        assert_eq!(status_of(r, package), "install ok installed", "{package}");
    }
    let audit = dpkg(r, &["--audit"]);
    assert_eq!((audit.code, audit.stdout.as_str()), (0, ""), "{}", audit.stderr);

    let before = snapshot(r);
    let again = set.bootstrap(r);
    assert_eq!(
        again.code, 2,
        "a root with installed packages is not bootstrapped: {}",
        again.stderr
    );
    assert!(again.stderr.contains("lists 3 installed packages"), "{}", again.stderr);
    assert_eq!(snapshot(r), before, "refused: the root is as it was");
}

#[test]
fn a_failed_second_stage_leaves_a_root_the_bootstrap_takes_again() {
    let set = Set::new();
    let root = tempfile::Builder::new().prefix("unpack-bootstrap").tempdir().unwrap();
    let r = root.path();
    std::fs::write(r.join("fail-tool"), "").unwrap();
    let failed = set.bootstrap(r);
    assert_eq!(failed.code, 1, "tool's preinst fails: {}", failed.stderr);
    assert!(failed.stderr.contains("preinst"), "{}", failed.stderr);
    assert!(
        r.join("usr/bin/sh").is_file(),
        "the first stage was committed: {}\n{:?}",
        failed.stderr,
        snapshot(r).keys().collect::<Vec<_>>()
    );
    assert!(!r.join("usr/bin/tool").exists(), "the second stage was not");
    assert_eq!(status_of(r, "shell"), "", "nothing recorded for the first stage's packages");
    assert_ne!(
        status_of(r, "tool"),
        "install ok unpacked",
        "dpkg's state after a failed preinst install"
    );

    std::fs::remove_file(r.join("fail-tool")).unwrap();
    let retried = set.bootstrap(r);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    for package in ["shell", "libfake", "tool"] {
        assert_eq!(status_of(r, package), "install ok unpacked", "{package}");
    }
    dpkg_configure(r, &[]);
}

#[test]
fn a_root_with_a_real_bin_directory_is_refused_unchanged() {
    let set = Set::new();
    let root = tempfile::Builder::new().prefix("unpack-bootstrap").tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir(r.join("bin")).unwrap();
    std::fs::write(r.join("bin/keep"), "mine\n").unwrap();
    let before = snapshot(r);
    let out = set.bootstrap(r);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is not a symlink to usr/bin"), "{}", out.stderr);
    assert_eq!(snapshot(r), before);
}

/// A bootstrap whose second stage can adopt what the first wrote, and one whose scripts change
/// it first. `shell` is the host's static busybox as `/bin/sh`, with the applets the script
/// calls as symlinks to it. `editor` (not Essential, first in the call) has a preinst that edits a file of the
/// Essential `base` and diverts another (renaming it, as `dpkg-divert --rename` would), and
/// logs what dpkg's `tmp.ci` shows it: `$0`, the package of `tmp.ci/control` and the
/// `templates` member beside it (debconf reads both from there).
fn adoption_set(dir: &Path, with_editor: bool) -> Vec<PathBuf> {
    let busybox =
        std::fs::read("/bin/busybox").expect("/bin/busybox (apt-get install busybox-static)");
    let editor = "#!/bin/sh\nset -e\n\
        { echo \"$0 $*\"; grep ^Package: /var/lib/dpkg/tmp.ci/control; cat \"${0%/*}/templates\"; } > /editor.log\n\
        echo changed > /usr/share/base/data\n\
        mv /usr/share/base/kept /usr/share/base/kept.real\n\
        printf '/usr/share/base/kept\\n/usr/share/base/kept.real\\neditor\\n' >> /var/lib/dpkg/diversions\n";
    let mut debs = Vec::new();
    if with_editor {
        debs.push(
            Pkg::new("editor", "1.0", "amd64")
                .file("/usr/bin/editor", b"#!/bin/sh\n", 0o755)
                .script("preinst", editor)
                .member("templates", b"Template: editor/q\n")
                .build(dir),
        );
    }
    debs.extend([
        Pkg::new("shell", "1.0", "amd64")
            .field("Essential", "yes")
            .field("Depends", "libfake")
            .file("/bin/sh", &busybox, 0o755)
            .symlink("/bin/cat", "sh")
            .symlink("/bin/grep", "sh")
            .symlink("/bin/mv", "sh")
            .build(dir),
        Pkg::new("libfake", "1.0", "amd64")
            .file("/lib/x86_64-linux-gnu/libfake.so.1", b"not really\n", 0o644)
            .build(dir),
        Pkg::new("base", "1.0", "all")
            .field("Essential", "yes")
            .file("/usr/share/base/data", b"original\n", 0o644)
            .file("/usr/share/base/kept", b"kept\n", 0o600)
            .symlink("/usr/share/base/link", "data")
            .conffile("/etc/base.conf", b"setting=1\n")
            .build(dir),
    ]);
    debs
}

/// `unpack --bootstrap -s fsync` of `debs` into `r`; the report.
fn bootstrap_json(debs: &[PathBuf], r: &Path) -> serde_json::Value {
    let mut args: Vec<&std::ffi::OsStr> =
        ["--bootstrap", "--json", "-s", "fsync"].iter().map(|a| a.as_ref()).collect();
    args.extend(debs.iter().map(|d| d.as_os_str()));
    args.push(r.as_os_str());
    let out = unpack(args);
    succeeds(&out, "unpack --bootstrap");
    out.json()
}

/// The merged-/usr layout's symlinks (amd64), through which packages' listed paths reach `usr/`.
const LAYOUT: [&str; 6] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// A root's tree and database as unpack's and dpkg's can be compared. The mtime is kept only of
/// the paths a package lists (`info/*.list`, through the layout's symlinks) and `remade` does not
/// name: what no package ships bears the moment its side made it (the layout's symlinks, and
/// what maintainer scripts make at run time: `/etc/passwd`, debconf's caches, `/etc/rc?.d/`
/// links...). ldconfig's `var/cache/ldconfig/aux-cache` is left out: it is keyed by inode
/// numbers and change times.
fn comparable(root: &Path, remade: &BTreeSet<PathBuf>) -> DbSnapshot {
    let mut snapshot = DbSnapshot::take(root);
    snapshot.tree.remove(Path::new("var/cache/ldconfig/aux-cache"));
    let listed = listed_paths(root);
    for (path, node) in snapshot.tree.iter_mut() {
        if !listed.contains(path) || remade.contains(path) {
            node.mtime = None;
        }
    }
    snapshot
}

/// Every path the root's packages list, relative, with `bin/x` as `usr/bin/x` where `bin` is
/// the layout's symlink.
fn listed_paths(root: &Path) -> BTreeSet<PathBuf> {
    let info = root.join("var/lib/dpkg/info");
    let mut listed = BTreeSet::new();
    for entry in std::fs::read_dir(&info).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "list") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let rel = Path::new(line.trim_start_matches('/'));
                let through_layout = rel
                    .components()
                    .next()
                    .is_some_and(|c| LAYOUT.iter().any(|l| c.as_os_str() == *l));
                listed.insert(if through_layout {
                    Path::new("usr").join(rel)
                } else {
                    rel.to_path_buf()
                });
            }
        }
    }
    listed
}

/// The listed paths whose mtime changed from `before` to `after` in one root: made again by a
/// maintainer script at configure (base-files' postinst remakes `/var/run`).
fn remade(before: &DbSnapshot, after: &DbSnapshot) -> BTreeSet<PathBuf> {
    after
        .tree
        .iter()
        .filter(|(p, n)| before.tree.get(*p).is_some_and(|b| b.mtime != n.mtime))
        .map(|(p, _)| p.clone())
        .collect()
}

/// The same packages bootstrapped by `unpack --bootstrap` and by debootstrap's way with the
/// real dpkg ([`dpkg_bootstrap`], the first stage being the one unpack reports): the same tree
/// and database field by field, unpacked and again after `dpkg --configure -a`. Returns the
/// packages unpack's second stage adopted.
fn same_as_dpkg(debs: &[PathBuf]) -> Vec<String> {
    let ours = tempfile::Builder::new().prefix("unpack-bootstrap-ours").tempdir().unwrap();
    let theirs = tempfile::Builder::new().prefix("unpack-bootstrap-dpkg").tempdir().unwrap();
    let report = bootstrap_json(debs, ours.path());
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
    };
    let first = names(&report["first_stage"]["packages"]);
    let first_debs: Vec<PathBuf> = debs
        .iter()
        .filter(|d| {
            first
                .iter()
                .any(|n| d.file_name().unwrap().to_str().unwrap().starts_with(&format!("{n}_")))
        })
        .cloned()
        .collect();
    assert_eq!(first_debs.len(), first.len());
    dpkg_bootstrap(theirs.path(), &first_debs, debs, false);
    let none = BTreeSet::new();
    assert_same_db(&comparable(ours.path(), &none), &comparable(theirs.path(), &none), "unpacked");
    dpkg_configure(ours.path(), &[]);
    dpkg_configure(theirs.path(), &[]);
    assert_same_db(
        &comparable(ours.path(), &none),
        &comparable(theirs.path(), &none),
        "configured",
    );
    let verify = dpkg(ours.path(), &["--verify"]);
    assert_eq!((verify.code, verify.stdout.as_str()), (0, ""), "dpkg --verify: {}", verify.stderr);
    names(&report["first_stage"]["adopted"])
}

#[test]
fn the_second_stage_adopts_the_first_stages_files_and_the_result_is_dpkgs() {
    let dir = tempfile::Builder::new().prefix("unpack-bootstrap-debs").tempdir().unwrap();
    let adopted = same_as_dpkg(&adoption_set(dir.path(), false));
    assert_eq!(
        adopted,
        ["shell", "libfake", "base"],
        "every first-stage package is taken as written, base's conffile written again as .dpkg-new"
    );
}

#[test]
fn a_first_stage_file_a_preinst_changed_or_diverted_is_written_again_as_dpkg_writes_it() {
    let dir = tempfile::Builder::new().prefix("unpack-bootstrap-debs").tempdir().unwrap();
    let debs = adoption_set(dir.path(), true);
    let adopted = same_as_dpkg(&debs);
    assert_eq!(adopted, ["shell", "libfake"], "base is read again from its archive: editor's preinst changed one of its files and diverted another");
    let root = tempfile::Builder::new().prefix("unpack-bootstrap").tempdir().unwrap();
    bootstrap_json(&debs, root.path());
    assert_eq!(
        std::fs::read_to_string(root.path().join("editor.log")).unwrap(),
        "/var/lib/dpkg/tmp.ci/preinst install\nPackage: editor\nTemplate: editor/q\n",
        "the preinst runs from tmp.ci, beside its package's control and templates (and the same as under dpkg, above)"
    );
    assert!(!root.path().join("var/lib/dpkg/tmp.ci").exists(), "tmp.ci is gone after the call");
}

#[test]
fn a_first_stage_package_without_md5sums_is_read_again_and_its_sums_computed() {
    let dir = tempfile::Builder::new().prefix("unpack-bootstrap-debs").tempdir().unwrap();
    let busybox =
        std::fs::read("/bin/busybox").expect("/bin/busybox (apt-get install busybox-static)");
    let debs = vec![
        Pkg::new("shell", "1.0", "amd64")
            .field("Essential", "yes")
            .file("/bin/sh", &busybox, 0o755)
            .build(dir.path()),
        Pkg::new("old", "1.0", "all")
            .field("Essential", "yes")
            .file("/usr/share/old/file", b"old style\n", 0o644)
            .without_md5sums()
            .build(dir.path()),
    ];
    let adopted = same_as_dpkg(&debs);
    assert_eq!(
        adopted,
        ["shell"],
        "old ships no md5sums: dpkg computes them from the archive's bytes, and so does unpack"
    );
}

/// A downloaded Debian minbase (fixtures/fetch-minbase.sh): the directory and the package count.
fn fetch_minbase() -> (tempfile::TempDir, usize) {
    let debs = tempfile::Builder::new().prefix("unpack-minbase").tempdir().unwrap();
    let fetch =
        run(Command::new(common::repo().join("fixtures/fetch-minbase.sh")).arg(debs.path()));
    succeeds(&fetch, "fixtures/fetch-minbase.sh");
    let count: usize = fetch
        .stdout
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("fetch-minbase.sh printed {:?}: {e}", fetch.stdout));
    (debs, count)
}

fn debs_in(dir: &Path) -> Vec<PathBuf> {
    let mut debs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    debs
}

/// `chroot ROOT dpkg --configure -a` exits 0, then [`a_working_system`].
fn configure_and_check(r: &Path, count: usize) {
    succeeds(&in_chroot(r, &["dpkg", "--configure", "-a"]), "chroot ROOT dpkg --configure -a");
    a_working_system(r, count);
}

/// Every one of the `count` packages is `ii`, `dpkg --audit` says nothing and `apt-get check`
/// passes.
fn a_working_system(r: &Path, count: usize) {
    let states = in_chroot(r, &["dpkg-query", "-W", "-f", "${db:Status-Abbrev}${Package}\n"]);
    succeeds(&states, "dpkg-query");
    let not_ii: Vec<&str> = states.stdout.lines().filter(|l| !l.starts_with("ii ")).collect();
    assert!(not_ii.is_empty(), "not ii: {not_ii:?}");
    assert_eq!(states.stdout.lines().count(), count);
    let audit = in_chroot(r, &["dpkg", "--audit"]);
    assert_eq!((audit.code, audit.stdout.as_str()), (0, ""), "dpkg --audit: {}", audit.stderr);
    succeeds(&in_chroot(r, &["apt-get", "check"]), "chroot ROOT apt-get check");
}

/// The minbase bootstrapped by `unpack --bootstrap -s syncfs` and by debootstrap's way with the
/// real dpkg ([`dpkg_bootstrap`] through `chroot ROOT dpkg`, the first stage being the one
/// unpack reports, which is fetch-minbase.sh's first-stage.list): the same tree (type, mode,
/// owner, size, content, link target, hard-link group, and the mtime of every file a package
/// lists), the same status stanzas field by field and the same other database files, unpacked
/// and again after `chroot ROOT dpkg --configure -a` in both ([`comparable`] says what is left
/// out and why); then the configured system works (every package `ii`, `dpkg --audit` silent,
/// `apt-get check`). It fails where new scripts run from the engine's `tmp.ci.unpack-new/N/` rather
/// than from `tmp.ci/`: debconf's `config.dat` then differs (libc6's and libpam-modules'
/// preinsts run debconf, which learns the package from `tmp.ci/control`). 30 to 80 s here,
/// with the download.
#[test]
fn a_debian_minbase_bootstrapped_by_unpack_is_the_same_as_by_dpkg() {
    let (debs, _) = fetch_minbase();
    let all = debs_in(debs.path());
    let ours = tempfile::Builder::new().prefix("unpack-minbase-ours").tempdir().unwrap();
    let theirs = tempfile::Builder::new().prefix("unpack-minbase-dpkg").tempdir().unwrap();
    let mut args: Vec<PathBuf> =
        vec!["--bootstrap".into(), "--json".into(), "-s".into(), "syncfs".into()];
    args.extend(all.iter().cloned());
    args.push(ours.path().to_path_buf());
    let out = unpack(&args);
    succeeds(&out, "unpack --bootstrap");
    let first: Vec<String> = out.json()["first_stage"]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    let listed = std::fs::read_to_string(debs.path().join("first-stage.list")).unwrap();
    let first_debs: Vec<PathBuf> = listed.lines().map(|name| debs.path().join(name)).collect();
    let mut listed_names: Vec<String> =
        listed.lines().map(|l| l.split('_').next().unwrap().to_string()).collect();
    let mut first_sorted = first.clone();
    listed_names.sort();
    first_sorted.sort();
    assert_eq!(first_sorted, listed_names, "unpack's first stage is fetch-minbase.sh's");
    assert!(
        first.iter().any(|p| p == "libc6") && !first.iter().any(|p| p == "apt"),
        "the Essential packages' closure has libc6, not apt: {first:?}"
    );
    assert_eq!(
        out.json()["packages"].as_array().unwrap().len(),
        all.len(),
        "the second stage unpacks every package"
    );
    dpkg_bootstrap(theirs.path(), &first_debs, &all, true);
    let none = BTreeSet::new();
    assert_same_db(
        &comparable(ours.path(), &none),
        &comparable(theirs.path(), &none),
        "the minbase, unpacked",
    );
    let unpacked = DbSnapshot::take(theirs.path());
    for root in [ours.path(), theirs.path()] {
        succeeds(
            &in_chroot(root, &["dpkg", "--configure", "-a"]),
            "chroot ROOT dpkg --configure -a",
        );
    }
    let remade = remade(&unpacked, &DbSnapshot::take(theirs.path()));
    assert_same_db(
        &comparable(ours.path(), &remade),
        &comparable(theirs.path(), &remade),
        "the minbase, configured",
    );
    a_working_system(ours.path(), all.len());
}

/// The dpkg side of the same bootstrap, the reference for the test above and the minbase
/// bench's dpkg peer ([`dpkg_bootstrap`] through `chroot ROOT dpkg`), then `chroot ROOT dpkg
/// --configure -a`.
#[test]
#[ignore = "the reference for the test above: cargo test --test bootstrap -- --ignored"]
fn minbase_by_dpkg_after_a_first_stage_is_a_working_system() {
    let (debs, count) = fetch_minbase();
    let root = tempfile::Builder::new().prefix("unpack-minbase-root").tempdir().unwrap();
    let first = std::fs::read_to_string(debs.path().join("first-stage.list")).unwrap();
    let first: Vec<PathBuf> = first.lines().map(|name| debs.path().join(name)).collect();
    dpkg_bootstrap(root.path(), &first, &debs_in(debs.path()), true);
    configure_and_check(root.path(), count);
}

/// debootstrap's way, with the real dpkg as its second stage: the layout `unpack --bootstrap`
/// makes (amd64's six merged-/usr symlinks), an empty database, the files of `first` extracted
/// by tar with no script and no record, then `dpkg --force-depends --refuse-unsafe-io --unpack`
/// of `all` in one call, in their order: as `chroot ROOT dpkg` (`chroot`: the root has its own
/// dpkg, as a minbase has) or as the host's `dpkg --root=ROOT`, which chroots for the scripts.
fn dpkg_bootstrap(r: &Path, first: &[PathBuf], all: &[PathBuf], chroot: bool) {
    for dir in LAYOUT {
        std::fs::create_dir_all(r.join("usr").join(dir)).unwrap();
        std::os::unix::fs::symlink(format!("usr/{dir}"), r.join(dir)).unwrap();
    }
    for sub in ["info", "updates"] {
        std::fs::create_dir_all(r.join("var/lib/dpkg").join(sub)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    for deb in first {
        let extract =
            "dpkg-deb --fsys-tarfile \"$1\" | tar -xf - --keep-directory-symlink -C \"$2\"";
        succeeds(
            &run(Command::new("sh").args(["-c", extract, "sh"]).arg(deb).arg(r)),
            &format!("first stage: {}", deb.display()),
        );
    }
    let mut names: Vec<String> = Vec::new();
    if chroot {
        let inside = r.join("var/cache/minbase");
        std::fs::create_dir_all(&inside).unwrap();
        for deb in all {
            let name = deb.file_name().unwrap().to_str().unwrap().to_string();
            std::fs::copy(deb, inside.join(&name)).unwrap();
            names.push(format!("/var/cache/minbase/{name}"));
        }
    } else {
        names.extend(all.iter().map(|d| d.to_str().unwrap().to_string()));
    }
    let mut args = vec!["--force-depends", "--refuse-unsafe-io", "--unpack"];
    args.extend(names.iter().map(String::as_str));
    if chroot {
        let mut cmd = vec!["dpkg"];
        cmd.extend(args);
        succeeds(&in_chroot(r, &cmd), "chroot ROOT dpkg --force-depends --unpack");
        std::fs::remove_dir_all(r.join("var/cache/minbase")).unwrap();
    } else {
        succeeds(&dpkg(r, &args), "dpkg --root=ROOT --force-depends --unpack");
    }
}

fn in_chroot(root: &Path, args: &[&str]) -> Run {
    run(clean_env(Command::new("chroot").arg(root).args(args)))
}

fn succeeds(r: &Run, what: &str) {
    assert_eq!(r.code, 0, "{what}:\n{}{}", r.stdout, r.stderr);
}
