//! dpkg's status file: its packages, their `Status:` and `Conffiles:` fields, and the stanza
//! `dpkg --unpack` writes for a package, in dpkg's field order (lib/dpkg/parse.c fieldinfos,
//! written by lib/dpkg/dump.c).
//!
//! Names and architectures are validated here, so that an info file name made of them
//! ([`info_name`]) can never leave `info/`.

use super::deb822::{Field, Stanza};
use super::version::{parse_relations, relations_field, Version};
use super::{db_path, is_md5, shown, valid_arch, valid_package_name, ParseError};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

/// What the administrator wants: the first word of `Status:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Unknown,
    Install,
    Hold,
    Deinstall,
    Purge,
}

/// The error flag: the second word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    Ok,
    Reinstreq,
}

/// The package's state: the third word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    NotInstalled,
    ConfigFiles,
    HalfInstalled,
    Unpacked,
    HalfConfigured,
    TriggersAwaited,
    TriggersPending,
    Installed,
}

const WANTS: [(Want, &str); 5] = [
    (Want::Unknown, "unknown"),
    (Want::Install, "install"),
    (Want::Hold, "hold"),
    (Want::Deinstall, "deinstall"),
    (Want::Purge, "purge"),
];
const FLAGS: [(Flag, &str); 2] = [(Flag::Ok, "ok"), (Flag::Reinstreq, "reinstreq")];
const STATES: [(State, &str); 8] = [
    (State::NotInstalled, "not-installed"),
    (State::ConfigFiles, "config-files"),
    (State::HalfInstalled, "half-installed"),
    (State::Unpacked, "unpacked"),
    (State::HalfConfigured, "half-configured"),
    (State::TriggersAwaited, "triggers-awaited"),
    (State::TriggersPending, "triggers-pending"),
    (State::Installed, "installed"),
];

impl State {
    /// The state as dpkg writes it (`half-installed`).
    pub fn word(self) -> &'static str {
        word(&STATES, self)
    }
}

fn word<T: Copy + PartialEq>(table: &[(T, &'static str)], value: T) -> &'static str {
    table.iter().find(|(v, _)| *v == value).map_or("", |(_, w)| w)
}

fn from_word<T: Copy>(table: &[(T, &str)], word: Option<&str>, what: &str) -> Result<T, String> {
    let word = word.ok_or_else(|| format!("Status: no {what} word"))?;
    table
        .iter()
        .find(|(_, w)| *w == word)
        .map(|(v, _)| *v)
        .ok_or_else(|| format!("Status: bad {what} word '{}'", shown(word)))
}

/// The `Status:` field: "want flag state".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusField {
    pub want: Want,
    pub flag: Flag,
    pub state: State,
}

impl StatusField {
    /// Parses the three words, exactly the ones dpkg writes (dpkg also takes any case and
    /// prefixes of them; a file with those was not written by dpkg).
    pub fn parse(value: &str) -> Result<StatusField, String> {
        let mut words = value.split_ascii_whitespace();
        let status = StatusField {
            want: from_word(&WANTS, words.next(), "want")?,
            flag: from_word(&FLAGS, words.next(), "error flag")?,
            state: from_word(&STATES, words.next(), "state")?,
        };
        match words.next() {
            Some(_) => Err("Status: trailing junk after the three words".into()),
            None => Ok(status),
        }
    }
}

impl fmt::Display for StatusField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            word(&WANTS, self.want),
            word(&FLAGS, self.flag),
            word(&STATES, self.state)
        )
    }
}

/// The hash dpkg records for a conffile it unpacked but has not configured yet.
pub const NEW_CONFFILE: &str = "newconffile";

/// One line of `Conffiles:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conffile {
    pub path: PathBuf,
    /// 32 lowercase hex digits (an md5sum), or [`NEW_CONFFILE`].
    pub hash: String,
    pub obsolete: bool,
    pub remove_on_upgrade: bool,
}

