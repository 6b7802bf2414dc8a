//! A binary package's control file as `dpkg --unpack` parses it: lib/dpkg/parse.c with
//! `pdb_parse_binary` (one stanza, the fields only dpkg's database may hold refused, versions
//! read strictly) and lib/dpkg/fields.c, field by field.
//!
//! Why: a field dpkg's parser refuses, once copied into `status`, makes every later dpkg,
//! dpkg-query and apt run on the root fail ("parsing file .../status"). So a control file is
//! refused here whenever dpkg would refuse it, with dpkg's reason, before anything of the
//! package is written; what dpkg only warns about is accepted and its warning handed back; and
//! the obsolete fields dpkg folds into others (`Recommended`, `Optional`, `Class`, `Revision`)
//! are folded the same way into the stanza returned, which is the one the status file gets.
//!
//! Pure, like every format: bytes in, a stanza out. It must never look at a root (the checks
//! against what a root holds, the architecture among them, are `dpkg/admission.rs`'s), and it
//! reads its input once, line by line.
//!
//! Where it is stricter than dpkg (documented in docs/database.md): the `Architecture` field is
//! required and must be a valid name (dpkg warns, then refuses the package for not matching the
//! system), a revision folded in from `Revision` must make a valid version (dpkg writes what it
//! gets), and a `Provides` with an operator other than `=` is a warning, as in dpkg 1.21 (1.22
//! refuses it).

use super::deb822::{self, Field, Stanza};
use super::version::{parse_relations_with, Op, Version};
use super::{is_space, shown, valid_arch, valid_package_name, ParseError};

/// A control file dpkg accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// Its one stanza as dpkg records it: the obsolete fields folded into their modern forms.
    pub stanza: Stanza,
    /// What dpkg would warn about, one sentence each, naming the field.
    pub warnings: Vec<String>,
}

/// The relation fields and whether each allows alternatives (`a | b`).
const RELATIONS: [(&str, bool); 9] = [
    ("Replaces", false),
    ("Provides", false),
    ("Depends", true),
    ("Pre-Depends", true),
    ("Recommends", true),
    ("Suggests", true),
    ("Breaks", false),
    ("Conflicts", false),
    ("Enhances", true),
];

/// The fields only dpkg's database holds: a control file with one is refused.
const DATABASE_ONLY: [&str; 4] =
    ["Status", "Config-Version", "Triggers-Pending", "Triggers-Awaited"];

/// The fields that describe an archive in a Packages file: allowed, but never empty, and all
/// with the same number of words.
const ARCHIVE_DETAILS: [&str; 4] = ["Filename", "Size", "MD5sum", "MSDOS-Filename"];

/// The obsolete fields dpkg reads as others (lib/dpkg/parse.c fieldinfos), with a warning.
const OBSOLETE: [(&str, &str); 6] = [
    ("Recommended", "Recommends"),
    ("Optional", "Suggests"),
    ("Class", "Priority"),
    ("Revision", "Version"),
    ("Package-Revision", "Version"),
    ("Package_Revision", "Version"),
];

/// Checks a control file as dpkg does: exactly one stanza (dpkg: "several package info entries
/// found, only one allowed"), each field by dpkg's rule. The error names the line and the field.
pub fn check(bytes: &[u8]) -> Result<Control, ParseError> {
    let mut stanzas = deb822::parse(bytes)?.into_iter();
    let Some(stanza) = stanzas.next() else {
        return Err(ParseError::new(1, "no package information (an empty control file)"));
    };
    if let Some(second) = stanzas.next() {
        return Err(ParseError::new(
            second.line,
            "several package info entries found, only one allowed",
        ));
    }
    check_stanza(stanza)
}

/// [`check`] of one stanza already parsed.
pub fn check_stanza(stanza: Stanza) -> Result<Control, ParseError> {
    let mut checker = Checker::default();
    let mut line = stanza.line;
    for field in &stanza.fields {
        checker.field(field).map_err(|e| ParseError::new(line, e))?;
        line += 1 + field.value.matches('\n').count();
    }
    checker.finish(stanza)
}

/// What the fields said so far.
#[derive(Default)]
struct Checker {
    warnings: Vec<String>,
    name: Option<String>,
    arch: Option<String>,
    multi_arch_same: bool,
    /// The version as the fields so far make it, obsolete revisions folded in.
    version: Option<Version>,
    /// Recommends and Recommended, Suggests and Optional: their non-empty values in order.
    recommends: Vec<String>,
    suggests: Vec<String>,
    /// The last non-empty Priority or Class.
    priority: Option<String>,
    /// The number of words of the first archive-details field.
    archive_words: Option<usize>,
}

