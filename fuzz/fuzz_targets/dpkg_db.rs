//! Any bytes as each of dpkg's database files: the status file and control files (deb822, the
//! packages, the Status and Conffiles fields, a binary package's control file as dpkg checks
//! it, the stanza dpkg --unpack would write), an info list, the conffiles and md5sums members,
//! diversions, statoverride, an /etc/passwd, the `arch` file, the triggers member, triggers/File
//! and an explicit trigger's file, versions and relation fields. None may panic; what one
//! accepts and writes back it reads back the same; version order is antisymmetric and
//! reflexive; every path it lets out is plain and absolute.
//!
//! And the real dpkg judges a sample of what the engine would write: every 16th status file
//! built from a control file the checks accept, and every 16th list, is written into an admin
//! directory under `$UNPACK_FUZZ_DIR` (scripts/fuzz.sh's scratch tmpfs) and read by
//! `dpkg-query`, which must read it (exit 0; its warnings about a missing Maintainer are
//! dpkg's own) and list the same paths.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use unpack::dpkg::format::{
    self as dpkg, arch, control, deb822, diversions, list, statoverride, status, triggers, version,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    control_and_status(data);
    lists(data);
    admin_files(data);
    trigger_files(data);
    let text = String::from_utf8_lossy(data);
    conffiles_field(&text);
    versions(&text);
    relations(&text);
    if let Ok(s) = status::StatusField::parse(&text) {
        assert_eq!(status::StatusField::parse(&s.to_string()), Ok(s));
    }
    let _ = (dpkg::valid_package_name(&text), dpkg::valid_arch(&text));
    if let Ok(names) = arch::parse(data) {
        assert!(names.iter().all(|n| dpkg::valid_arch(n)));
    }
    checked_control(data);
});

/// A control file the checks accept is one stanza whose status stanza the engine's own reader
/// takes back, and dpkg-query reads (a sample).
fn checked_control(data: &[u8]) {
    let Ok(checked) = control::check(data) else { return };
    let unpacked = status::StatusField::parse("install ok unpacked").unwrap();
    let stanza = status::status_stanza(&checked.stanza, &unpacked, &[], None);
    let file = status::write_status(&[&stanza]);
    let read = deb822::parse(&file)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&file)));
    let packages = status::packages(read)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&file)));
    assert_eq!(packages.len(), 1);
    if sampled(&CONTROLS) {
        let name = packages[0].name.clone();
        let dir = judge_dir();
        std::fs::write(dir.join("status"), &file).unwrap();
        let out = dpkg_query(&dir, &["-W", "-f=${Package}\n", &name]);
        assert_eq!(out, format!("{name}\n"), "{:?}", String::from_utf8_lossy(&file));
    }
}

static CONTROLS: AtomicU64 = AtomicU64::new(0);
static LISTS: AtomicU64 = AtomicU64::new(0);

/// Whether this one of `counter`'s is judged by dpkg: every 16th, when fuzz.sh gave a scratch
/// directory (`cargo fuzz run` alone judges nothing).
fn sampled(counter: &AtomicU64) -> bool {
    std::env::var_os("UNPACK_FUZZ_DIR").is_some()
        && counter.fetch_add(1, Ordering::Relaxed) % 16 == 0
}

/// An empty admin directory for dpkg-query, made once.
fn judge_dir() -> PathBuf {
    let dir = Path::new(&std::env::var_os("UNPACK_FUZZ_DIR").unwrap()).join("dpkg-db-judge");
    std::fs::create_dir_all(dir.join("info")).unwrap();
    std::fs::create_dir_all(dir.join("updates")).unwrap();
    dir
}

/// `dpkg-query --admindir=DIR ARGS`: asserted to read the database (exit 0); its output.
fn dpkg_query(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("dpkg-query")
        .arg(format!("--admindir={}", dir.display()))
        .args(args)
        .output()
        .expect("dpkg-query runs");
    assert!(out.status.success(), "dpkg-query {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn plain(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    assert_eq!(dpkg::db_path(path.as_os_str().as_bytes()).as_deref(), Ok(path), "{path:?}");
}

fn fields(stanzas: &[deb822::Stanza]) -> Vec<&Vec<deb822::Field>> {
    stanzas.iter().map(|s| &s.fields).collect()
}

/// deb822 round trip; the status stanza built of each stanza is itself a status file.
fn control_and_status(data: &[u8]) {
    let Ok(stanzas) = deb822::parse(data) else { return };
    let mut written = Vec::new();
    for s in &stanzas {
        s.write_to(&mut written);
        written.push(b'\n');
    }
    let again = deb822::parse(&written)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&written)));
    assert_eq!(fields(&again), fields(&stanzas));
    if let Ok(packages) = status::packages(stanzas.clone()) {
        for p in &packages {
            assert!(!p.info_name().contains('/') && p.info_name() != ".." && p.info_name() != ".");
            for c in status::parse_conffiles_field(p.stanza.get("Conffiles").unwrap_or("")).unwrap()
            {
                plain(&c.path);
            }
        }
    }
    let unpacked = status::StatusField::parse("install ok unpacked").unwrap();
    let built: Vec<deb822::Stanza> =
        stanzas.iter().map(|s| status::status_stanza(s, &unpacked, &[], Some("1.0"))).collect();
    let file = status::write_status(&built.iter().collect::<Vec<_>>());
    let read = deb822::parse(&file)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&file)));
    assert_eq!(read.len(), built.len());
    for s in &read {
        assert_eq!(s.get("Status"), Some("install ok unpacked"));
    }
}