/// Parses the value of `Conffiles:` as lib/dpkg/fields.c f_conffiles does: lines of
/// " PATH HASH [obsolete] [remove-on-upgrade]", the flags read from the end, so that a path may
/// hold spaces.
pub fn parse_conffiles_field(value: &str) -> Result<Vec<Conffile>, String> {
    let mut conffiles = Vec::new();
    for line in value.split('\n').filter(|l| !l.is_empty()) {
        let bad = |why: &str| format!("Conffiles: {why} in line '{}'", shown(line));
        let Some(mut rest) = line.strip_prefix(' ') else {
            return Err(bad("no leading space"));
        };
        let mut last_word = |word: &str| match rest.rsplit_once(' ') {
            Some((before, w)) if w == word => {
                rest = before;
                true
            }
            _ => false,
        };
        let remove_on_upgrade = last_word("remove-on-upgrade");
        let obsolete = last_word("obsolete");
        let (path, hash) = rest.rsplit_once(' ').ok_or_else(|| bad("no hash"))?;
        if !valid_hash(hash) {
            return Err(bad("bad hash"));
        }
        let path = db_path(path.as_bytes()).map_err(|e| bad(&e))?;
        if path.as_os_str() == "/." {
            return Err(bad("the root as a conffile"));
        }
        conffiles.push(Conffile { path, hash: hash.to_string(), obsolete, remove_on_upgrade });
    }
    Ok(conffiles)
}

/// A hash dpkg records for a conffile: an md5sum, or [`NEW_CONFFILE`].
pub fn valid_hash(hash: &str) -> bool {
    hash == NEW_CONFFILE || is_md5(hash)
}

/// The value of `Conffiles:` as dpkg writes it (lib/dpkg/dump.c w_conffiles): it starts with
/// '\n', one " PATH HASH[ obsolete][ remove-on-upgrade]" line per conffile.
pub fn conffiles_field(conffiles: &[Conffile]) -> String {
    let mut value = String::new();
    for c in conffiles {
        value.push_str(&format!("\n {} {}", c.path.to_string_lossy(), c.hash));
        if c.obsolete {
            value.push_str(" obsolete");
        }
        if c.remove_on_upgrade {
            value.push_str(" remove-on-upgrade");
        }
    }
    value
}

/// A package of the status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// Lowercased, as dpkg keeps it.
    pub name: String,
    /// Empty when the stanza has none (dpkg allows that for packages not installed).
    pub arch: String,
    pub multi_arch_same: bool,
    /// Empty when the stanza has none.
    pub version: String,
    pub status: StatusField,
    pub stanza: Stanza,
}

impl Package {
    /// The name of its info files, as dpkg names them: "foo", or "foo:amd64" for Multi-Arch: same.
    pub fn info_name(&self) -> String {
        info_name(&self.name, &self.arch, self.multi_arch_same)
    }

    /// The version whose configuration the package holds, which a new stanza keeps for
    /// dpkg --configure: its Config-Version, or for an installed package (whose stanza never
    /// carries the field) its Version, as dpkg reads it (lib/dpkg/parse.c).
    pub fn config_version(&self) -> Option<&str> {
        match self.stanza.get("Config-Version") {
            Some(v) => Some(v),
            None if matches!(self.status.state, State::Installed | State::TriggersPending) => {
                Some(self.version.as_str())
            }
            None => None,
        }
    }
}

/// The name of a package's info files: "NAME", or "NAME:ARCH" for Multi-Arch: same.
pub fn info_name(name: &str, arch: &str, multi_arch_same: bool) -> String {
    if multi_arch_same {
        format!("{name}:{arch}")
    } else {
        name.to_string()
    }
}

/// The packages of a status file (each name and arch validated; two stanzas for one name:arch is
/// an error). A name with more than one instance that is not `not-installed` must be
/// Multi-Arch: same in each, as dpkg requires ("not co-installable"): so no two packages the
/// caller must keep apart ever share an info file name.
pub fn packages(stanzas: Vec<Stanza>) -> Result<Vec<Package>, ParseError> {
    let mut seen = HashSet::new();
    let mut instances: HashMap<String, (usize, bool)> = HashMap::new();
    let mut packages = Vec::with_capacity(stanzas.len());
    for stanza in stanzas {
        let line = stanza.line;
        let package = package(stanza).map_err(|reason| ParseError::new(line, reason))?;
        if !seen.insert((package.name.clone(), package.arch.clone())) {
            return Err(ParseError::new(
                line,
                format!("a second stanza for {}:{}", package.name, package.arch),
            ));
        }
        if package.status.state != State::NotInstalled {
            let (count, all_same) = instances.entry(package.name.clone()).or_insert((0, true));
            *count += 1;
            *all_same &= package.multi_arch_same;
            if *count > 1 && !*all_same {
                return Err(ParseError::new(
                    line,
                    format!(
                        "{} is installed for two architectures without Multi-Arch: same",
                        package.name
                    ),
                ));
            }
        }
        packages.push(package);
    }
    Ok(packages)
}

