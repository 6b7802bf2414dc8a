//! `unpack-dpkg`, the dpkg front end apt runs as `Dir::Bin::dpkg` (issue 27, item 1), held to
//! the real dpkg: the same command line (`--status-fd 3 --log=FILE --root=ROOT ...`) given to
//! `dpkg` in one root and to `unpack-dpkg` in another, prepared alike; the exit code, the
//! status-fd lines (an error line up to its message, which is the engine's own words), the
//! dpkg.log lines (their time left out), the tree and the database must agree.

mod common;

use common::dpkg::*;
use common::{program, run, LockHolder, Run};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one call said and left.
struct Said {
    run: Run,
    status_fd: Vec<String>,
    log: Vec<String>,
}

/// `PROGRAM --status-fd 3 --log=LOG --root=ROOT ARGS...` with fd 3 a file, in a clean
/// environment.
fn call(program: &str, root: &Path, args: &[&str]) -> Said {
    call_with(program, root, args, &[])
}

/// [`call`] with the variables `env` set.
fn call_with(program: &str, root: &Path, args: &[&str], env: &[(&str, &str)]) -> Said {
    let out = tempfile::tempdir().unwrap();
    let (fd, log) = (out.path().join("status-fd"), out.path().join("dpkg.log"));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("exec \"$@\" 3>\"$FD\"")
        .arg("sh")
        .arg(program)
        .args(["--status-fd", "3"])
        .arg(format!("--log={}", log.display()))
        .arg(format!("--root={}", root.display()))
        .args(args)
        .env("FD", &fd);
    let run = run(clean_env(&mut cmd).envs(env.iter().copied()));
    let status_fd = std::fs::read_to_string(&fd)
        .unwrap_or_default()
        .lines()
        .map(|l| match l.split_once(" : error : ") {
            Some((archive, _)) => format!("{archive} : error : ..."),
            None => l.to_string(),
        })
        .collect();
    let log = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.get(20..).unwrap_or(l).to_string())
        .collect();
    Said { run, status_fd, log }
}

/// Two roots, `theirs` for dpkg and `ours` for unpack-dpkg, prepared alike.
struct Pair {
    ours: DbRoot,
    theirs: DbRoot,
}

impl Pair {
    fn new(prepare: impl Fn(&Path)) -> Pair {
        Pair::of(DbRoot::new, prepare)
    }

    /// Two roots made by `make` (one with a shell, for maintainer scripts), prepared alike.
    fn of(make: fn() -> DbRoot, prepare: impl Fn(&Path)) -> Pair {
        let pair = Pair { ours: make(), theirs: make() };
        prepare(pair.theirs.path());
        prepare(pair.ours.path());
        pair
    }

    /// The same call to both; asserts they agree, and returns what unpack-dpkg said.
    fn call(&self, args: &[&str]) -> Said {
        self.call_as(args, |_| {})
    }

    /// [`Pair::call`], with `adjust` applied to what unpack-dpkg said first: a difference
    /// documented.
    fn call_as(&self, args: &[&str], adjust: impl Fn(&mut Said)) -> Said {
        let theirs = call("dpkg", self.theirs.path(), args);
        let mut ours = call(program("unpack-dpkg"), self.ours.path(), args);
        adjust(&mut ours);
        let what = format!("{args:?}");
        // The one line of unpack-dpkg's log that is not dpkg's: its strategy, after a `startup
        // archives` line of its own once the engine is called (strategy_the_log_names_and_why;
        // none where the call failed before: a missing archive).
        let strategy = |l: &String| l.starts_with("unpack-dpkg strategy ");
        let started = ours.log.iter().filter(|l| l.starts_with("startup archives ")).count();
        let named = ours.log.iter().filter(|l| strategy(l)).count();
        assert!(named <= started, "{what}: {:?}", ours.log);
        ours.log.retain(|l| !strategy(l));
        assert_eq!(
            ours.run.code, theirs.run.code,
            "{what}: exit\nours:\n{}\ntheirs:\n{}",
            ours.run.stderr, theirs.run.stderr
        );
        assert_eq!(ours.status_fd, theirs.status_fd, "{what}: status-fd\n{}", ours.run.stderr);
        assert_eq!(ours.log, theirs.log, "{what}: dpkg.log");
        if theirs.run.code == 2 {
            // dpkg opened its database before it found the call bad (updates/tmp.i,
            // triggers/); the engine did not.
            assert!(!self.ours.path().join("var/lib/dpkg/triggers").exists(), "{what}");
            return ours;
        }
        let mine = DbSnapshot::take(self.ours.path());
        let mut theirs = DbSnapshot::take(self.theirs.path());
        // The `not-installed` stanza dpkg leaves of a package it refused to unpack: the engine
        // leaves the database as it was (docs/database.md).
        let refused = |fields: &Vec<(String, String)>| {
            fields.iter().any(|(n, v)| n == "Status" && v == "install ok not-installed")
        };
        theirs.status.retain(|key, fields| mine.status.contains_key(key) || !refused(fields));
        let kept = theirs.status.clone();
        theirs.status_order.retain(|key| kept.contains_key(key));
        assert_same_db(&mine, &theirs, &what);
        ours
    }
}

