//! dpkg's versions and relation fields: lib/dpkg/parsehelp.c parseversion, lib/dpkg/version.c
//! verrevcmp, lib/dpkg/fields.c f_dependency, lib/dpkg/dump.c varbufdependency.
//!
//! Versions are parsed strictly (what dpkg only warns about in a status file, a version not
//! starting with a digit or holding other characters than its syntax allows, is an error here),
//! so that a version printed back can never break the field it stands in. Comparing is linear
//! in the versions' lengths, with no recursion.

use super::{is_space, shown, valid_arch, valid_package_name};
use std::cmp::Ordering;
use std::fmt;

/// A version: `[epoch:]upstream[-revision]`.
#[derive(Debug, Clone)]
pub struct Version {
    pub epoch: u32,
    pub upstream: String,
    /// Empty when there is none.
    pub revision: String,
}

impl Version {
    /// Parses a version as dpkg does, its surrounding blanks ignored, an epoch of at most
    /// i32::MAX (dpkg's INT_MAX), and dpkg's warnings taken as errors.
    pub fn parse(s: &str) -> Result<Version, String> {
        let bad = |why: &str| format!("version '{}': {why}", shown(s));
        let s = s.trim_matches([' ', '\t']);
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s.contains(is_space) {
            return Err(bad("embedded spaces"));
        }
        let (epoch, rest) = match s.split_once(':') {
            Some((epoch, rest)) => (parse_epoch(epoch).map_err(bad)?, rest),
            None => (0, s),
        };
        if rest.is_empty() {
            return Err(bad("nothing after the colon"));
        }
        let (upstream, revision) = match rest.rsplit_once('-') {
            Some((_, "")) => return Err(bad("empty revision")),
            Some((upstream, revision)) => (upstream, revision),
            None => (rest, ""),
        };
        if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("the upstream part does not start with a digit"));
        }
        if !upstream.bytes().all(|b| b.is_ascii_alphanumeric() || b".-+~:".contains(&b)) {
            return Err(bad("bad character in the upstream part"));
        }
        if !revision.bytes().all(|b| b.is_ascii_alphanumeric() || b".+~".contains(&b)) {
            return Err(bad("bad character in the revision"));
        }
        Ok(Version { epoch, upstream: upstream.to_string(), revision: revision.to_string() })
    }
}

fn parse_epoch(epoch: &str) -> Result<u32, &'static str> {
    if epoch.is_empty() {
        return Err("empty epoch");
    }
    if !epoch.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the epoch is not a number");
    }
    epoch.parse::<u32>().ok().filter(|&e| e <= i32::MAX as u32).ok_or("the epoch is too big")
}

/// As dpkg prints it (vdew_nonambig): the epoch when it is not 0 or the rest holds a ':', the
/// revision when there is one.
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.epoch != 0 || self.upstream.contains(':') || self.revision.contains(':') {
            write!(f, "{}:", self.epoch)?;
        }
        f.write_str(&self.upstream)?;
        if !self.revision.is_empty() {
            write!(f, "-{}", self.revision)?;
        }
        Ok(())
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| verrevcmp(&self.upstream, &other.upstream))
            .then_with(|| verrevcmp(&self.revision, &other.revision))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Equal as dpkg compares them: "1.0" and "1.00" are one version, as `dpkg --compare-versions`
/// says.
impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

/// dpkg's order of a non-digit character: '~' before the end, the end before letters, letters
/// before the other characters.
fn order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(b'~') => -1,
        Some(c) => i32::from(c) + 256,
    }
}

