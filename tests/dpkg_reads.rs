//! Whatever `unpack` writes into dpkg's database, the real dpkg reads (issue 26, item 2).
//!
//! Every kind of record the engine writes is made here by `unpack`, in a root where dpkg does
//! the same beside it where dpkg writes the same record: status stanzas in each state the engine
//! writes (`unpacked` fresh and upgraded with `Config-Version` and an `obsolete` conffile,
//! `triggers-pending` with `Triggers-Pending`, `Triggers-Awaited`, `Multi-Arch: same`
//! instances, a package that disappeared, `not-installed` and `config-files` after a failed
//! preinst, `reinstreq half-installed` after a failed postrm), info files (lists, shipped and
//! computed md5sums, conffiles, triggers, scripts and other members, `PKG:ARCH` names, a list
//! that shrank), `triggers/File` and an explicit trigger's file, and the diversions and
//! statoverrides the engine applied. Each is read back by dpkg-query (`-W` of every field that
//! holds one, `-s`, `-L`, `--control-list`, `--control-show`), dpkg-divert, dpkg-statoverride
//! and `dpkg --audit`: each must read it without a word on stderr, and answer as on dpkg's own
//! root; `dpkg --configure -a` then reads and processes all of it in both.

mod common;

use common::dpkg::*;
use common::Run;
use std::path::{Path, PathBuf};

/// Every field of a status stanza the engine writes, as dpkg-query prints it.
const FIELDS: &str = "${binary:Package} ${Status} v=${Version} cv=${Config-Version} ma=${Multi-Arch} pend=[${Triggers-Pending}] aw=[${Triggers-Awaited}] conf=[${Conffiles}] rep=[${Replaces}]\n";

/// A dpkg tool's answer, asserted to have read the root without a parse error or warning (a
/// record dpkg does not read as written) and without the exit 2 of an error (1 is an answer:
/// `--audit` found something, `--list` nothing, `-L` of a package that is not installed).
fn read(name: &str, root: &Path, args: &[&str]) -> String {
    let r: Run = tool(name, root, args);
    for word in ["parsing", "warning"] {
        assert!(!r.stderr.contains(word), "{name} {args:?} on {}: {}", root.display(), r.stderr);
    }
    assert!(r.code == 0 || r.code == 1, "{name} {args:?}: exit {}: {}", r.code, r.stderr);
    format!("{name} {args:?}: exit {}\n{}{}", r.code, r.stdout, r.stderr)
}

/// What dpkg's tools say of `root` and of its `packages`.
fn read_back(root: &Path, packages: &[&str]) -> Vec<String> {
    let mut said = vec![
        read("dpkg-query", root, &["-W", &format!("-f={FIELDS}")]),
        read("dpkg", root, &["--audit"]),
        read("dpkg-divert", root, &["--list"]),
        read("dpkg-statoverride", root, &["--list"]),
    ];
    for p in packages {
        said.push(read("dpkg-query", root, &["-s", p]));
        said.push(read("dpkg-query", root, &["-L", p]));
        // Listed in directory order: sorted.
        let mut members: Vec<String> =
            read("dpkg-query", root, &["--control-list", p]).lines().map(String::from).collect();
        members.sort();
        for member in members.iter().skip(1).filter(|m| *m != "list") {
            said.push(read("dpkg-query", root, &["--control-show", p, member]));
        }
        said.push(members.join("\n"));
    }
    said
}

/// Asserts dpkg's tools read ours as they read theirs.
fn same_reading(ours: &Path, theirs: &Path, packages: &[&str], stage: &str) {
    let (a, b) = (read_back(ours, packages), read_back(theirs, packages));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "{stage}: ours, then dpkg's root");
    }
    assert_eq!(a.len(), b.len());
}

/// `dpkg --no-triggers --unpack DEBS` in theirs (as apt calls it: the engine leaves triggers to
/// `--configure`), `unpack DEBS` in ours; the roots compared, then dpkg's reading of them.
fn unpack_both(o: &Oracle, debs: &[&Path], packages: &[&str], stage: &str) {
    let mut args: Vec<&str> = NO_DEPENDS.to_vec();
    args.extend(["--no-triggers", "--unpack"]);
    args.extend(debs.iter().map(|d| d.to_str().unwrap()));
    let r = dpkg(o.theirs.path(), &args);
    assert_eq!(r.code, 0, "{stage}: dpkg: {}{}", r.stdout, r.stderr);
    let r = ours_via().unpack(o.ours.path(), debs);
    assert_eq!(r.code, 0, "{stage}: {}", r.stderr);
    o.check(stage);
    same_reading(o.ours.path(), o.theirs.path(), packages, stage);
}