/// `lines` without each line that `repeat` makes of the rest of the line before it, when that
/// one starts with `prefix`.
fn without_repeats(lines: &[String], prefix: &str, repeat: impl Fn(&str) -> String) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let repeated = out
            .last()
            .and_then(|last| last.strip_prefix(prefix))
            .is_some_and(|rest| *line == repeat(rest));
        if !repeated {
            out.push(line.clone());
        }
    }
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// a 1.0 and a 2.0 (owning /usr/share/fe/a), z (the same file, no Replaces), c.
fn fixtures(dir: &Path) -> [PathBuf; 4] {
    [
        Pkg::new("fe-a", "1.0", "all").file("/usr/share/fe/a", b"a1\n", 0o644).build(dir),
        Pkg::new("fe-a", "2.0", "all")
            .file("/usr/share/fe/a", b"a2\n", 0o644)
            .file("/usr/share/doc/fe-a/README", b"r\n", 0o644)
            .file("/usr/share/doc/fe-a/copyright", b"c\n", 0o644)
            .build(dir),
        Pkg::new("fe-z", "1.0", "all").file("/usr/share/fe/a", b"z\n", 0o644).build(dir),
        Pkg::new("fe-c", "1.0", "all").file("/usr/share/fe/c", b"c\n", 0o644).build(dir),
    ]
}

/// apt's unpack call: an upgrade, an archive whose file another package owns (it fails alone,
/// exit 1), and a new package after it, which still unpacks.
#[test]
fn apts_unpack_call_is_dpkgs_status_fd_log_tree_and_database() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, a2, z, c] = fixtures(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&a1]);
        dpkg_configure(root, &[]);
    });
    let said =
        pair.call(&["--no-triggers", "--unpack", "--auto-deconfigure", s(&a2), s(&z), s(&c)]);
    assert_eq!(said.run.code, 1);
    assert!(said.status_fd.iter().any(|l| l.starts_with("processing: upgrade: fe-a")));
    assert!(
        said.run.stderr.contains("Errors were encountered while processing:"),
        "{}",
        said.run.stderr
    );
}

/// `--abort-after=1`: the first failure stops the call, the archives after it untouched.
#[test]
fn abort_after_stops_at_the_nth_failure_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, z, c] = fixtures(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&a1]);
    });
    let said = pair.call(&["--abort-after=1", "--unpack", s(&z), s(&c)]);
    assert_eq!(said.run.code, 1);
    assert!(!pair.ours.path().join("usr/share/fe/c").exists());
}

/// `--force-overwrite`: the file is taken, the path leaves the owner's list, a warning.
#[test]
fn force_overwrite_takes_the_file_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, z, _] = fixtures(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&a1]);
    });
    let said = pair.call(&["--force-overwrite", "--unpack", s(&z)]);
    assert_eq!(said.run.code, 0);
    assert!(
        said.run.stderr.contains("overriding problem because --force enabled"),
        "{}",
        said.run.stderr
    );
}