impl Checker {
    fn field(&mut self, field: &Field) -> Result<(), String> {
        let (name, value) = (field.name.as_str(), field.value.as_str());
        let is = |known: &str| name.eq_ignore_ascii_case(known);
        if let Some(known) = DATABASE_ONLY.iter().find(|k| is(k)) {
            return Err(format!("value for '{known}' field not allowed in this context"));
        }
        if let Some((old, new)) = OBSOLETE.iter().find(|(o, _)| is(o)) {
            self.warnings.push(format!("obsolete '{old}' field used"));
            return self.obsolete(new, value);
        }
        if let Some((known, alternatives)) = RELATIONS.iter().find(|(k, _)| is(k)) {
            return self.relations(known, value, *alternatives);
        }
        if let Some(known) = ARCHIVE_DETAILS.iter().find(|k| is(k)) {
            return self.archive_details(known, value);
        }
        match name.to_ascii_lowercase().as_str() {
            "package" => {
                if !valid_package_name(value) {
                    return Err(format!(
                        "invalid package name in 'Package' field: '{}'",
                        shown(value)
                    ));
                }
                self.name = Some(value.to_ascii_lowercase());
            }
            "version" => {
                self.version = Some(
                    Version::parse(value)
                        .map_err(|e| format!("'Version' field value '{}': {e}", shown(value)))?,
                );
            }
            "architecture" => {
                if !valid_arch(value) {
                    return Err(format!(
                        "'{}' is not a valid architecture name in 'Architecture' field",
                        shown(value)
                    ));
                }
                self.arch = Some(value.to_string());
            }
            "essential" | "protected" if !value.is_empty() => {
                let which = if is("essential") { "Essential" } else { "Protected" };
                word(value, &["no", "yes"], false)
                    .map_err(|e| format!("boolean (yes/no) '{which}' field: {e}"))?;
            }
            "multi-arch" if !value.is_empty() => {
                let same =
                    word(value, &["no", "same", "allowed", "foreign"], false).map_err(|e| {
                        format!("quadstate (foreign/allowed/same/no) 'Multi-Arch' field: {e}")
                    })?;
                self.multi_arch_same = same == Some(1);
            }
            "priority" => self.priority(value, "Priority")?,
            "conffiles" => conffiles_field(value)?,
            _ => {}
        }
        Ok(())
    }

    /// An obsolete field, read as `new` reads it.
    fn obsolete(&mut self, new: &str, value: &str) -> Result<(), String> {
        match new {
            "Recommends" | "Suggests" => self.relations(new, value, true),
            "Priority" => self.priority(value, "Class"),
            _ => {
                // lib/dpkg/fields.c f_obs_revision: the value becomes the revision, a revision
                // already there joins the upstream part. A Version field after it starts over.
                if let (Some(version), false) = (self.version.as_mut(), value.is_empty()) {
                    if !version.revision.is_empty() {
                        version.upstream = format!("{}-{}", version.upstream, version.revision);
                    }
                    version.revision = value.to_string();
                    let folded = version.to_string();
                    Version::parse(&folded).map_err(|e| {
                        format!(
                            "the obsolete revision field makes the version '{}' invalid: {e}",
                            shown(&folded)
                        )
                    })?;
                }
                Ok(())
            }
        }
    }

    /// dpkg's priority words are matched at the start of the value without case, and nothing may
    /// follow one; any other word is kept as it stands. An empty value is ignored.
    fn priority(&mut self, value: &str, field: &str) -> Result<(), String> {
        if value.is_empty() {
            return Ok(());
        }
        const PRIORITIES: [&str; 6] =
            ["required", "important", "standard", "optional", "extra", "unknown"];
        word(value, &PRIORITIES, true).map_err(|e| format!("word in '{field}' field: {e}"))?;
        self.priority = Some(value.to_string());
        Ok(())
    }

