//! Control files and dpkg's status file: stanzas of `Name: value` fields, as dpkg's
//! lib/dpkg/parse.c reads them and lib/dpkg/dump.c writes them.
//!
//! The parser is dpkg's strict one: a whitespace-only line, a line without ':', an empty field
//! name, a name starting with '-' or of one character, a duplicate field (names compared without
//! case), an empty field at the very end and a missing final newline are errors, each naming
//! its line. So are a NUL and a ^Z (0x1a) anywhere: dpkg ends a field name or a value line at a
//! ^Z and a field at a NUL, so it would read such a stanza otherwise than as it is written
//! (found by the `dpkg_db` fuzz target, which has dpkg-query read what it writes). It works line
//! by line in one pass, so its time is linear in the input; the caller bounds the input's size.

use super::{is_space, lines, shown, ParseError};
use std::collections::HashSet;

/// One field. `value` is dpkg's: the first line's text after the ':' and its leading
/// whitespace, each continuation line appended as '\n' + the line verbatim (its leading space
/// kept), trailing whitespace of the whole trimmed. So "Conffiles:\n /etc/a 0123..." has value
/// "\n /etc/a 0123...".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub value: String,
}

/// One stanza (paragraph), its fields in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stanza {
    pub fields: Vec<Field>,
    /// The line of its first field (1-based).
    pub line: usize,
}

impl Stanza {
    /// The value of the field `name`, compared without case as dpkg compares field names.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| f.value.as_str())
    }

    /// The stanza as dpkg writes it: "Name: value" lines ("Name:" alone before a value that
    /// starts on the next line), no trailing blank line.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        for field in &self.fields {
            out.extend_from_slice(field.name.as_bytes());
            out.push(b':');
            if !field.value.starts_with('\n') {
                out.push(b' ');
            }
            out.extend_from_slice(field.value.as_bytes());
            out.push(b'\n');
        }
    }
}

/// The stanzas of a control or status file. UTF-8 is required (the error names the line).
pub fn parse(bytes: &[u8]) -> Result<Vec<Stanza>, ParseError> {
    let mut stanzas = Vec::new();
    let mut current: Option<(Stanza, HashSet<String>)> = None;
    let last = bytes.iter().filter(|&&b| b == b'\n').count();
    for line in lines(bytes) {
        let (n, line) = line?;
        if line.contains(['\0', '\x1a']) {
            return Err(ParseError::new(n, "a NUL or ^Z byte, which dpkg reads otherwise"));
        }
        if line.is_empty() {
            stanzas.extend(current.take().map(finish));
        } else if line.starts_with(is_space) {
            let Some(field) = current.as_mut().and_then(|(s, _)| s.fields.last_mut()) else {
                return Err(ParseError::new(n, "a line starting with whitespace begins a stanza"));
            };
            if line.trim_start_matches(is_space).is_empty() {
                return Err(ParseError::new(
                    n,
                    format!("whitespace-only line in the value of field '{}'", field.name),
                ));
            }
            field.value.push('\n');
            field.value.push_str(line);
        } else {
            let (name, value) = field_line(n, line)?;
            // lib/dpkg/parse.c: the end of the input right after a field's ':' and blanks.
            if value.is_empty() && n == last {
                return Err(ParseError::new(
                    n,
                    format!("end of file before value of field '{name}' (missing final newline)"),
                ));
            }
            let (stanza, seen) = current
                .get_or_insert_with(|| (Stanza { fields: Vec::new(), line: n }, HashSet::new()));
            if !seen.insert(name.to_ascii_lowercase()) {
                return Err(ParseError::new(n, format!("duplicate field '{name}'")));
            }
            if let Some(last) = stanza.fields.last_mut() {
                trim_end(&mut last.value);
            }
            stanza.fields.push(Field { name: name.to_string(), value: value.to_string() });
        }
    }
    stanzas.extend(current.map(finish));
    Ok(stanzas)
}

/// A "Name: value" line split as dpkg splits it: the name ends at whitespace or ':', spaces may
/// stand before the ':', the value starts after the whitespace that follows it.
fn field_line(n: usize, line: &str) -> Result<(&str, &str), ParseError> {
    let end = line.find(|c| is_space(c) || c == ':').unwrap_or(line.len());
    let name = &line[..end];
    if name.is_empty() {
        return Err(ParseError::new(n, "empty field name"));
    }
    if name.starts_with('-') || name.len() < 2 {
        return Err(ParseError::new(n, format!("bad field name '{}'", shown(name))));
    }
    let Some(value) = line[end..].trim_start_matches(is_space).strip_prefix(':') else {
        return Err(ParseError::new(
            n,
            format!("field name '{}' is not followed by ':'", shown(name)),
        ));
    };
    Ok((name, value.trim_start_matches(is_space)))
}

fn finish((mut stanza, _): (Stanza, HashSet<String>)) -> Stanza {
    if let Some(last) = stanza.fields.last_mut() {
        trim_end(&mut last.value);
    }
    stanza
}