/// `path-exclude` and `path-include`: the last match wins, the paths stay listed.
#[test]
fn path_filters_leave_out_what_dpkgs_leave_out() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, a2, _, _] = fixtures(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&a1]);
    });
    pair.call(&[
        "--path-exclude=/usr/share/doc/*",
        "--path-include",
        "/usr/share/doc/*/copyright",
        "--unpack",
        s(&a2),
    ]);
    assert!(!pair.ours.path().join("usr/share/doc/fe-a/README").exists());
    assert!(pair.ours.path().join("usr/share/doc/fe-a/copyright").exists());
}

/// `-i`: the unpack, then the real dpkg's configure of what unpacked.
#[test]
fn install_unpacks_then_configures() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, _, c] = fixtures(debs.path());
    let pair = Pair::new(|_| {});
    // The real dpkg's `--configure` is a process of its own, which reads the database afresh
    // and so repeats each package's `unpacked` first (as every configure call apt makes does),
    // starts its own log (`startup packages configure`) and logs `configure PKG VERSION
    // <none>` where dpkg -i, which still holds the archive, names the version twice.
    let said = pair.call_as(&["-i", s(&a1), s(&c)], |ours| {
        ours.status_fd = without_repeats(&ours.status_fd, "processing: configure: ", |p| {
            format!("status: {p}: unpacked")
        });
        let log: Vec<String> = ours
            .log
            .iter()
            .filter(|l| *l != "startup packages configure")
            .map(|l| match (l.strip_prefix("configure "), l.strip_suffix(" <none>")) {
                (Some(rest), Some(_)) => {
                    let version = rest.split(' ').nth(1).unwrap_or("");
                    format!("{} {version}", l.strip_suffix(" <none>").unwrap())
                }
                _ => l.clone(),
            })
            .collect();
        ours.log = without_repeats(&log, "configure ", |rest| {
            let mut words = rest.split(' ');
            let (p, v) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            format!("status unpacked {p} {v}")
        });
    });
    assert_eq!(said.run.code, 0);
    assert!(
        said.status_fd.contains(&"status: fe-c: installed".to_string()),
        "{:?}",
        said.status_fd
    );
}

/// `--recursive DIR`: the `.deb` files under it, symlinks followed, sorted as dpkg sorts.
#[test]
fn recursive_walks_and_sorts_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, _, c] = fixtures(debs.path());
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&c, dir.path().join("10-c.deb")).unwrap();
    std::fs::create_dir(dir.path().join("9")).unwrap();
    std::os::unix::fs::symlink(&a1, dir.path().join("9/a.deb")).unwrap();
    std::fs::write(dir.path().join("ignored.DEB"), b"not a deb").unwrap();
    let pair = Pair::new(|_| {});
    let said = pair.call(&["--no-triggers", "--unpack", "-R", s(dir.path())]);
    assert_eq!(said.run.code, 0);
    assert_eq!(said.status_fd[0], "processing: install: fe-c");
}

/// Fatal errors: exit 2, nothing unpacked, as dpkg.
#[test]
fn a_missing_archive_and_a_bad_option_are_fatal_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, ..] = fixtures(debs.path());
    let pair = Pair::new(|_| {});
    let said = pair.call(&["--unpack", s(&a1), "/nonexistent.deb"]);
    assert_eq!(said.run.code, 2);
    let said = pair.call(&["--force-nonsense", "--unpack", s(&a1)]);
    assert_eq!(said.run.code, 2);
}

/// Every other call goes to the real dpkg unchanged.
#[test]
fn other_calls_are_the_real_dpkgs() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, ..] = fixtures(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&a1]);
    });
    let said = pair.call(&["--configure", "fe-a"]);
    assert_eq!(
        said.status_fd,
        [
            "processing: configure: fe-a",
            "status: fe-a: unpacked",
            "status: fe-a: half-configured",
            "status: fe-a: installed"
        ]
    );
    let list = call(program("unpack-dpkg"), pair.ours.path(), &["-l", "fe-a"]);
    assert_eq!(list.run.stdout, call("dpkg", pair.theirs.path(), &["-l", "fe-a"]).run.stdout);
}