/// lib/dpkg/version.c verrevcmp: alternating runs of non-digits (compared by [`order`]) and of
/// digits (compared as numbers, of any length).
fn verrevcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let digit = |s: &[u8], k: usize| s.get(k).is_some_and(u8::is_ascii_digit);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !digit(a, i)) || (j < b.len() && !digit(b, j)) {
            let (ac, bc) = (order(a.get(i).copied()), order(b.get(j).copied()));
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while digit(a, i) && digit(b, j) {
            first_diff = first_diff.then(a[i].cmp(&b[j]));
            i += 1;
            j += 1;
        }
        if digit(a, i) {
            return Ordering::Greater;
        }
        if digit(b, j) {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

/// A relation's operator: `<<`, `<=`, `=`, `>=`, `>>` (dpkg reads the obsolete `<` as `<=`
/// and `>` as `>=`, and a bare version as `=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

impl Op {
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            Op::Lt => ordering == Ordering::Less,
            Op::Le => ordering != Ordering::Greater,
            Op::Eq => ordering == Ordering::Equal,
            Op::Ge => ordering != Ordering::Less,
            Op::Gt => ordering == Ordering::Greater,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Lt => "<<",
            Op::Le => "<=",
            Op::Eq => "=",
            Op::Ge => ">=",
            Op::Gt => ">>",
        })
    }
}

/// One alternative of a relation field: `name[:arch] [(op version)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// Lowercased, as dpkg keeps it.
    pub name: String,
    pub arch: Option<String>,
    pub constraint: Option<(Op, Version)>,
}

impl Relation {
    /// Whether the package `name` at `version` satisfies this relation (its architecture
    /// qualifier is the caller's business).
    pub fn satisfied_by(&self, name: &str, version: &Version) -> bool {
        self.name.eq_ignore_ascii_case(name)
            && self.constraint.as_ref().is_none_or(|(op, wanted)| op.holds(version.cmp(wanted)))
    }
}

/// As dpkg writes it back: `name[:arch] (op version)`.
impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(arch) = &self.arch {
            write!(f, ":{arch}")?;
        }
        if let Some((op, version)) = &self.constraint {
            write!(f, " ({op} {version})")?;
        }
        Ok(())
    }
}

/// A relation field (Depends, Conflicts, ...): ", "-separated groups of " | " alternatives, as
/// lib/dpkg/fields.c f_dependency reads them. An empty value is no relation.
pub fn parse_relations(value: &str) -> Result<Vec<Vec<Relation>>, String> {
    parse_relations_with(value, &mut |_| {})
}

/// [`parse_relations`], handing `warn` what dpkg warns about in a field it accepts: the obsolete
/// `<` and `>`, a version without an operator, a version that starts with a character other
/// than a letter or digit.
pub fn parse_relations_with(
    value: &str,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<Vec<Relation>>, String> {
    let mut groups = Vec::new();
    let mut p = Cursor { s: value.as_bytes(), i: 0 };
    if value.is_empty() {
        return Ok(groups);
    }
    loop {
        let mut group = Vec::new();
        loop {
            group.push(
                relation(&mut p, warn).map_err(|e| format!("relation '{}': {e}", shown(value)))?,
            );
            match p.peek() {
                None | Some(b',') => break,
                Some(b'|') => {
                    p.i += 1;
                    p.skip_spaces();
                }
                Some(_) => {
                    return Err(format!(
                        "relation '{}': syntax error after '{}'",
                        shown(value),
                        group[group.len() - 1].name
                    ))
                }
            }
        }
        groups.push(group);
        if p.peek().is_none() {
            return Ok(groups);
        }
        p.i += 1;
        p.skip_spaces();
    }
}

/// Relations written back as dpkg writes them.
pub fn relations_field(groups: &[Vec<Relation>]) -> String {
    let group =
        |g: &Vec<Relation>| g.iter().map(Relation::to_string).collect::<Vec<_>>().join(" | ");
    groups.iter().map(group).collect::<Vec<_>>().join(", ")
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| is_space(char::from(c))) {
            self.i += 1;
        }
    }

    /// The bytes up to (not including) the first that is a space or in `stops`.
    fn word(&mut self, stops: &[u8]) -> &str {
        let start = self.i;
        while self.peek().is_some_and(|c| !is_space(char::from(c)) && !stops.contains(&c)) {
            self.i += 1;
        }
        // Stops and spaces are ASCII: the cut is on a character boundary.
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or("")
    }
}