fn package(stanza: Stanza) -> Result<Package, String> {
    let name = stanza.get("Package").ok_or("a stanza without Package")?.to_ascii_lowercase();
    if !valid_package_name(&name) {
        return Err(format!("bad package name '{}'", shown(name)));
    }
    let arch = stanza.get("Architecture").unwrap_or("").to_string();
    if !arch.is_empty() && !valid_arch(&arch) {
        return Err(format!("{name}: bad architecture '{}'", shown(arch)));
    }
    let multi_arch_same = stanza.get("Multi-Arch").is_some_and(|m| m.eq_ignore_ascii_case("same"));
    if multi_arch_same && (arch.is_empty() || arch == "all") {
        return Err(format!("{name}: Multi-Arch: same needs an architecture other than 'all'"));
    }
    let status = match stanza.get("Status") {
        Some(value) => StatusField::parse(value).map_err(|e| format!("{name}: {e}"))?,
        None => StatusField { want: Want::Unknown, flag: Flag::Ok, state: State::NotInstalled },
    };
    let conffiles = stanza.get("Conffiles").unwrap_or("");
    parse_conffiles_field(conffiles).map_err(|e| format!("{name}: {e}"))?;
    let version = stanza.get("Version").unwrap_or("").to_string();
    Ok(Package { name, arch, multi_arch_same, version, status, stanza })
}

/// Sets a field dpkg knows where dpkg writes it: in place, or after the known fields that come
/// before it in dpkg's order and before the fields dpkg does not know (which it writes last).
pub fn set_known(stanza: &mut Stanza, name: &str, value: String) {
    if let Some(f) = stanza.fields.iter_mut().find(|f| f.name.eq_ignore_ascii_case(name)) {
        f.value = value;
        return;
    }
    let rank = |n: &str| FIELD_ORDER.iter().position(|k| k.eq_ignore_ascii_case(n));
    let own = rank(name).unwrap_or(FIELD_ORDER.len());
    let at = stanza
        .fields
        .iter()
        .position(|f| rank(&f.name).is_none_or(|r| r > own))
        .unwrap_or(stanza.fields.len());
    stanza.fields.insert(at, Field { name: name.to_string(), value });
}

/// The fields dpkg knows, in the order it writes them (lib/dpkg/parse.c fieldinfos).
const FIELD_ORDER: [&str; 32] = [
    "Package",
    "Essential",
    "Protected",
    "Status",
    "Priority",
    "Section",
    "Installed-Size",
    "Origin",
    "Maintainer",
    "Bugs",
    "Architecture",
    "Multi-Arch",
    "Source",
    "Version",
    "Config-Version",
    "Replaces",
    "Provides",
    "Depends",
    "Pre-Depends",
    "Recommends",
    "Suggests",
    "Breaks",
    "Conflicts",
    "Enhances",
    "Conffiles",
    "Filename",
    "Size",
    "MD5sum",
    "MSDOS-Filename",
    "Description",
    "Triggers-Pending",
    "Triggers-Awaited",
];

/// Fields of a control file that never reach the status stanza as they stand: the archive's
/// own (Filename, Size, MD5sum, MSDOS-Filename), the ones dpkg computes (Status, Conffiles,
/// Config-Version, Triggers-*), and the obsolete ones dpkg folds into others and never writes.
const DROPPED: [&str; 15] = [
    "Status",
    "Conffiles",
    "Config-Version",
    "Filename",
    "Size",
    "MD5sum",
    "MSDOS-Filename",
    "Triggers-Pending",
    "Triggers-Awaited",
    "Recommended",
    "Optional",
    "Class",
    "Revision",
    "Package-Revision",
    "Package_Revision",
];