/// A status-fd given twice gets each line twice, as dpkg writes it.
#[test]
fn status_fd_twice_gets_each_line_twice() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, ..] = fixtures(debs.path());
    let pair = Pair::new(|_| {});
    let said = pair.call(&["--status-fd=3", "--no-triggers", "--unpack", s(&a1)]);
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
    assert_eq!(said.status_fd[..2], ["processing: install: fe-a", "processing: install: fe-a"]);
}

/// A package that conflicts with and replaces an installed one, whose preinst fails: the
/// conflictor's prerm ran, and the unwinding puts both back; the status-fd lines are dpkg's,
/// error and unwinding included.
#[test]
fn a_failed_unpack_that_was_removing_a_conflictor_unwinds_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let old = Pkg::new("fe-old", "1.0", "all")
        .file("/usr/share/fe/old", b"o\n", 0o644)
        .script("prerm", "#!/bin/sh\nexit 0\n")
        .script("postinst", "#!/bin/sh\nexit 0\n")
        .build(debs.path());
    let new = Pkg::new("fe-new", "1.0", "all")
        .field("Conflicts", "fe-old")
        .field("Replaces", "fe-old")
        .file("/usr/share/fe/new", b"n\n", 0o644)
        .script("preinst", "#!/bin/sh\nexit 1\n")
        .build(debs.path());
    let pair = Pair::of(DbRoot::with_shell, |root| {
        dpkg_unpack(root, &[&old]);
        dpkg_configure(root, &[]);
    });
    let said = pair.call(&["--no-triggers", "--unpack", "--auto-deconfigure", s(&new)]);
    assert_eq!(said.run.code, 1);
    assert!(
        said.status_fd.contains(&"status: fe-old: half-installed".to_string()),
        "{:?}",
        said.status_fd
    );
}

/// An upgrade whose new preinst fails: dpkg's unwinding lines (the old version `unpacked`,
/// then configured again once its postinst abort-upgrade ran).
#[test]
fn a_failed_upgrade_unwinds_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let scripts =
        |p: Pkg| p.script("prerm", "#!/bin/sh\nexit 0\n").script("postinst", "#!/bin/sh\nexit 0\n");
    let v1 = scripts(Pkg::new("fe-q", "1.0", "all").file("/usr/share/fe/q", b"1\n", 0o644))
        .build(debs.path());
    let v2 = scripts(Pkg::new("fe-q", "2.0", "all").file("/usr/share/fe/q", b"2\n", 0o644))
        .script("preinst", "#!/bin/sh\nexit 1\n")
        .build(debs.path());
    let pair = Pair::of(DbRoot::with_shell, |root| {
        dpkg_unpack(root, &[&v1]);
        dpkg_configure(root, &[]);
    });
    let said = pair.call(&["--no-triggers", "--unpack", s(&v2)]);
    assert_eq!(said.run.code, 1);
    assert_eq!(said.status_fd.last().map(String::as_str), Some("status: fe-q: installed"));
}

/// An `--unpack` without `--no-triggers` runs, at its end, the triggers it activated, as dpkg
/// does: here through the real dpkg's `--triggers-only`, a process of its own, which starts
/// its own log and repeats the state it reads first.
#[test]
fn an_unpack_without_no_triggers_runs_the_triggers_it_activated() {
    let debs = tempfile::tempdir().unwrap();
    let t = Pkg::new("fe-t", "1.0", "all")
        .member("triggers", b"interest /usr/share/fe-trig\n")
        .file("/usr/share/fe-t/own", b"t\n", 0o644)
        .script("postinst", "#!/bin/sh\necho \"postinst $*\" >> /var/log/trig.log\n")
        .build(debs.path());
    let u = Pkg::new("fe-u", "1.0", "all")
        .file("/usr/share/fe-trig/x", b"x\n", 0o644)
        .build(debs.path());
    let pair = Pair::of(DbRoot::with_shell, |root| {
        dpkg_unpack(root, &[&t]);
        dpkg_configure(root, &[]);
    });
    let said = pair.call_as(&["--unpack", s(&u)], |ours| {
        ours.log.retain(|l| l != "startup packages triggers-only");
        ours.status_fd = without_repeats(&ours.status_fd, "processing: trigproc: ", |p| {
            format!("status: {p}: triggers-pending")
        });
        ours.log = without_repeats(&ours.log, "trigproc ", |rest| {
            let mut words = rest.split(' ');
            let (p, v) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            format!("status triggers-pending {p} {v}")
        });
    });
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
    let log = std::fs::read_to_string(pair.ours.path().join("var/log/trig.log")).unwrap();
    assert!(log.ends_with("postinst triggered /usr/share/fe-trig\n"), "{log}");
}