#[test]
fn every_record_the_engine_writes_is_read_by_dpkg() {
    let dir = tempfile::tempdir().unwrap();
    let build = |p: Pkg| p.build(dir.path());
    let a = build(
        Pkg::new("reads-a", "1.0", "amd64")
            .file("/usr/bin/reads-a", b"#!/bin/sh\n", 0o755)
            .file("/usr/share/reads-a/secret", b"secret\n", 0o644)
            .dir("/usr/share/reads-a/empty", 0o750)
            .symlink("/usr/bin/reads-a-link", "reads-a")
            .conffile("/etc/reads-a.conf", b"a = 1\n")
            .member("shlibs", b"libreads 1 reads-a\n")
            .member("templates", b"Template: reads/q\nType: boolean\n")
            .member(
                "triggers",
                b"interest /usr/share/reads-trig\ninterest-noawait reads-explicit\n",
            )
            .without_md5sums(),
    );
    let lib = |arch: &str| {
        build(
            Pkg::new("reads-lib", "1.0", arch)
                .field("Multi-Arch", "same")
                .file("/usr/share/doc/reads-lib/copyright", b"shared\n", 0o644)
                .file(&format!("/usr/lib/reads-{arch}/lib.so"), arch.as_bytes(), 0o644),
        )
    };
    let c = |v: &str, gone: bool| {
        let p = Pkg::new("reads-c", v, "all").conffile("/etc/reads-c/kept.conf", v.as_bytes());
        build(if gone { p.conffile("/etc/reads-c/gone.conf", b"gone\n") } else { p })
    };
    let e =
        build(Pkg::new("reads-e", "1.0", "all").file("/usr/share/reads-e/x", b"x\n", 0o644).file(
            "/usr/share/reads-e/y",
            b"y\n",
            0o644,
        ));
    let g = build(Pkg::new("reads-g", "1.0", "all").file("/usr/share/reads-g/z", b"z\n", 0o644));
    let o = Oracle::new("every record");
    o.both(|root| {
        assert_eq!(dpkg(root, &["--add-architecture", "i386"]).code, 0);
        let divert = [
            "--local",
            "--rename",
            "--divert",
            "/usr/bin/reads-a.real",
            "--add",
            "/usr/bin/reads-a",
        ];
        assert_eq!(tool("dpkg-divert", root, &divert).code, 0);
        let so = ["--add", "daemon", "staff", "0600", "/usr/share/reads-a/secret"];
        assert_eq!(tool("dpkg-statoverride", root, &so).code, 0);
    });
    let first = ["reads-a", "reads-lib:amd64", "reads-lib:i386", "reads-c", "reads-e", "reads-g"];
    let (amd64, i386, c1) = (lib("amd64"), lib("i386"), c("1.0", true));
    unpack_both(&o, &[&a, &amd64, &i386, &c1, &e, &g], &first, "fresh installs");
    o.configure(&[]);
    same_reading(o.ours.path(), o.theirs.path(), &first, "configured");

    let b = build(
        Pkg::new("reads-b", "1.0", "all")
            .file("/usr/share/reads-trig/b", b"activates reads-a\n", 0o644)
            .member("triggers", b"activate reads-explicit\n"),
    );
    let d = build(Pkg::new("reads-d", "1.0", "all").field("Replaces", "reads-e").file(
        "/usr/share/reads-e/x",
        b"x of d\n",
        0o644,
    ));
    let f = build(Pkg::new("reads-f", "1.0", "all").field("Replaces", "reads-g (<< 2)").file(
        "/usr/share/reads-g/z",
        b"z of f\n",
        0o644,
    ));
    let c2 = c("2.0", false);
    let second = ["reads-a", "reads-b", "reads-c", "reads-d", "reads-e", "reads-f"];
    unpack_both(&o, &[&b, &c2, &d, &f], &second, "triggers, an upgrade, Replaces");
    let pending =
        read("dpkg-query", o.ours.path(), &["-W", "-f=${Status} ${Triggers-Pending}", "reads-a"]);
    assert!(
        pending.contains("triggers-pending /usr/share/reads-trig")
            || pending.contains("reads-explicit"),
        "{pending}"
    );
    let gone = read("dpkg-query", o.ours.path(), &["-W", "-f=${Status} ${Version}", "reads-g"]);
    assert!(gone.ends_with("\nunknown ok not-installed "), "reads-g disappeared: {gone}");
    o.configure(&[]);
    same_reading(o.ours.path(), o.theirs.path(), &second, "configured again");
}