/// The stanza dpkg --unpack writes into status for a package whose control file is `control`:
/// its fields in dpkg's order, unknown fields after the known ones in their control-file order,
/// the fields that never go into status dropped, Status, Conffiles (if any) and Config-Version
/// (if Some) set. Known fields get dpkg's spelling of their names and of the values it
/// normalizes (see [`normalize`]); empty known fields are dropped as dpkg drops them.
pub fn status_stanza(
    control: &Stanza,
    status: &StatusField,
    conffiles: &[Conffile],
    config_version: Option<&str>,
) -> Stanza {
    let mut known: Vec<Option<Field>> = vec![None; FIELD_ORDER.len()];
    let mut unknown = Vec::new();
    for field in &control.fields {
        if DROPPED.iter().any(|d| d.eq_ignore_ascii_case(&field.name)) {
            continue;
        }
        match FIELD_ORDER.iter().position(|k| k.eq_ignore_ascii_case(&field.name)) {
            Some(i) => {
                known[i] = normalize(FIELD_ORDER[i], &field.value)
                    .map(|value| Field { name: FIELD_ORDER[i].into(), value })
            }
            None => unknown.push(field.clone()),
        }
    }
    let mut computed = |name: &str, value: String| {
        let i = FIELD_ORDER.iter().position(|k| *k == name).unwrap_or(0);
        known[i] = Some(Field { name: name.into(), value });
    };
    computed("Status", status.to_string());
    if !conffiles.is_empty() {
        computed("Conffiles", conffiles_field(conffiles));
    }
    if let Some(version) = config_version {
        computed(
            "Config-Version",
            Version::parse(version).map_or(version.to_string(), |v| v.to_string()),
        );
    }
    Stanza { fields: known.into_iter().flatten().chain(unknown).collect(), line: control.line }
}

/// A known field's value as dpkg writes it back, or None where dpkg writes nothing: empty
/// values, the default "no" of Essential, Protected and Multi-Arch. A version or relation field
/// that does not parse is kept as it stands: refusing such a control file is the caller's
/// business (dpkg refuses it).
fn normalize(name: &str, value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    match name {
        "Package" => Some(value.to_ascii_lowercase()),
        "Essential" | "Protected" | "Multi-Arch" => {
            Some(value.to_ascii_lowercase()).filter(|v| v != "no")
        }
        "Priority" => Some(normalize_priority(value)),
        "Version" => Some(Version::parse(value).map_or(value.to_string(), |v| v.to_string())),
        "Replaces" | "Provides" | "Depends" | "Pre-Depends" | "Recommends" | "Suggests"
        | "Breaks" | "Conflicts" | "Enhances" => {
            Some(parse_relations(value).map_or(value.to_string(), |r| relations_field(&r)))
        }
        _ => Some(value.to_string()),
    }
}

/// dpkg knows six priorities and writes them in lowercase; any other it keeps as written.
fn normalize_priority(value: &str) -> String {
    const PRIORITIES: [&str; 6] =
        ["required", "important", "standard", "optional", "extra", "unknown"];
    PRIORITIES
        .iter()
        .find(|p| p.eq_ignore_ascii_case(value))
        .map_or(value.to_string(), |p| p.to_string())
}

