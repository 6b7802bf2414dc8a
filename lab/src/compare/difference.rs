//! One difference between two roots, and how it is shown: one line of text, or one JSON object.
//!
//! Every difference has a subject, a path-like name of what differs (`usr/bin/perl`,
//! `var/lib/dpkg/status/libc6:amd64/Version`), an aspect (what about it differs: `mode`,
//! `content`, `field`...) and what each root holds, absent where it has nothing. The subject is
//! what the ignore patterns match, so it is always a path from the roots' top, written as text
//! that fits one line whatever bytes the name holds ([`escape`]).

use serde::Serialize;

/// The roots' two sides, in the order of the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub subject: String,
    pub aspect: &'static str,
    /// What root A holds; `None` where it has nothing of the kind.
    pub a: Option<String>,
    pub b: Option<String>,
}

impl Difference {
    pub fn new(subject: String, aspect: &'static str, a: String, b: String) -> Difference {
        Difference { subject, aspect, a: Some(a), b: Some(b) }
    }

    /// Something only `side` holds.
    pub fn only(subject: String, aspect: &'static str, side: Side, what: String) -> Difference {
        let (a, b) = match side {
            Side::A => (Some(what), None),
            Side::B => (None, Some(what)),
        };
        Difference { subject, aspect, a, b }
    }

    /// The difference as one line: `SUBJECT: ASPECT: X in A, Y in B`, or
    /// `SUBJECT: ASPECT only in A: X` when one side has nothing.
    pub fn line(&self) -> String {
        match (&self.a, &self.b) {
            (Some(a), Some(b)) => format!("{}: {}: {a} in A, {b} in B", self.subject, self.aspect),
            (Some(a), None) => format!("{}: {} only in A: {a}", self.subject, self.aspect),
            (None, Some(b)) => format!("{}: {} only in B: {b}", self.subject, self.aspect),
            (None, None) => format!("{}: {}", self.subject, self.aspect),
        }
    }
}

/// `bytes` as text for one line: UTF-8 as it is, but a backslash as `\\`, a tab, a line feed or
/// a carriage return as `\t`, `\n`, `\r`, and any other control character or byte that is not
/// UTF-8 as `\xNN`. Names in a root are bytes and may hold a line feed; the report must still be
/// one difference per line, and two different names never look alike.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A path below a root as a subject: escaped, and the root itself as `.`.
pub fn subject(path: &[u8]) -> String {
    if path.is_empty() {
        ".".to_string()
    } else {
        escape(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_names_stay_on_one_line_and_apart() {
        assert_eq!(escape(b"usr/bin/perl"), "usr/bin/perl");
        assert_eq!(escape("ünï/文件".as_bytes()), "ünï/文件");
        assert_eq!(escape(b"a\nb\tc\\d"), "a\\nb\\tc\\\\d");
        assert_eq!(escape(b"\xff\x01"), "\\xff\\x01");
        assert_ne!(escape(b"a\\x01"), escape(b"a\x01"), "a backslash is escaped too");
        assert_eq!(subject(b""), ".");
    }

    #[test]
    fn a_line_says_what_each_side_holds() {
        let d = Difference::new("etc/x".into(), "mode", "0644".into(), "0600".into());
        assert_eq!(d.line(), "etc/x: mode: 0644 in A, 0600 in B");
        let d = Difference::only("etc/y".into(), "path", Side::B, "file".into());
        assert_eq!(d.line(), "etc/y: path only in B: file");
    }
}