/// The records a failure leaves, with maintainer scripts (a shell in each root): a failed
/// preinst of a fresh install (`not-installed`) and over config files (`config-files`), as dpkg
/// leaves them; a failed old and new postrm (`reinstreq half-installed`, where dpkg puts the old
/// version back), which `dpkg --audit` names and a reinstall by dpkg finishes.
#[test]
fn the_records_of_a_failed_script_are_read_by_dpkg() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        |fails: &str| format!("#!/bin/sh\nif [ -e /fail/{fails} ]; then exit 1; fi\nexit 0\n");
    let pkg = |name: &str, v: &str| {
        Pkg::new(name, v, "amd64")
            .field("Priority", "optional")
            .file(&format!("/usr/share/{name}/file"), v.as_bytes(), 0o644)
            .script("preinst", &script(&format!("{name}_{v}.preinst")))
            .script("postrm", &script(&format!("{name}_{v}.postrm")))
    };
    let fresh = pkg("reads-pre", "1.0").build(dir.path());
    let conf = pkg("reads-conf", "1.0").conffile("/etc/reads-conf", b"c\n").build(dir.path());
    let conf2 = pkg("reads-conf", "2.0").conffile("/etc/reads-conf", b"c\n").build(dir.path());
    let (ours, theirs) = (DbRoot::with_shell(), DbRoot::with_shell());
    for root in [ours.path(), theirs.path()] {
        std::fs::create_dir_all(root.join("fail")).unwrap();
        for failing in ["reads-pre_1.0.preinst", "reads-conf_2.0.preinst"] {
            edit(root, &format!("/fail/{failing}"), b"");
        }
        Via::Dpkg.install(root, &[&conf], &[]);
        assert_eq!(dpkg(root, &["--remove", "reads-conf"]).code, 0);
    }
    for deb in [&fresh, &conf2] {
        let mut args: Vec<&str> = NO_DEPENDS.to_vec();
        args.extend(["--unpack", deb.to_str().unwrap()]);
        assert_eq!(dpkg(theirs.path(), &args).code, 1);
        let r = common::unpack([
            "-s".as_ref(),
            "fsync".as_ref(),
            deb.as_os_str(),
            ours.path().as_os_str(),
        ]);
        assert_eq!(r.code, 1, "{}", r.stderr);
    }
    // reads-pre is `not-installed`: in `dpkg-query -W` only.
    same_reading(ours.path(), theirs.path(), &["reads-conf"], "after failed preinsts");
    for (package, status) in
        [("reads-pre", "install ok not-installed"), ("reads-conf", "install ok config-files")]
    {
        let [ours, theirs] = [ours.path(), theirs.path()]
            .map(|r| read("dpkg-query", r, &["-W", &format!("-f={FIELDS}"), package]));
        assert_eq!(ours, theirs, "{package}");
        assert!(ours.contains(&format!("{package} {status}")), "{ours}");
    }

    let (up1, up2) =
        (pkg("reads-post", "1.0").build(dir.path()), pkg("reads-post", "2.0").build(dir.path()));
    Via::Dpkg.install(ours.path(), &[&up1], &[]);
    for failing in ["reads-post_1.0.postrm", "reads-post_2.0.postrm"] {
        edit(ours.path(), &format!("/fail/{failing}"), b"");
    }
    let r =
        common::unpack(["-s".as_ref(), "fsync".as_ref(), up2.as_os_str(), ours.path().as_os_str()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let said = read_back(ours.path(), &["reads-post"]);
    assert!(said[0].contains("reads-post install reinstreq half-installed v=2.0"), "{}", said[0]);
    assert!(said[1].contains("reads-post"), "dpkg --audit names it: {}", said[1]);
    std::fs::remove_dir_all(ours.path().join("fail")).unwrap();
    let reinstall: Vec<PathBuf> = vec![up2];
    Via::Dpkg.install(ours.path(), &[&reinstall[0]], &[]);
    assert_eq!(read("dpkg", ours.path(), &["--audit"]), "dpkg [\"--audit\"]: exit 0\n");
}
