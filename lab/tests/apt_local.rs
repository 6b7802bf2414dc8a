//! The `apt-local` workload (issue 28) with apt and the real dpkg, the baseline every other
//! peer of the workload is held to: a Debian minbase bootstrapped by `unpack --bootstrap` on an
//! ext4 loop device, the lab's 24 packages installed at version 1 from a local repository by
//! `apt-get install`, then upgraded to version 2 by `apt-get upgrade`. Needs root and the
//! network (fixtures/fetch-minbase.sh, about 32 MB).

#[path = "../../tests/common/mod.rs"]
mod common;

use common::dpkg::clean_env;
use common::{is_root, run, scratch_sized, Run};
use std::path::{Path, PathBuf};
use std::process::Command;
use unpack_lab::bench::apt_local::{self, SCRIPT_LOG};

fn succeeds(r: &Run, what: &str) {
    assert_eq!(r.code, 0, "{what}:\n{}{}", r.stdout, r.stderr);
}

fn in_chroot(root: &Path, args: &[&str]) -> Run {
    run(clean_env(Command::new("chroot").arg(root).args(args)))
}

/// `apt-get ARGS` in the root with `dpkg` as its dpkg (a path in the root; the real one
/// when `None`): it succeeds and warns of nothing.
fn apt(root: &Path, dpkg: Option<&str>, args: &[&str]) -> Run {
    let r = run(clean_env(&mut apt_local::apt_get(root, dpkg, args)));
    succeeds(&r, &format!("apt-get {args:?}"));
    let noisy: Vec<&str> = r
        .stdout
        .lines()
        .chain(r.stderr.lines())
        .filter(|l| l.starts_with("W:") || l.starts_with("E:"))
        .collect();
    assert!(noisy.is_empty(), "apt-get {args:?} warned: {noisy:?}");
    r
}

