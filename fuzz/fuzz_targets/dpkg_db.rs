//! Any bytes as each of dpkg's database files: the status file and control files (deb822, the
//! packages, the Status and Conffiles fields, the stanza dpkg --unpack would write), an info
//! list, the conffiles and md5sums members, diversions, statoverride, an /etc/passwd, the
//! triggers member, triggers/File and an explicit trigger's file, versions and relation fields. None may panic; what one accepts and writes back it reads back the
//! same; version order is antisymmetric and reflexive; every path it lets out is plain and
//! absolute.
#![no_main]

use std::path::Path;
use unpack::dpkg::format::{self as dpkg, deb822, diversions, list, statoverride, status, triggers, version};

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
});

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
        assert_eq!(list::parse_list(&list::write_list(&paths)), Ok(paths));
    }
    if let Ok(sums) = list::parse_md5sums(data) {
        sums.iter().for_each(|(_, p)| plain(p));
        assert_eq!(list::parse_md5sums(&list::write_md5sums(&sums)), Ok(sums));
    }
    if let Ok(entries) = list::parse_conffiles_member(data) {
        entries.iter().for_each(|e| plain(&e.path));
    }
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