fn trim_end(value: &mut String) {
    value.truncate(value.trim_end_matches(is_space).len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, value: &str) -> Field {
        Field { name: name.into(), value: value.into() }
    }

    #[test]
    fn reads_stanzas_fields_and_continuations_as_dpkg_does() {
        let text = "Package: a\nStatus:  install ok installed \nConffiles:\n /etc/a 0123\n /etc/b newconffile \nDescription: short  \n long\n .\n\n\nPackage : b\nX-Y:\nX-Z: z\n";
        let s = parse(text.as_bytes()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].line, 1);
        assert_eq!(
            s[0].fields,
            vec![
                field("Package", "a"),
                field("Status", "install ok installed"),
                field("Conffiles", "\n /etc/a 0123\n /etc/b newconffile"),
                field("Description", "short  \n long\n ."),
            ]
        );
        assert_eq!(s[1].line, 11);
        assert_eq!(s[1].fields, vec![field("Package", "b"), field("X-Y", ""), field("X-Z", "z")]);
        assert_eq!(s[0].get("conffiles"), Some("\n /etc/a 0123\n /etc/b newconffile"));
        assert_eq!(parse(b"").unwrap(), vec![]);
        assert_eq!(parse(b"\n\n").unwrap(), vec![]);
    }

    #[test]
    fn refuses_what_dpkg_refuses_naming_the_line() {
        let cases: [(&[u8], usize, &str); 13] = [
            (b"Package: a\n x\n \n", 3, "whitespace-only"),
            (b" x\n", 1, "begins a stanza"),
            (b"Package: a\nno colon\n", 2, "not followed by ':'"),
            (b"Package: a\n: v\n", 2, "empty field name"),
            (b"Package: a\n-X: v\n", 2, "bad field name"),
            (b"X: v\n", 1, "bad field name"),
            (b"Package: a\npackage: b\n", 2, "duplicate"),
            (b"Package: a\nB: \xff\n", 2, "UTF-8"),
            (b"Package: a", 1, "final newline"),
            (b"Package: a\n\n\t\n", 3, "begins a stanza"),
            (b"Package: a\nX-Y: \t\n", 2, "end of file before value of field 'X-Y'"),
            (b"Package: a\nX\x1aY: 1\n", 2, "^Z"),
            (b"Package: a\nX-Y: a\0b\n", 2, "NUL"),
        ];
        crate::dpkg::format::oracle::assert_refuses(parse, &cases);
        // A hostile megabyte line makes a short message.
        let huge = format!("Package: a\n{}\n", "x".repeat(1 << 20));
        assert!(parse(huge.as_bytes()).unwrap_err().reason.len() < 300);
        // The same field in two stanzas is no duplicate.
        assert_eq!(parse(b"Package: a\n\nPackage: b\n").unwrap().len(), 2);
    }

    /// What this parser refuses, dpkg-query refuses too in a status file (but a whitespace-only
    /// line in a value, which dpkg only warns about and keeps; no file dpkg writes has one).
    #[test]
    fn dpkg_refuses_these_status_files_too() {
        let root = crate::dpkg::format::oracle::root();
        let admin = root.path().join("var/lib/dpkg");
        for bad in [
            &b"Package: a\nno colon\n"[..],
            b"Package: a\n: v\n",
            b"Package: a\n-X: v\n",
            b"Package: a\nX: v\n",
            b"Package: a\npackage: b\n",
            b"Package: a\nX-A: 1\nx-a: 2\n",
            b"Package: a\nStatus: install ok installed",
            b"Package: a\n\n \n",
            b"Package: a\nX-Y:\n",
            b"Package: a\nX\x1aY: 1\nX-Z: 1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
            std::fs::write(admin.join("status"), bad).unwrap();
            let out = std::process::Command::new("dpkg-query")
                .arg(format!("--admindir={}", admin.display()))
                .arg("-W")
                .output()
                .unwrap();
            assert!(!out.status.success(), "dpkg-query accepts {bad:?}");
        }
        let good = b"Package: a\nStatus: install ok installed\nX-Y : 1\nMaintainer: m\nVersion: 1\nArchitecture: all\nDescription: d\n\n\n\nPackage: b\n";
        assert_eq!(parse(good).unwrap()[0].get("x-y"), Some("1"));
        std::fs::write(admin.join("status"), good).unwrap();
        assert_eq!(
            crate::dpkg::format::oracle::query(&admin, &["-W", "-f=${Package} ${X-Y}\n"]),
            "a 1\n"
        );
    }

    #[test]
    fn writes_what_it_reads() {
        let text = "Package: a\nConffiles:\n /etc/a 0123\nDescription: short\n long\nEmpty: \n\nPackage: b\n";
        let stanzas = parse(text.as_bytes()).unwrap();
        let mut out = Vec::new();
        for (i, s) in stanzas.iter().enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            s.write_to(&mut out);
        }
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn a_hundred_thousand_stanzas_parse_in_one_pass() {
        let mut text = Vec::new();
        for i in 0..100_000 {
            text.extend_from_slice(
                format!("Package: p{i}\nStatus: install ok installed\nDescription: d\n more\n\n")
                    .as_bytes(),
            );
        }
        let stanzas = parse(&text).unwrap();
        assert_eq!(stanzas.len(), 100_000);
        assert_eq!(stanzas[99_999].line, 99_999 * 5 + 1);
        // A huge line is one field, no slower than its bytes.
        let huge = format!("Package: a\nDescription: {}\n", "x".repeat(8 << 20));
        assert_eq!(parse(huge.as_bytes()).unwrap()[0].get("description").unwrap().len(), 8 << 20);
    }
}