fn relation(p: &mut Cursor, warn: &mut dyn FnMut(String)) -> Result<Relation, String> {
    let name = p.word(b":(,|").to_ascii_lowercase();
    if !valid_package_name(&name) {
        return Err(format!("bad package name '{}'", shown(name)));
    }
    let arch = if p.peek() == Some(b':') {
        p.i += 1;
        let arch = p.word(b"(,|").to_string();
        if !valid_arch(&arch) {
            return Err(format!("bad architecture '{}'", shown(arch)));
        }
        Some(arch)
    } else {
        None
    };
    p.skip_spaces();
    let constraint = if p.peek() == Some(b'(') { Some(constraint(p, &name, warn)?) } else { None };
    Ok(Relation { name, arch, constraint })
}

/// `(op version)`, the '(' next; `name`, the package it constrains, for the warnings.
fn constraint(
    p: &mut Cursor,
    name: &str,
    warn: &mut dyn FnMut(String),
) -> Result<(Op, Version), String> {
    p.i += 1;
    p.skip_spaces();
    let two = (p.peek(), p.s.get(p.i + 1).copied());
    let (op, len) = match two {
        (Some(b'<'), Some(b'<')) => (Op::Lt, 2),
        (Some(b'>'), Some(b'>')) => (Op::Gt, 2),
        (Some(b'<'), Some(b'=')) => (Op::Le, 2),
        (Some(b'>'), Some(b'=')) => (Op::Ge, 2),
        (Some(b'<'), Some(b'>')) | (Some(b'>'), Some(b'<')) => return Err("bad operator".into()),
        (Some(c @ (b'<' | b'>')), _) => {
            let c = char::from(c);
            warn(format!(
                "reference to '{name}': '{c}' is obsolete, use '{c}=' or '{c}{c}' instead"
            ));
            (if c == '<' { Op::Le } else { Op::Ge }, 1)
        }
        (Some(b'='), _) => (Op::Eq, 1),
        _ => {
            warn(format!("reference to '{name}': implicit exact match on version number, suggest using '=' instead"));
            (Op::Eq, 0)
        }
    };
    p.i += len;
    if p.peek().is_some_and(|c| !is_space(char::from(c)) && !c.is_ascii_alphanumeric()) {
        warn(format!(
            "reference to '{name}': version value starts with non-alphanumeric, suggest adding a space"
        ));
    }
    p.skip_spaces();
    let version = p.word(b"()").to_string();
    p.skip_spaces();
    match p.peek() {
        None => return Err("unterminated version".into()),
        Some(b')') => p.i += 1,
        Some(c) => return Err(format!("'{}' instead of ')'", char::from(c))),
    }
    p.skip_spaces();
    Ok((op, Version::parse(&version)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Versions whose order is easy to get wrong: '~', epochs, revisions, letters against digits
    /// and against other characters, leading zeros, long digit runs.
    const TRICKY: [&str; 30] = [
        "1.0~~",
        "1.0~~a",
        "1.0~",
        "1.0~rc1",
        "1.0",
        "1.00",
        "1.0-0",
        "1.0-1",
        "1.0-1~bpo1",
        "1.0-1.1",
        "1.0-1+b1",
        "1.0a",
        "1.0+",
        "1.0.",
        "1.0+dfsg",
        "1.0.1",
        "1:0.1",
        "1:1.0-1",
        "2:0",
        "0:1.0",
        "10",
        "9",
        "009",
        "1.2.3.4.5.6",
        "99999999999999999999999",
        "99999999999999999999998",
        "1:2:3",
        "1a-b",
        "1.0-a~",
        "1.0-a",
    ];

    #[test]
    fn parses_and_prints_as_dpkg() {
        let cases = [
            ("1.0", 0, "1.0", "", "1.0"),
            (" 0:1.0-1 ", 0, "1.0", "1", "1.0-1"),
            ("01:2", 1, "2", "", "1:2"),
            ("1.0-2-3", 0, "1.0-2", "3", "1.0-2-3"),
            ("1:2:3-4", 1, "2:3", "4", "1:2:3-4"),
            ("2147483647:1", 2_147_483_647, "1", "", "2147483647:1"),
        ];
        for (text, epoch, upstream, revision, shown) in cases {
            let version = v(text);
            assert_eq!(
                (version.epoch, version.upstream.as_str(), version.revision.as_str()),
                (epoch, upstream, revision),
                "{text}"
            );
            assert_eq!(version.to_string(), shown);
        }
        for bad in [
            "",
            " ",
            "1 2",
            "a1",
            ":1",
            "1:",
            "x:1",
            "-1:1",
            "+1:1",
            "2147483648:1",
            "1.0-",
            "-1",
            "1_0",
            "1.0-a_b",
            "1.0-a:b",
            "1,0",
            "1(0",
            "1\n",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// Every pair of [`TRICKY`] ordered as `dpkg --compare-versions` orders it.
    #[test]
    fn orders_as_dpkg_compare_versions() {
        for (i, a) in TRICKY.iter().enumerate() {
            for b in &TRICKY[i..] {
                let ours = v(a).cmp(&v(b));
                let op = match ours {
                    Ordering::Less => "lt",
                    Ordering::Equal => "eq",
                    Ordering::Greater => "gt",
                };
                let agrees = Command::new("dpkg")
                    .args(["--compare-versions", a, op, b])
                    .status()
                    .unwrap()
                    .success();
                assert!(agrees, "we say {a} {op} {b}, dpkg does not");
                assert_eq!(v(b).cmp(&v(a)), ours.reverse(), "{a} {b}");
            }
        }
        assert_eq!(v("1.0"), v("1.00"));
        assert_eq!(v("0:1.0"), v("1.0"));
    }

    #[test]
    fn relations_read_and_print_as_dpkg() {
        let groups = parse_relations(
            "libc6 (>=2.3)|Foo:any,  bar ( << 1:2-3 ),baz (1.0), qux (< 1), q (> 2), r:amd64 (= 1)",
        )
        .unwrap();
        assert_eq!(relations_field(&groups), "libc6 (>= 2.3) | foo:any, bar (<< 1:2-3), baz (= 1.0), qux (<= 1), q (>= 2), r:amd64 (= 1)");
        assert_eq!(
            groups[0][1],
            Relation { name: "foo".into(), arch: Some("any".into()), constraint: None }
        );
        assert_eq!(parse_relations("").unwrap(), Vec::<Vec<Relation>>::new());
        for bad in [
            " ",
            "a,",
            "a |",
            "a b",
            "a (>= 1",
            "a (>= 1 2)",
            "a (<> 1)",
            "a (>= )",
            "a (>= x)",
            "a/b",
            "a:",
            "a:b_c",
            "(>= 1)",
            "a,,b",
            "a (>= 1) x",
        ] {
            assert!(parse_relations(bad).is_err(), "{bad:?}");
        }
    }

    /// satisfied_by says what `dpkg --compare-versions CANDIDATE OP WANTED` says.
    #[test]
    fn satisfied_by_agrees_with_dpkg() {
        for op in ["<<", "<=", "=", ">=", ">>"] {
            for wanted in ["1.0", "1:0.9", "1.0~rc1"] {
                let relation = &parse_relations(&format!("pkg ({op} {wanted})")).unwrap()[0][0];
                for candidate in ["1.0", "1.00", "1.0~rc1", "1.0-1", "0.9", "1:0.9", "2"] {
                    let dpkg = Command::new("dpkg")
                        .args(["--compare-versions", candidate, op, wanted])
                        .status()
                        .unwrap()
                        .success();
                    assert_eq!(
                        relation.satisfied_by("pkg", &v(candidate)),
                        dpkg,
                        "{candidate} {op} {wanted}"
                    );
                    assert!(!relation.satisfied_by("other", &v(candidate)));
                }
            }
        }
        assert!(parse_relations("PKG").unwrap()[0][0].satisfied_by("pkg", &v("0")));
    }
}