    fn relations(&mut self, field: &str, value: &str, alternatives: bool) -> Result<(), String> {
        let warnings = &mut self.warnings;
        let mut warn = |w: String| warnings.push(format!("'{field}' field, {w}"));
        let groups =
            parse_relations_with(value, &mut warn).map_err(|e| format!("'{field}' field, {e}"))?;
        if !alternatives && groups.iter().any(|g| g.len() > 1) {
            return Err(format!("alternatives ('|') not allowed in '{field}' field"));
        }
        let inexact = groups
            .iter()
            .flatten()
            .any(|r| r.constraint.as_ref().is_some_and(|(op, _)| *op != Op::Eq));
        if field == "Provides" && inexact {
            self.warnings.push("only exact versions may be used for 'Provides' field".into());
        }
        match (field, value.is_empty()) {
            (_, true) => {}
            ("Recommends", _) => self.recommends.push(value.to_string()),
            ("Suggests", _) => self.suggests.push(value.to_string()),
            _ => {}
        }
        Ok(())
    }

    /// lib/dpkg/fields.c f_archives: never empty, and as many words as the first such field.
    fn archive_details(&mut self, field: &str, value: &str) -> Result<(), String> {
        if value.is_empty() {
            return Err(format!("empty archive details '{field}' field"));
        }
        let words = value.split(is_space).filter(|w| !w.is_empty()).count();
        match self.archive_words {
            None => self.archive_words = Some(words),
            Some(n) if words > n => {
                return Err(format!(
                    "too many values in archive details '{field}' field (compared to others)"
                ))
            }
            Some(n) if words < n => {
                return Err(format!(
                    "too few values in archive details '{field}' field (compared to others)"
                ))
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// The checks of the whole stanza (lib/dpkg/parse.c pkg_parse_verify), and the stanza with
    /// the obsolete fields folded in.
    fn finish(mut self, mut stanza: Stanza) -> Result<Control, ParseError> {
        let at = stanza.line;
        let bad = |why: &str| Err(ParseError::new(at, why.to_string()));
        if self.name.is_none() {
            return bad("missing 'Package' field");
        }
        let Some(version) = self.version.take() else {
            return bad("missing 'Version' field");
        };
        let Some(arch) = self.arch.take() else {
            return bad("missing 'Architecture' field");
        };
        if self.multi_arch_same && arch == "all" {
            return bad("package has 'Multi-Arch: same' field but is architecture 'all'");
        }
        for wanted in ["Description", "Maintainer"] {
            match stanza.get(wanted) {
                None => self.warnings.push(format!("missing '{wanted}' field")),
                Some("") => self.warnings.push(format!("empty value for '{wanted}' field")),
                Some(_) => {}
            }
        }
        stanza.fields.retain(|f| !OBSOLETE.iter().any(|(o, _)| f.name.eq_ignore_ascii_case(o)));
        set(&mut stanza, "Version", version.to_string());
        if let Some(priority) = self.priority {
            set(&mut stanza, "Priority", priority);
        }
        for (name, values) in [("Recommends", &self.recommends), ("Suggests", &self.suggests)] {
            if !values.is_empty() {
                set(&mut stanza, name, values.join(", "));
            }
        }
        Ok(Control { stanza, warnings: self.warnings })
    }
}

/// Sets field `name` of `stanza` (found without case) to `value`, or appends it.
fn set(stanza: &mut Stanza, name: &str, value: String) {
    match stanza.fields.iter_mut().find(|f| f.name.eq_ignore_ascii_case(name)) {
        Some(f) => f.value = value,
        None => stanza.fields.push(Field { name: name.to_string(), value }),
    }
}

/// dpkg's reading of a word of a table (lib/dpkg/fields.c parse_nv): the first entry the value
/// starts with, without case, and nothing after it but blanks. `Ok(None)`: no entry matched and
/// `other` allows any word (Priority).
fn word(value: &str, table: &[&str], other: bool) -> Result<Option<usize>, String> {
    let found = table
        .iter()
        .position(|w| value.get(..w.len()).is_some_and(|start| start.eq_ignore_ascii_case(w)));
    match found {
        Some(i) if !value[table[i].len()..].trim_start_matches(is_space).is_empty() => {
            Err("has trailing junk".into())
        }
        Some(i) => Ok(Some(i)),
        None if other => Ok(None),
        None => Err(format!("has invalid value '{}'", shown(value))),
    }
}

/// The `Conffiles` field as lib/dpkg/fields.c f_conffiles reads it, for its errors only (dpkg
/// then ignores the field: the status gets the `conffiles` member's list): every line starts
/// with a space and ends with a word, the hash, after a name of two bytes or more; `obsolete` and
/// `remove-on-upgrade` may follow the hash; the name, its leading `/` and `./` skipped, is not
/// empty.
fn conffiles_field(value: &str) -> Result<(), String> {
    for line in value.split('\n').filter(|l| !l.is_empty()) {
        let Some(line) = line.strip_prefix(' ') else {
            let first = line.chars().next().unwrap_or(' ');
            return Err(format!(
                "value for 'Conffiles' field has line starting with non-space '{}'",
                shown(first.to_string())
            ));
        };
        let malformed =
            || format!("value for 'Conffiles' field has malformed line '{}'", shown(line));
        let b = line.as_bytes();
        // conffvalue_lastword: the word between the last space before `from` and `from`; that
        // space may be neither among the line's first two bytes nor its last byte.
        let last_word = |from: usize| -> Option<(&[u8], usize)> {
            let space = b[..from].iter().rposition(|&c| c == b' ').filter(|_| from > 1)?;
            (space > 1 && space + 1 < b.len()).then(|| (&b[space + 1..from], space))
        };
        let (mut word, mut end) = last_word(b.len()).ok_or_else(malformed)?;
        for flag in [&b"remove-on-upgrade"[..], b"obsolete"] {
            if word == flag {
                (word, end) = last_word(end).ok_or_else(malformed)?;
            }
        }
        // path_skip_slash_dotslash, one byte at a time: the byte at `end` is a space.
        let mut start = 0;
        while start < end && (b[start] == b'/' || (b[start] == b'.' && b[start + 1] == b'/')) {
            start += 1;
        }
        if start >= end {
            return Err("root or empty directory listed as a conffile in 'Conffiles' field".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "Package: t\nVersion: 1.0\nArchitecture: all\nMaintainer: m\nDescription: d\n";

    fn with(extra: &str) -> Result<Control, ParseError> {
        check(format!("{BASE}{extra}").as_bytes())
    }

    /// Each of dpkg's refusals, by the words of its reason.
    #[test]
    fn refuses_what_dpkg_refuses_with_its_reason() {
        let cases = [
            ("Essential: maybe\n", "boolean (yes/no) 'Essential' field: has invalid value 'maybe'"),
            ("Essential: yesno\n", "has trailing junk"),
            ("Protected: no way\n", "'Protected' field: has trailing junk"),
            (
                "Multi-Arch: nonsense\n",
                "quadstate (foreign/allowed/same/no) 'Multi-Arch' field: has trailing junk",
            ),
            ("Multi-Arch: both\n", "has invalid value 'both'"),
            ("Priority: extra-important\n", "word in 'Priority' field: has trailing junk"),
            ("Class: optionalx\n", "word in 'Class' field: has trailing junk"),
            (
                "Status: install ok installed\n",
                "value for 'Status' field not allowed in this context",
            ),
            ("config-version: 1\n", "value for 'Config-Version' field not allowed"),
            ("Triggers-Pending: x\n", "'Triggers-Pending' field not allowed"),
            ("Triggers-Awaited:\nX-E: 1\n", "'Triggers-Awaited' field not allowed"),
            ("Conffiles: /etc/x 0123\n", "line starting with non-space '/'"),
            ("Conffiles:\n /etc/x\n", "malformed line '/etc/x'"),
            ("Conffiles:\n / 0123\n", "malformed line"),
            ("Conffiles:\n // 0123\n", "root or empty directory"),
            ("Conffiles:\n ./ 0123 obsolete\n", "root or empty directory"),
            ("Conffiles:\n\t/etc/x 0123\n", "non-space '\\011'"),
            ("Depends: foo (>= 1\n", "'Depends' field, relation 'foo (>= 1': unterminated version"),
            (
                "Depends: foo [amd64]\n",
                "'Depends' field, relation 'foo [amd64]': syntax error after 'foo'",
            ),
            ("Recommends: foo <!nocheck>\n", "syntax error after 'foo'"),
            ("Pre-Depends: a (>= x1)\n", "does not start with a digit"),
            ("Suggests: a b\n", "syntax error"),
            ("Enhances: a_b:\n", "bad architecture"),
            ("Conflicts: a | b\n", "alternatives ('|') not allowed in 'Conflicts' field"),
            ("Breaks: a | b\n", "alternatives ('|') not allowed in 'Breaks' field"),
            ("Provides: a | b\n", "alternatives ('|') not allowed in 'Provides' field"),
            ("Replaces: a | b\n", "alternatives ('|') not allowed in 'Replaces' field"),
            ("Optional: a (<> 1)\n", "'Suggests' field, relation 'a (<> 1)': bad operator"),
            ("Size:\nX-E: 1\n", "empty archive details 'Size' field"),
            ("Filename: a b\nSize: 1\n", "too few values in archive details 'Size' field"),
            ("MD5sum: x\nSize: 1 2\n", "too many values in archive details 'Size' field"),
            (
                "Multi-Arch: same\n",
                "package has 'Multi-Arch: same' field but is architecture 'all'",
            ),
            ("Revision: a b\n", "the obsolete revision field makes the version"),
            ("\nPackage: u\n", "several package info entries found, only one allowed"),
        ];
        for (extra, why) in cases {
            let e = with(extra).unwrap_err();
            assert!(e.reason.contains(why), "{extra:?}: {e}");
        }
        for (text, why) in [
            ("Version: 1\nArchitecture: all\n", "missing 'Package' field"),
            ("Package: t\nArchitecture: all\n", "missing 'Version' field"),
            ("Package: t\nVersion: 1\n", "missing 'Architecture' field"),
            ("Package: t/u\nVersion: 1\nArchitecture: all\n", "invalid package name"),
            ("Package: t\nVersion: x\nArchitecture: all\n", "'Version' field value 'x'"),
            ("Package: t\nVersion: 1\nArchitecture: am_d64\n", "not a valid architecture name"),
            ("\n\n", "no package information"),
        ] {
            let e = check(text.as_bytes()).unwrap_err();
            assert!(e.reason.contains(why), "{text:?}: {e}");
        }
        // The error names the line of the field.
        assert_eq!(with("X-A: 1\n Essential: no\nEssential: maybe\n").unwrap_err().line, 8);
    }

    #[test]
    fn accepts_what_dpkg_accepts_and_says_what_it_warns_about() {
        let ok = with(
            "Essential: YES\nProtected: No\nMulti-Arch: Foreign\nPriority: Optional\n\
             Depends: a (< 1), b (1.0)\nProvides: v (>= 1)\nReplaces: r:any (<< 2)\n\
             Conffiles:\n /etc/x 0123 obsolete\n etc/y z\n /. h\nFilename: a b\nSize: 1 2\n",
        )
        .unwrap();
        assert_eq!(ok.stanza.get("Essential"), Some("YES"));
        let warned = ok.warnings.join("\n");
        for w in [
            "'Depends' field, reference to 'a': '<' is obsolete, use '<=' or '<<' instead",
            "reference to 'b': implicit exact match on version number",
            "only exact versions may be used for 'Provides' field",
        ] {
            assert!(warned.contains(w), "{w}: {warned}");
        }
        assert!(with("Priority: opt\n").unwrap().warnings.is_empty(), "another priority word");
        assert!(
            with("Essential:\nMulti-Arch:\nPriority:\nDepends:\nX-E: 1\n").is_ok(),
            "empty values"
        );
        let bare = check(b"Package: t\nVersion: 1\nArchitecture: all\n").unwrap();
        assert_eq!(bare.warnings, ["missing 'Description' field", "missing 'Maintainer' field"]);
    }

    /// The obsolete fields become what dpkg writes for them (each run against dpkg in
    /// tests/refusals.rs): Recommended and Optional join Recommends and Suggests in their order,
    /// the last of Priority and Class wins, a Revision after Version becomes its revision.
    #[test]
    fn obsolete_fields_are_folded_as_dpkg_folds_them() {
        let c =
            with("Recommended: a (>= 1)\nOptional: b\nClass: Important\nRevision: 3\n").unwrap();
        let get = |n: &str| c.stanza.get(n).map(str::to_string);
        assert_eq!(get("Recommends").as_deref(), Some("a (>= 1)"));
        assert_eq!(get("Suggests").as_deref(), Some("b"));
        assert_eq!(get("Priority").as_deref(), Some("Important"));
        assert_eq!(get("Version").as_deref(), Some("1.0-3"));
        assert!(get("Recommended").is_none() && get("Revision").is_none());
        assert_eq!(c.warnings.iter().filter(|w| w.starts_with("obsolete")).count(), 4);
        let c = check(
            b"Package: t\nVersion: 1.0-2\nArchitecture: all\nRecommends: x\nRecommended: a\nPriority: optional\nClass: extra\nPackage-Revision: 3\n",
        )
        .unwrap();
        assert_eq!(c.stanza.get("Recommends"), Some("x, a"));
        assert_eq!(c.stanza.get("Priority"), Some("extra"));
        assert_eq!(c.stanza.get("Version"), Some("1.0-2-3"));
        let before =
            check(b"Package: t\nRevision: 3\nVersion: 1.0-2\nArchitecture: all\n").unwrap();
        assert_eq!(before.stanza.get("Version"), Some("1.0-2"));
    }
}