/// The status file: stanzas sorted as dpkg writes them (by name, then arch), each followed by a
/// blank line.
pub fn write_status(stanzas: &[&Stanza]) -> Vec<u8> {
    let mut sorted = stanzas.to_vec();
    let key = |s: &Stanza| {
        (
            s.get("Package").unwrap_or("").to_ascii_lowercase(),
            s.get("Architecture").unwrap_or("").to_string(),
        )
    };
    sorted.sort_by_cached_key(|s| key(s));
    let mut out = Vec::new();
    for stanza in sorted {
        stanza.write_to(&mut out);
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpkg::format::{deb822, oracle};

    const H: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn status_words_are_dpkgs() {
        for (want, w) in WANTS {
            for (flag, f) in FLAGS {
                for (state, s) in STATES {
                    let text = format!("{w} {f} {s}");
                    let status = StatusField::parse(&text).unwrap();
                    assert_eq!(status, StatusField { want, flag, state });
                    assert_eq!(status.to_string(), text);
                }
            }
        }
        for bad in [
            "",
            "install",
            "install ok",
            "install ok installed x",
            "Install ok installed",
            "inst ok installed",
            "install ok unpackedx",
        ] {
            assert!(StatusField::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn conffiles_field_reads_back_what_it_writes() {
        let value = format!("\n /etc/a {H}\n /etc/b c newconffile\n /etc/old {H} obsolete\n /etc/r {H} remove-on-upgrade\n /etc/o r {H} obsolete remove-on-upgrade");
        let conffiles = parse_conffiles_field(&value).unwrap();
        let c = |path: &str, hash: &str, obsolete, remove_on_upgrade| Conffile {
            path: path.into(),
            hash: hash.into(),
            obsolete,
            remove_on_upgrade,
        };
        assert_eq!(
            conffiles,
            vec![
                c("/etc/a", H, false, false),
                c("/etc/b c", "newconffile", false, false),
                c("/etc/old", H, true, false),
                c("/etc/r", H, false, true),
                c("/etc/o r", H, true, true),
            ]
        );
        assert_eq!(conffiles_field(&conffiles), value);
        assert_eq!(parse_conffiles_field("").unwrap(), vec![]);
        for bad in [
            format!("\n/etc/a {H}"),
            "\n /etc/a".to_string(),
            "\n /etc/a 0123".to_string(),
            format!("\n /etc/a {}", H.to_uppercase()),
            format!("\n etc/a {H}"),
            format!("\n /etc/../a {H}"),
            format!("\n /. {H}"),
            format!("\n  {H}"),
            format!("\n /etc/a {H} frob"),
        ] {
            assert!(parse_conffiles_field(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn packages_are_validated_and_unique() {
        let text = "Package: A\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n\n\
                    Package: lib\nStatus: install ok unpacked\nArchitecture: i386\nMulti-Arch: same\nVersion: 2\n\n\
                    Package: lib\nStatus: install ok unpacked\nArchitecture: amd64\nMulti-Arch: same\nVersion: 2\n\n\
                    Package: gone\nStatus: purge ok not-installed\n";
        let p = packages(deb822::parse(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            p.iter().map(Package::info_name).collect::<Vec<_>>(),
            ["a", "lib:i386", "lib:amd64", "gone"]
        );
        assert_eq!((p[3].arch.as_str(), p[3].version.as_str()), ("", ""));
        // A selection (not installed) beside an installed instance is no second instance.
        let selection = "Package: a\nStatus: install ok installed\nArchitecture: amd64\n\nPackage: a\nStatus: install ok not-installed\nArchitecture: i386\n";
        assert_eq!(packages(deb822::parse(selection.as_bytes()).unwrap()).unwrap().len(), 2);
        assert_eq!(p[1].status.to_string(), "install ok unpacked");
        for (bad, line, why) in [
            ("Package: a/b\n", 1, "bad package name"),
            ("Package: ../x\n", 1, "bad package name"),
            ("Version: 1\n", 1, "without Package"),
            ("Package: a\nArchitecture: a/b\n", 1, "architecture"),
            ("Package: a\nMulti-Arch: same\nArchitecture: all\n", 1, "Multi-Arch"),
            ("Package: a\nStatus: install ok\n", 1, "state"),
            ("Package: a\nConffiles:\n /etc/../x newconffile\n", 1, "Conffiles"),
            ("Package: a\nArchitecture: amd64\n\nPackage: A\nArchitecture: amd64\n", 4, "second stanza"),
            ("Package: a\nStatus: install ok installed\nArchitecture: amd64\n\nPackage: a\nStatus: install ok unpacked\nArchitecture: i386\n", 5, "Multi-Arch: same"),
            ("Package: a\nStatus: install ok installed\nArchitecture: amd64\nMulti-Arch: same\n\nPackage: a\nStatus: install ok config-files\nArchitecture: i386\n", 6, "Multi-Arch: same"),
        ] {
            let e = packages(deb822::parse(bad.as_bytes()).unwrap()).unwrap_err();
            assert_eq!(e.line, line, "{bad:?}: {e}");
            assert!(e.reason.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn status_stanza_orders_and_drops_fields_as_dpkg() {
        let control = deb822::parse(b"Description: d\nX-A: 1\nVersion: 1\nPackage: Foo\nStatus: purge ok installed\nConffiles:\n /x newconffile\nEssential: no\nSize: 3\nArchitecture: all\nX-B:\nX-C: c\n").unwrap().remove(0);
        let status = StatusField::parse("install ok unpacked").unwrap();
        let conffiles = [Conffile {
            path: "/etc/a".into(),
            hash: H.into(),
            obsolete: false,
            remove_on_upgrade: false,
        }];
        let stanza = status_stanza(&control, &status, &conffiles, Some("0:0.9"));
        let names: Vec<_> = stanza.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Package",
                "Status",
                "Architecture",
                "Version",
                "Config-Version",
                "Conffiles",
                "Description",
                "X-A",
                "X-B",
                "X-C"
            ]
        );
        assert_eq!(stanza.get("Package"), Some("foo"));
        assert_eq!(stanza.get("Status"), Some("install ok unpacked"));
        assert_eq!(stanza.get("Config-Version"), Some("0.9"), "as dpkg prints versions");
        assert_eq!(stanza.get("Conffiles"), Some(format!("\n /etc/a {H}").as_str()));
    }

    /// Two installed instances of one name, not both Multi-Arch: same, are refused here as
    /// dpkg-query refuses them; a full status file with both Multi-Arch: same is read by both.
    #[test]
    fn instances_are_coinstallable_as_dpkg_requires() {
        let root = oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        let stanza = |arch: &str, same: bool, state: &str| {
            let multi_arch = if same { "Multi-Arch: same\n" } else { "" };
            format!("Package: a\nStatus: install ok {state}\nArchitecture: {arch}\n{multi_arch}Version: 1\nMaintainer: m\nDescription: d\n")
        };
        let refused = [
            [stanza("amd64", false, "installed"), stanza("i386", false, "unpacked")],
            [stanza("amd64", true, "installed"), stanza("i386", false, "config-files")],
            [stanza("amd64", false, "installed"), stanza("i386", true, "installed")],
        ];
        let accepted = [stanza("amd64", true, "installed"), stanza("i386", true, "unpacked")];
        for (pair, ok) in refused.iter().map(|p| (p, false)).chain([(&accepted, true)]) {
            let text = pair.join("\n");
            assert_eq!(packages(deb822::parse(text.as_bytes()).unwrap()).is_ok(), ok, "{text}");
            std::fs::write(admin.join("status"), &text).unwrap();
            let dpkg = std::process::Command::new("dpkg-query")
                .arg(format!("--admindir={}", admin.display()))
                .arg("-W")
                .output()
                .unwrap();
            assert_eq!(dpkg.status.success(), ok, "{text}");
        }
    }

    /// A status file of 30,000 packages is read, checked for duplicates and written back, each
    /// in one pass (deb822's own test reads 100,000 stanzas; this one stays quick in a debug build).
    #[test]
    fn thirty_thousand_packages_read_and_write_back() {
        let mut text = String::new();
        for i in (0..30_000).rev() {
            text.push_str(&format!("Package: p{i:06}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.{i}\nConffiles:\n /etc/p{i} {H}\n\n"));
        }
        let stanzas = deb822::parse(text.as_bytes()).unwrap();
        let packages = packages(stanzas).unwrap();
        assert_eq!(packages.len(), 30_000);
        let written = write_status(&packages.iter().map(|p| &p.stanza).collect::<Vec<_>>());
        let first = deb822::parse(&written).unwrap().remove(0);
        assert_eq!(first.get("Package"), Some("p000000"));
        assert_eq!(written.len(), text.len());
    }

    #[test]
    fn write_status_sorts_by_name_then_arch() {
        let stanzas = deb822::parse(
            b"Package: b\n\nPackage: a\nArchitecture: i386\n\nPackage: a\nArchitecture: amd64\n",
        )
        .unwrap();
        let refs: Vec<&Stanza> = stanzas.iter().collect();
        assert_eq!(
            String::from_utf8(write_status(&refs)).unwrap(),
            "Package: a\nArchitecture: amd64\n\nPackage: a\nArchitecture: i386\n\nPackage: b\n\n"
        );
    }

    /// A status file written here, read by dpkg-query, field by field as this module reads it.
    #[test]
    fn dpkg_query_reads_the_status_file_as_we_do() {
        let text = format!("Package: zed\nStatus: install ok installed\nMaintainer: m\nArchitecture: all\nVersion: 1:2.0-3\nConffiles:\n /etc/z b {H}\n /etc/old {H} obsolete\nDescription: z\n long\n\n\
                    Package: lib\nStatus: install reinstreq half-installed\nMaintainer: m\nArchitecture: i386\nMulti-Arch: same\nVersion: 2~rc1\nDescription: l\n\n\
                    Package: lib\nStatus: hold ok unpacked\nMaintainer: m\nArchitecture: amd64\nMulti-Arch: same\nVersion: 2~rc1\nConffiles:\n /etc/l newconffile\nDescription: l\n\n\
                    Package: gone\nStatus: deinstall ok config-files\nMaintainer: m\nArchitecture: amd64\nVersion: 0.1\nConffiles:\n /etc/g {H}\nDescription: g\n");
        let stanzas = deb822::parse(text.as_bytes()).unwrap();
        let root = oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        std::fs::write(admin.join("status"), write_status(&stanzas.iter().collect::<Vec<_>>()))
            .unwrap();
        let ours: Vec<String> = packages(stanzas)
            .unwrap()
            .iter()
            .map(|p| {
                let conffiles =
                    parse_conffiles_field(p.stanza.get("Conffiles").unwrap_or("")).unwrap();
                let conffiles: Vec<String> = conffiles
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {}{}",
                            c.path.display(),
                            c.hash,
                            if c.obsolete { " obsolete" } else { "" }
                        )
                    })
                    .collect();
                format!(
                    "{} {} {} {} [{}]",
                    p.info_name(),
                    p.arch,
                    p.version,
                    p.status,
                    conffiles.join(",")
                )
            })
            .collect();
        let format = "${binary:Package} ${Architecture} ${Version} ${Status} [${Conffiles}]\n";
        let theirs = oracle::query(&admin, &["-W", &format!("-f={format}")]);
        // dpkg-query prints each conffile on a line of its own after a space; ours joined by ','.
        let theirs = theirs.replace("[ ", "[").replace("\n ", ",");
        let mut theirs: Vec<&str> = theirs.lines().collect();
        theirs.sort();
        let mut ours = ours;
        ours.sort();
        assert_eq!(ours, theirs);
    }

    /// The stanza built here for a control file is the one dpkg --unpack writes, field for field
    /// and in the same order, byte for byte once written: names and values dpkg normalizes
    /// (package name, version, relations, priority, booleans, Multi-Arch), fields it drops, and
    /// its new conffiles ("newconffile", a remove-on-upgrade one flagged so).
    #[test]
    fn status_stanza_is_what_dpkg_unpack_writes() {
        let controls = [
            "Description: a test\n with a long part\n .\n and more\nX-Custom: hello\nVersion: 1.0-1\n\
             Depends: libc6 (>= 2.3) | foo, bar\nPackage: Hello-Pkg\nMaintainer: Me <me@example.org>\n\
             Architecture: amd64\nEssential: no\nPriority: Optional\nMulti-Arch: Same\nInstalled-Size: 12\n\
             Section: misc\nXb-Other: x\nFilename: pool/x.deb\nProvides: virt (= 1)\nSource: hello\nBugs: b\nOrigin: o\n",
            "Package: hello-pkg\nVersion: 0:1.0-1\nArchitecture: amd64\nMaintainer: m\ndepends: libc6 (>=2.3)|foo,bar\n\
             Breaks: x (<< 2), y:any\nConflicts: z (< 1)\nReplaces: Old-Pkg (1.0)\nRecommends:\nEnhances: e:amd64 (>> 1:0)\n\
             Essential: yes\nProtected: No\nDescription: d\nPre-Depends: a(>= 01:1~)\nSize: 10\nMD5sum: x\n",
        ];
        for control in controls {
            let dir = tempfile::tempdir().unwrap();
            let conffiles = "/etc/hello.conf\nremove-on-upgrade /etc/gone.conf\n";
            let deb = oracle::build(
                dir.path(),
                control,
                Some(conffiles),
                &[("etc/hello.conf", "hi\n"), ("usr/bin/hello", "bin\n")],
            );
            let root = oracle::root();
            oracle::run(
                std::process::Command::new("dpkg")
                    .arg(format!("--root={}", root.path().display()))
                    .args(["--force-depends", "--force-conflicts", "--force-breaks", "--unpack"])
                    .arg(&deb),
            );
            let written = std::fs::read(root.path().join("var/lib/dpkg/status")).unwrap();
            let theirs = deb822::parse(&written).unwrap();
            let control = deb822::parse(control.as_bytes()).unwrap().remove(0);
            let status = StatusField::parse("install ok unpacked").unwrap();
            let conffiles: Vec<Conffile> =
                crate::dpkg::format::list::parse_conffiles_member(conffiles.as_bytes())
                    .unwrap()
                    .into_iter()
                    .map(|c| Conffile {
                        path: c.path,
                        hash: NEW_CONFFILE.into(),
                        obsolete: false,
                        remove_on_upgrade: c.remove_on_upgrade,
                    })
                    .collect();
            let ours = status_stanza(&control, &status, &conffiles, None);
            assert_eq!(theirs.len(), 1);
            assert_eq!(ours.fields, theirs[0].fields);
            assert_eq!(
                String::from_utf8(write_status(&[&ours])).unwrap(),
                String::from_utf8(written).unwrap()
            );
        }
    }

    /// On an upgrade, dpkg --unpack keeps the installed version's conffile hashes, marks the
    /// conffiles the new version drops obsolete and records the old version as Config-Version:
    /// the stanza built here from those is the one it writes.
    #[test]
    fn status_stanza_is_what_dpkg_unpack_writes_on_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let root = oracle::root();
        let dpkg = |args: &[&str], deb: &std::path::Path| {
            oracle::run(
                std::process::Command::new("dpkg")
                    .arg(format!("--root={}", root.path().display()))
                    .args(args)
                    .arg(deb),
            );
        };
        let control = |v: &str| {
            format!("Package: up\nVersion: {v}\nArchitecture: all\nMaintainer: m\nDescription: d\n")
        };
        let old = oracle::build(
            dir.path(),
            &control("1.0"),
            Some("/etc/a\n/etc/b\n"),
            &[("etc/a", "a1\n"), ("etc/b", "b\n")],
        );
        dpkg(&["--install"], &old);
        std::fs::write(root.path().join("etc/a"), "edited by the admin\n").unwrap();
        let new =
            oracle::build(dir.path(), &control("2.0"), Some("/etc/a\n"), &[("etc/a", "a2\n")]);
        dpkg(&["--unpack"], &new);
        let written = std::fs::read(root.path().join("var/lib/dpkg/status")).unwrap();

        let installed = packages(deb822::parse(&written).unwrap()).unwrap();
        let md5 = |text: &str| {
            let path = dir.path().join("md5-input");
            std::fs::write(&path, text).unwrap();
            oracle::run(std::process::Command::new("md5sum").arg(&path))[..32].to_string()
        };
        let conffiles = [
            Conffile {
                path: "/etc/a".into(),
                hash: md5("a1\n"),
                obsolete: false,
                remove_on_upgrade: false,
            },
            Conffile {
                path: "/etc/b".into(),
                hash: md5("b\n"),
                obsolete: true,
                remove_on_upgrade: false,
            },
        ];
        let control = deb822::parse(control("2.0").as_bytes()).unwrap().remove(0);
        let ours = status_stanza(
            &control,
            &StatusField::parse("install ok unpacked").unwrap(),
            &conffiles,
            Some("1.0"),
        );
        assert_eq!(ours.fields, installed[0].stanza.fields);
        assert_eq!(
            String::from_utf8(write_status(&[&ours])).unwrap(),
            String::from_utf8(written).unwrap()
        );
    }
}