fn minbase() -> (tempfile::TempDir, Vec<PathBuf>) {
    let debs = tempfile::Builder::new().prefix("unpack-apt-local-minbase").tempdir().unwrap();
    let fetch =
        run(Command::new(common::repo().join("fixtures/fetch-minbase.sh")).arg(debs.path()));
    succeeds(&fetch, "fixtures/fetch-minbase.sh");
    let mut list: Vec<PathBuf> = std::fs::read_dir(debs.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    list.sort();
    (debs, list)
}

/// Package, version and state of every `al-*` package.
fn states(root: &Path) -> Vec<String> {
    let r = in_chroot(
        root,
        &["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n", "al-*"],
    );
    succeeds(&r, "dpkg-query");
    r.stdout.lines().map(|l| l.trim_end().to_string()).collect()
}

fn expected_states(count: usize, version: &str) -> Vec<String> {
    (0..count).map(|i| format!("{} {version} ii", apt_local::name(i))).collect()
}

#[test]
fn apt_installs_and_upgrades_the_apt_local_set_with_the_real_dpkg() {
    workload(None);
}

/// The same through `unpack-dpkg` as apt's dpkg (issue 27, item 1), copied into the root (the
/// host's build; the root is the host's release): apt's unpack calls run in the engine, every
/// other call in the root's dpkg, and the result is the real dpkg's.
#[test]
fn apt_installs_and_upgrades_the_apt_local_set_through_unpack_dpkg() {
    workload(Some("/usr/local/bin/unpack-dpkg"));
}

/// The workload with `dpkg` as apt's dpkg (the real one when `None`), every result checked.
fn workload(dpkg: Option<&str>) {
    if !is_root() {
        eprintln!("skipped: needs root (loop devices, chroot)");
        return;
    }
    let count = apt_local::DEFAULT_PACKAGES;
    let repos = tempfile::Builder::new().prefix("unpack-apt-local-repo").tempdir().unwrap();
    for version in [1, 2] {
        let names = apt_local::build(&apt_local::repository(repos.path(), version), count, version)
            .unwrap();
        assert_eq!(names.len(), count);
    }
    let (_minbase_dir, minbase) = minbase();
    let fs = scratch_sized("ext4", "", 2 << 30);
    let root = fs.subdir("root");
    let mut args: Vec<&std::ffi::OsStr> =
        ["--bootstrap", "-q", "-s", "syncfs"].iter().map(|a| a.as_ref()).collect();
    args.extend(minbase.iter().map(|d| d.as_os_str()));
    args.push(root.as_os_str());
    let bootstrap = common::unpack(args);
    succeeds(&bootstrap, "unpack --bootstrap");
    assert_eq!(bootstrap.stderr, "", "the bootstrap says nothing with -q");
    succeeds(&in_chroot(&root, &["dpkg", "--configure", "-a"]), "dpkg --configure -a");
    let state = root.join(unpack::STATE_DIR);
    let before = std::fs::metadata(&state).unwrap().modified().unwrap();
    if let Some(front_end) = dpkg {
        let inside = root.join(front_end.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(common::program("unpack-dpkg"), &inside).unwrap();
    }

    apt_local::use_version(&root, repos.path(), 1).unwrap();
    apt(&root, dpkg, &["update"]);
    let names: Vec<String> = (0..count).map(apt_local::name).collect();
    let mut install = vec!["install", "-y"];
    install.extend(names.iter().map(String::as_str));
    apt(&root, dpkg, &install);
    assert_eq!(states(&root), expected_states(count, "1.0"));

    apt_local::use_version(&root, repos.path(), 2).unwrap();
    apt(&root, dpkg, &["update"]);
    apt(&root, dpkg, &["upgrade", "-y"]);
    assert_eq!(states(&root), expected_states(count, "2.0"));
    let audit = in_chroot(&root, &["dpkg", "--audit"]);
    assert_eq!((audit.code, audit.stdout.as_str()), (0, ""), "dpkg --audit: {}", audit.stderr);
    apt(&root, dpkg, &["check"]);
    // The engine's transactions write and remove their journal in its state directory: it
    // changed through the front end, and not with the real dpkg.
    let after = std::fs::metadata(&state).unwrap().modified().unwrap();
    assert_eq!(after != before, dpkg.is_some(), "the engine's state directory {}", state.display());
    // The configure guard removed each record it wrote once dpkg's configure was synced.
    assert!(!state.join("configure").exists(), "a configure guard's record outlived its call");

    // What the set is made to exercise, as the real dpkg leaves it: the file that moved is the
    // last package's; the upgrade dropped data-0 and added data-new; an unchanged conffile took
    // the new version's content; the file trigger ran after the upgrade's files changed.
    let last = apt_local::name(count - 1);
    let owner = in_chroot(&root, &["dpkg", "-S", "/usr/share/al-shared/moving"]);
    assert_eq!(owner.stdout.trim(), format!("{last}: /usr/share/al-shared/moving"));
    assert!(!root.join("usr/share/al-00/data-0").exists());
    assert!(root.join("usr/share/al-00/data-new").exists());
    let conf = std::fs::read_to_string(root.join("etc/apt-local/al-00.conf")).unwrap();
    assert_eq!(conf, "# al-00\nsetting=2\n");
    let index = std::fs::read_to_string(root.join("var/lib/al-docs.index")).unwrap();
    assert_eq!(index.lines().count(), count, "{index}");
    let log = std::fs::read_to_string(root.join(SCRIPT_LOG.trim_start_matches('/'))).unwrap();
    assert!(log.contains("al-00 2.0 postinst triggered /usr/share/al-docs"), "{log}");
    for i in 0..count {
        let me = apt_local::name(i);
        let calls: Vec<&str> = log.lines().filter(|l| l.starts_with(&format!("{me} "))).collect();
        // Install, then the upgrade's sequence of Policy 6.6.
        let sequence = [
            format!("{me} 1.0 preinst install"),
            format!("{me} 1.0 postinst configure"),
            format!("{me} 1.0 prerm upgrade 2.0"),
            format!("{me} 2.0 preinst upgrade 1.0 2.0"),
            format!("{me} 1.0 postrm upgrade 2.0"),
            format!("{me} 2.0 postinst configure 1.0"),
        ];
        let without_triggers: Vec<String> = calls
            .iter()
            .filter(|l| !l.contains(" triggered "))
            .map(|l| l.trim_end().to_string())
            .collect();
        assert_eq!(without_triggers, sequence, "{me}'s scripts");
    }
}