/// An archive that is not a package fails alone, with dpkg's error line on status-fd.
#[test]
fn an_archive_that_is_not_a_package_fails_alone() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, _, c] = fixtures(debs.path());
    let bad = debs.path().join("bad.deb");
    std::fs::write(&bad, b"!<arch>\nnot a package\n").unwrap();
    let pair = Pair::new(|_| {});
    let said = pair.call(&["--no-triggers", "--unpack", s(&a1), s(&bad), s(&c)]);
    assert_eq!(said.run.code, 1);
    assert!(said.status_fd.contains(&format!("status: {} : error : ...", s(&bad))));
}

/// dpkg's lock held by another process: a fatal error, exit 2, nothing unpacked.
#[test]
fn a_held_lock_is_fatal_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, ..] = fixtures(debs.path());
    let pair = Pair::new(|_| {});
    let lock = |root: &Path| LockHolder::new(&root.join("var/lib/dpkg/lock-frontend"));
    let holders = [lock(pair.theirs.path()), lock(pair.ours.path())];
    let said = pair.call(&["--no-triggers", "--unpack", s(&a1)]);
    drop(holders);
    assert_eq!(said.run.code, 2);
    assert!(!pair.ours.path().join("usr/share/fe/a").exists());
}

/// Names on status-fd as dpkg's: `NAME:ARCH` for a Multi-Arch: same package and for one of a
/// foreign architecture, `NAME` for the native one and `all`.
#[test]
fn status_fd_names_packages_as_dpkg() {
    let debs = tempfile::tempdir().unwrap();
    let arch = run(Command::new("dpkg").arg("--print-architecture")).stdout.trim().to_string();
    let other = if arch == "i386" { "amd64" } else { "i386" };
    let same = Pkg::new("fe-m", "1.0", &arch)
        .field("Multi-Arch", "same")
        .file("/usr/lib/fe-m/amd64", b"m\n", 0o644)
        .build(debs.path());
    let foreign =
        Pkg::new("fe-x", "1.0", other).file("/usr/lib/fe-x/i386", b"x\n", 0o644).build(debs.path());
    let native = Pkg::new("fe-n", "1.0", &arch)
        .file("/usr/lib/fe-n/amd64", b"n\n", 0o644)
        .build(debs.path());
    let pair = Pair::new(|root| {
        let r = dpkg(root, &["--add-architecture", other]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    });
    let said = pair.call(&["--no-triggers", "--unpack", s(&same), s(&foreign), s(&native)]);
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
    let processing: Vec<&str> =
        said.status_fd.iter().filter(|l| l.starts_with("processing")).map(String::as_str).collect();
    assert_eq!(
        processing,
        [
            "processing: install: fe-m:amd64",
            "processing: install: fe-x:i386",
            "processing: install: fe-n"
        ]
    );
}

/// `--abort-after=0` stops at the first failure, not before: the packages before it unpack.
#[test]
fn abort_after_zero_stops_at_the_first_failure() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, _, z, c] = fixtures(debs.path());
    let pair = Pair::new(|_| {});
    let said = pair.call(&["--abort-after=0", "--unpack", s(&a1), s(&c), s(&z), s(&c)]);
    assert_eq!(said.run.code, 1);
    assert!(pair.ours.path().join("usr/share/fe/c").exists());
}