fn lists(data: &[u8]) {
    if let Ok(paths) = list::parse_list(data) {
        paths.iter().for_each(|p| plain(p));
        let written = list::write_list(&paths);
        assert_eq!(list::parse_list(&written), Ok(paths.clone()));
        if !paths.is_empty() && sampled(&LISTS) {
            judge_list(&written, &paths);
        }
    }
    if let Ok(sums) = list::parse_md5sums(data) {
        sums.iter().for_each(|(_, p)| plain(p));
        assert_eq!(list::parse_md5sums(&list::write_md5sums(&sums)), Ok(sums));
    }
    if let Ok(entries) = list::parse_conffiles_member(data) {
        entries.iter().for_each(|e| plain(&e.path));
    }
}

/// dpkg-query lists what the engine would write as a package's list, path for path.
fn judge_list(written: &[u8], paths: &[PathBuf]) {
    use std::os::unix::ffi::OsStrExt;
    let dir = judge_dir();
    let stanza = "Package: fuzz-list\nStatus: install ok installed\nMaintainer: m\nArchitecture: all\nVersion: 1\nDescription: d\n";
    std::fs::write(dir.join("status"), stanza).unwrap();
    std::fs::write(dir.join("info/fuzz-list.list"), written).unwrap();
    let out = std::process::Command::new("dpkg-query")
        .arg(format!("--admindir={}", dir.display()))
        .args(["-L", "fuzz-list"])
        .output()
        .expect("dpkg-query runs");
    assert!(out.status.success(), "dpkg-query -L: {}", String::from_utf8_lossy(&out.stderr));
    let mut listed = Vec::new();
    for p in paths {
        listed.extend_from_slice(p.as_os_str().as_bytes());
        listed.push(b'\n');
    }
    assert_eq!(out.stdout, listed, "{:?}", String::from_utf8_lossy(written));
    std::fs::remove_file(dir.join("info/fuzz-list.list")).unwrap();
}

fn admin_files(data: &[u8]) {
    if let Ok(diversions) = diversions::parse(data) {
        for d in diversions {
            plain(&d.from);
            plain(&d.to);
            assert!(d.by.is_none_or(|p| dpkg::valid_package_name(&p)));
        }
    }
    if let Ok(overrides) = statoverride::parse(data) {
        for o in overrides {
            plain(&o.path);
            assert!(o.mode <= 0o7777);
        }
    }
    let _ = statoverride::lookup_id(data, "root");
}

fn conffiles_field(text: &str) {
    if let Ok(conffiles) = status::parse_conffiles_field(text) {
        conffiles.iter().for_each(|c| plain(&c.path));
        assert_eq!(
            status::parse_conffiles_field(&status::conffiles_field(&conffiles)),
            Ok(conffiles)
        );
    }
}

/// The text cut in two at its first '\n': two versions, ordered consistently.
fn versions(text: &str) {
    let (a, b) = text.split_once('\n').unwrap_or((text, "0"));
    let (Ok(a), Ok(b)) = (version::Version::parse(a), version::Version::parse(b)) else { return };
    for v in [&a, &b] {
        let shown = version::Version::parse(&v.to_string()).unwrap();
        assert_eq!(&shown, v);
        assert_eq!(shown.to_string(), v.to_string());
        assert_eq!(v.cmp(v), std::cmp::Ordering::Equal);
    }
    assert_eq!(a.cmp(&b), b.cmp(&a).reverse(), "{a} {b}");
}

fn relations(text: &str) {
    if let Ok(groups) = version::parse_relations(text) {
        let written = version::relations_field(&groups);
        let again = version::parse_relations(&written).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(version::relations_field(&again), written);
    }
}

/// The triggers member's file names are plain absolute paths, its explicit names never leave
/// the triggers directory; both interest files read back what they write.
fn trigger_files(data: &[u8]) {
    if let Ok(directives) = triggers::parse_member(data) {
        for d in &directives {
            if d.is_file() {
                plain(Path::new(&d.name));
            } else {
                assert!(
                    !d.name.contains('/') && d.name != "." && d.name != ".." && !d.name.is_empty(),
                    "{:?}",
                    d.name
                );
            }
        }
    }
    if let Ok(interests) = triggers::parse_file_interests(data) {
        interests.iter().for_each(|i| plain(&i.path));
        assert_eq!(
            triggers::parse_file_interests(&triggers::write_interests(&interests, true)),
            Ok(interests)
        );
    }
    if let Ok(interests) = triggers::parse_explicit(data) {
        assert_eq!(
            triggers::parse_explicit(&triggers::write_interests(&interests, false)),
            Ok(interests)
        );
    }
}