/// A package of an architecture the root does not know is refused, unless
/// `--force-architecture`: then it unpacks, as with dpkg.
#[test]
fn a_foreign_architecture_is_refused_unless_forced() {
    let debs = tempfile::tempdir().unwrap();
    let arch = run(Command::new("dpkg").arg("--print-architecture")).stdout.trim().to_string();
    let other = if arch == "i386" { "amd64" } else { "i386" };
    // The engine's native architecture is the root's: its installed dpkg's.
    let fake_dpkg = Pkg::new("dpkg", "1.21.23", &arch)
        .file("/usr/share/fe-dpkg/x", b"d\n", 0o644)
        .build(debs.path());
    let foreign =
        Pkg::new("fe-x", "1.0", other).file("/usr/lib/fe-x/x", b"x\n", 0o644).build(debs.path());
    let pair = Pair::new(|root| {
        dpkg_unpack(root, &[&fake_dpkg]);
    });
    let said = pair.call(&["--no-triggers", "--unpack", s(&foreign)]);
    assert_eq!(said.run.code, 1);
    assert!(said.run.stderr.contains("does not match"), "{}", said.run.stderr);
    let said = pair.call(&["--force-architecture", "--no-triggers", "--unpack", s(&foreign)]);
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
}

/// The strategy is named in the log, with where it came from: the default, `--force-unsafe-io`
/// (which apt-based image builders pass: `none`), or `UNPACK_DPKG_STRATEGY`, which wins.
#[test]
fn strategy_the_log_names_and_why() {
    let debs = tempfile::tempdir().unwrap();
    let [a1, ..] = fixtures(debs.path());
    let root = DbRoot::new();
    let line = |said: &Said| -> String {
        assert_eq!(said.run.code, 0, "{}", said.run.stderr);
        let found = said.log.iter().find(|l| l.starts_with("unpack-dpkg strategy "));
        found.cloned().unwrap_or_else(|| panic!("no strategy line: {:?}", said.log))
    };
    // This machine's dpkg.cfg.d may turn unsafe-io on (the running system's configuration counts
    // for dpkg): refused on the command line, the default is left.
    let args = ["--refuse-unsafe-io", "--no-triggers", "--unpack", s(&a1)];
    let plain = call(program("unpack-dpkg"), root.path(), &args);
    assert_eq!(line(&plain), "unpack-dpkg strategy syncfs (the default)");
    assert_eq!(plain.log[0], "startup archives unpack", "{:?}", plain.log);
    let args = ["--force-unsafe-io", "--no-triggers", "--unpack", s(&a1)];
    let unsafe_io = call(program("unpack-dpkg"), root.path(), &args);
    assert_eq!(line(&unsafe_io), "unpack-dpkg strategy none (--force-unsafe-io)");
    let env = [("UNPACK_DPKG_STRATEGY", "fsync")];
    let chosen = call_with(program("unpack-dpkg"), root.path(), &args, &env);
    assert_eq!(line(&chosen), "unpack-dpkg strategy fsync (UNPACK_DPKG_STRATEGY)");
}

/// The configure guard (issue 28): a `--configure` through unpack-dpkg is the real dpkg's
/// (tree, database, status-fd and log as dpkg's own), with a record, made before dpkg runs, of
/// each conffile it may move, removed once they are synced. A power cut that kept dpkg's record
/// of a new conffile and lost its rename (btrfs: configure.c renames without syncing the
/// directory) is then finished from that record by `unpack --recover`, where dpkg's choice
/// asked no one; a conffile the administrator had changed is left, and named.
#[test]
fn a_conffile_move_a_crash_lost_is_finished_from_the_guards_record() {
    let debs = tempfile::tempdir().unwrap();
    let [v1, v2] = guarded_fixtures(debs.path());
    let pair = Pair::of(DbRoot::with_shell, |root| {
        Via::Dpkg.install(root, &[&v1], &[]);
        edit(root, "/etc/gc/edited.conf", b"mine\n");
        dpkg_unpack(root, &[&v2]);
    });
    let args = ["--force-confold", "--configure", "gc"];
    let theirs = call("dpkg", pair.theirs.path(), &args);
    // This machine's dpkg.cfg.d may say unsafe-io, which turns the guard off with the engine's
    // durability: a durable strategy is chosen.
    let env = [("UNPACK_DPKG_STRATEGY", "syncfs")];
    let ours = call_with(program("unpack-dpkg"), pair.ours.path(), &args, &env);
    assert_eq!((ours.run.code, theirs.run.code), (0, 0), "{}", ours.run.stderr);
    // dpkg's conffile-prompt line names the root.
    let rooted = |said: &Said, root: &DbRoot| -> Vec<String> {
        let r = root.path().to_str().unwrap();
        said.status_fd.iter().map(|l| l.replace(r, "ROOT")).collect()
    };
    assert_eq!(rooted(&ours, &pair.ours), rooted(&theirs, &pair.theirs));
    assert_eq!(ours.log, theirs.log);
    let state = pair.ours.path().join("var/lib/unpack");
    assert_same_db(
        &DbSnapshot::take(pair.ours.path()),
        &DbSnapshot::take(pair.theirs.path()),
        "configure",
    );
    assert!(!state.join("configure").exists(), "the record outlived the configure");
    let seen = std::fs::read_to_string(state.join("seen")).expect("no record while dpkg ran");
    let (old, new) = (md5_hex(b"one\n"), md5_hex(b"two\n"));
    assert!(seen.contains(&format!("gc all 2.0 {old} /etc/gc/plain.conf\n")), "{seen}");
    assert!(seen.contains(&format!("gc all 2.0 {old} /etc/gc/edited.conf\n")), "{seen}");

    // What the power cut leaves on btrfs: dpkg's status says the new conffiles are in place
    // (the plain one installed, the edited one kept with the new as .dpkg-dist, the unchanged
    // one's .dpkg-new removed), the renames and the removal are lost, the record is there.
    let root = pair.ours.path();
    let etc = root.join("etc/gc");
    lose_the_configures_moves(root);
    let db = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
    assert!(db.contains(&format!(" /etc/gc/plain.conf {new}")), "{db}");
    let r = common::unpack(["--recover".as_ref(), root.as_os_str()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("finished 2 conffile moves"), "{}", r.stdout);
    assert!(r.stdout.contains("/etc/gc/edited.conf.dpkg-new: dpkg's choice"), "{}", r.stdout);
    assert_eq!(std::fs::read(etc.join("plain.conf")).unwrap(), b"two\n");
    assert!(!etc.join("plain.conf.dpkg-new").exists());
    assert_eq!(std::fs::read(etc.join("same.conf")).unwrap(), b"same\n");
    assert!(!etc.join("same.conf.dpkg-new").exists());
    assert_eq!(std::fs::read(etc.join("edited.conf")).unwrap(), b"mine\n");
    assert_eq!(std::fs::read(etc.join("edited.conf.dpkg-new")).unwrap(), b"two\n");
    assert!(!state.join("configure").exists(), "the record outlived its recovery");
    // Done once: a second recovery finds nothing.
    let again = common::unpack(["--recover".as_ref(), root.as_os_str()]);
    assert!(!again.stdout.contains("conffile"), "{}", again.stdout);
}

/// Undoes in `root` what btrfs can lose of a guarded configure of gc 2.0 (see
/// `a_conffile_move_a_crash_lost_is_finished_from_the_guards_record`): the renames and the
/// removal dpkg made, with the record the guard had written put back.
fn lose_the_configures_moves(root: &Path) {
    let etc = root.join("etc/gc");
    let state = root.join("var/lib/unpack");
    std::fs::rename(etc.join("plain.conf"), etc.join("plain.conf.dpkg-new")).unwrap();
    edit(root, "/etc/gc/plain.conf", b"one\n");
    std::fs::rename(etc.join("edited.conf.dpkg-dist"), etc.join("edited.conf.dpkg-new")).unwrap();
    edit(root, "/etc/gc/same.conf.dpkg-new", b"same\n");
    std::fs::rename(state.join("seen"), state.join("configure")).unwrap();
}

/// A `NAME.dpkg-new` that is a symlink when recovery comes (planted by someone who can write
/// the conffile's directory, or swapped in since) is never followed: not hashed, not chmod-ed,
/// not renamed; it is left and named, and the other conffiles are finished.
#[test]
fn the_guards_recovery_never_follows_a_symlinked_dpkg_new() {
    let debs = tempfile::tempdir().unwrap();
    let [v1, v2] = guarded_fixtures(debs.path());
    let root = DbRoot::with_shell();
    Via::Dpkg.install(root.path(), &[&v1], &[]);
    edit(root.path(), "/etc/gc/edited.conf", b"mine\n");
    dpkg_unpack(root.path(), &[&v2]);
    let env = [("UNPACK_DPKG_STRATEGY", "syncfs")];
    let args = ["--force-confold", "--configure", "gc"];
    let said = call_with(program("unpack-dpkg"), root.path(), &args, &env);
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
    lose_the_configures_moves(root.path());
    // Outside the root, with what the new conffile holds (so a followed link would hash as it)
    // and a mode plain.conf's would overwrite.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, b"two\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let etc = root.path().join("etc/gc");
    std::fs::remove_file(etc.join("plain.conf.dpkg-new")).unwrap();
    std::os::unix::fs::symlink(&target, etc.join("plain.conf.dpkg-new")).unwrap();

    let r = common::unpack(["--recover".as_ref(), root.path().as_os_str()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("finished 1 conffile moves"), "{}", r.stdout);
    assert!(r.stdout.contains("/etc/gc/plain.conf.dpkg-new: "), "{}", r.stdout);
    assert!(r.stdout.contains("not a regular file"), "{}", r.stdout);
    let link = std::fs::symlink_metadata(etc.join("plain.conf.dpkg-new")).unwrap();
    assert!(link.file_type().is_symlink(), "the symlink was replaced");
    assert_eq!(std::fs::read(etc.join("plain.conf")).unwrap(), b"one\n");
    assert_eq!(std::fs::read(&target).unwrap(), b"two\n");
    assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777, 0o600);
    assert!(!etc.join("same.conf.dpkg-new").exists(), "the other conffiles were not finished");
    assert!(!root.path().join("var/lib/unpack/configure").exists());
}

/// gc 1.0 and 2.0, three conffiles: one the upgrade changes, one an administrator will change
/// too, one it leaves as it was; 2.0's postinst, run by dpkg after it moved the conffiles,
/// keeps what the configure guard recorded in `var/lib/unpack/seen` (busybox's builtins only:
/// the chroot has nothing else).
fn guarded_fixtures(dir: &Path) -> [PathBuf; 2] {
    let keep = "r=/var/lib/unpack/configure\nif [ -e $r ]; then\n  while IFS= read -r l; do printf '%s\\n' \"$l\"; done < $r > /var/lib/unpack/seen\nfi\n";
    [
        Pkg::new("gc", "1.0", "all")
            .conffile("/etc/gc/plain.conf", b"one\n")
            .conffile("/etc/gc/edited.conf", b"one\n")
            .conffile("/etc/gc/same.conf", b"same\n")
            .build(dir),
        Pkg::new("gc", "2.0", "all")
            .conffile("/etc/gc/plain.conf", b"two\n")
            .conffile("/etc/gc/edited.conf", b"two\n")
            .conffile("/etc/gc/same.conf", b"same\n")
            .script("postinst", &format!("#!/bin/sh\n{keep}"))
            .build(dir),
    ]
}

/// The configure of `--install` runs under the guard too: the record is there while dpkg
/// configures, and gone after.
#[test]
fn install_configures_under_the_guard() {
    let debs = tempfile::tempdir().unwrap();
    let [v1, v2] = guarded_fixtures(debs.path());
    let root = DbRoot::with_shell();
    Via::Dpkg.install(root.path(), &[&v1], &[]);
    let env = [("UNPACK_DPKG_STRATEGY", "syncfs")];
    let said = call_with(program("unpack-dpkg"), root.path(), &["-i", s(&v2)], &env);
    assert_eq!(said.run.code, 0, "{}", said.run.stderr);
    let state = root.path().join("var/lib/unpack");
    let seen = std::fs::read_to_string(state.join("seen")).expect("no record while dpkg ran");
    let old = md5_hex(b"one\n");
    assert!(seen.contains(&format!("gc all 2.0 {old} /etc/gc/plain.conf\n")), "{seen}");
    assert!(!state.join("configure").exists(), "the record outlived the configure");
    assert_eq!(std::fs::read(root.path().join("etc/gc/plain.conf")).unwrap(), b"two\n");
}
