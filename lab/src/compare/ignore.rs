//! The differences to leave out: what two runs of the same installer differ in anyway (a
//! machine id, ldconfig's cache, logs), so that what is left is what the two installers did
//! differently.
//!
//! An ignore file has one pattern a line; `#` starts a comment (a whole line, or after white
//! space), and blank lines are skipped. A pattern is a glob on a difference's subject (a path
//! from the roots' top, without a leading `/`, or a path-like name below a database file such as
//! `var/lib/dpkg/status/PKG:ARCH/FIELD`): `*` is any run of characters but `/`, `**` any run at
//! all, `**/` any run of whole directories (none included: `a/**/b` covers `a/b`), `?` one
//! character but `/`, and `\` takes the next character as it is (`\*`, `\ `,
//! `\#`). A pattern that names a directory covers everything below it too. After the pattern
//! and white space, a comma-separated list of aspects (`content,size`, `mtime`, `line`) limits it
//! to those; without one, every aspect of the subject is ignored.

use super::difference::Difference;
use super::error::Error;
use std::path::Path;

#[derive(Debug, Clone, Default)]
pub struct Ignore {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    /// The pattern with its escapes resolved: each token a literal byte or a wildcard.
    pattern: Vec<Token>,
    /// The aspects it is limited to; empty for all.
    aspects: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Byte(u8),
    /// `?`
    One,
    /// `*`
    Run,
    /// `**`
    Any,
    /// `**/`: nothing, or a run ending with `/`.
    AnyDirs,
}

impl Ignore {
    /// Adds the rules of the ignore file at `path`.
    pub fn load(&mut self, path: &Path) -> Result<(), Error> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        self.add(&text, path)
    }

    /// Adds the rules of `text`, read from `path` (for messages).
    pub fn add(&mut self, text: &[u8], path: &Path) -> Result<(), Error> {
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            let bad = |message: &str| Error::Ignore {
                path: path.to_path_buf(),
                line: n + 1,
                message: message.to_string(),
            };
            let (pattern, rest) = tokens(line).map_err(bad)?;
            let rest =
                String::from_utf8(rest.to_vec()).map_err(|_| bad("aspects are not UTF-8"))?;
            let rest = rest.split('#').next().unwrap_or_default().trim();
            if pattern.is_empty() {
                if !rest.is_empty() {
                    return Err(bad("aspects without a pattern"));
                }
                continue;
            }
            let aspects = if rest.is_empty() {
                Vec::new()
            } else {
                rest.split(',').map(|a| a.trim().to_string()).collect()
            };
            if aspects.iter().any(|a| a.is_empty() || a.contains(char::is_whitespace)) {
                return Err(bad("aspects are a comma-separated list, such as `content,size`"));
            }
            self.rules.push(Rule { pattern, aspects });
        }
        Ok(())
    }

    /// True when a rule covers the difference.
    pub fn covers(&self, d: &Difference) -> bool {
        self.rules.iter().any(|r| {
            (r.aspects.is_empty() || r.aspects.iter().any(|a| a == d.aspect))
                && ancestors(d.subject.as_bytes()).any(|s| matches(&r.pattern, s))
        })
    }
}

/// The pattern at the start of `line` (leading white space skipped, a leading `/` dropped), up
/// to white space or a comment, and the rest of the line.
fn tokens(line: &[u8]) -> Result<(Vec<Token>, &[u8]), &'static str> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(line.len());
    let mut i = start + usize::from(line.get(start) == Some(&b'/'));
    let mut out = Vec::new();
    while let Some(&b) = line.get(i) {
        match b {
            b'#' | b' ' | b'\t' | b'\r' => break,
            b'\\' => {
                let &next = line.get(i + 1).ok_or("a pattern ends with a lone `\\`")?;
                out.push(Token::Byte(next));
                i += 1;
            }
            b'?' => out.push(Token::One),
            b'*' if line.get(i + 1) == Some(&b'*') && line.get(i + 2) == Some(&b'/') => {
                out.push(Token::AnyDirs);
                i += 2;
            }
            b'*' if line.get(i + 1) == Some(&b'*') => {
                out.push(Token::Any);
                i += 1;
            }
            b'*' => out.push(Token::Run),
            b => out.push(Token::Byte(b)),
        }
        i += 1;
    }
    Ok((out, &line[i..]))
}

/// `subject`, then each of its parents (`a/b/c`, `a/b`, `a`).
fn ancestors(subject: &[u8]) -> impl Iterator<Item = &[u8]> {
    let cuts = subject.iter().enumerate().filter(|(_, &b)| b == b'/').map(|(i, _)| i);
    std::iter::once(subject).chain(cuts.rev().map(move |i| &subject[..i]))
}

/// Whether `pattern` matches all of `text`: the classic table of which prefixes of the pattern
/// match each prefix of the text, one row at a time (time pattern x text, no backtracking).
fn matches(pattern: &[Token], text: &[u8]) -> bool {
    // row[j]: the first j tokens match the text read so far. inside[j]: the first j tokens
    // match a prefix of it and the `**/` at j has taken the rest, not yet ended by a `/`.
    let mut row = vec![false; pattern.len() + 1];
    let mut inside = vec![false; pattern.len()];
    row[0] = true;
    for j in 0..pattern.len() {
        row[j + 1] = row[j] && matches!(pattern[j], Token::Run | Token::Any | Token::AnyDirs);
    }
    for &c in text {
        let mut next = vec![false; pattern.len() + 1];
        let mut next_inside = vec![false; pattern.len()];
        for (j, token) in pattern.iter().enumerate() {
            next[j + 1] = match token {
                Token::Byte(b) => row[j] && *b == c,
                Token::One => row[j] && c != b'/',
                Token::Run => (row[j + 1] && c != b'/') || next[j],
                Token::Any => row[j + 1] || next[j],
                Token::AnyDirs => {
                    next_inside[j] = row[j] || inside[j];
                    (c == b'/' && next_inside[j]) || next[j]
                }
            };
        }
        row = next;
        inside = next_inside;
    }
    row[pattern.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Ignore {
        let mut i = Ignore::default();
        i.add(text.as_bytes(), Path::new("test.ignore")).unwrap();
        i
    }

    fn d(subject: &str, aspect: &'static str) -> Difference {
        Difference::new(subject.into(), aspect, String::new(), String::new())
    }

    #[test]
    fn globs_match_within_and_across_directories() {
        let i = rules("# noise\n\nusr/lib/*/aux  # a comment\nvar/**/cache.bin\n/etc/machine-id\n");
        assert!(i.covers(&d("usr/lib/x86_64-linux-gnu/aux", "content")));
        assert!(!i.covers(&d("usr/lib/a/b/aux", "content")), "* stops at /");
        assert!(i.covers(&d("var/cache/apt/cache.bin", "size")));
        assert!(i.covers(&d("var/cache.bin", "size")), "**/ may be empty");
        assert!(!i.covers(&d("var/xcache.bin", "size")), "**/ takes whole directories");
        assert!(i.covers(&d("var/a/b/cache.bin", "size")));
        assert!(i.covers(&d("etc/machine-id", "content")), "a leading / is dropped");
        assert!(!i.covers(&d("etc/machine-id2", "content")));
    }

    #[test]
    fn a_directory_covers_what_is_below_it_and_aspects_limit_a_rule() {
        let i = rules("var/log\nusr/lib/python3/**/*.pyc content,size\n");
        assert!(i.covers(&d("var/log/apt/term.log", "content")));
        assert!(!i.covers(&d("var/logs", "content")));
        assert!(i.covers(&d("usr/lib/python3/dist-packages/__pycache__/a.pyc", "size")));
        assert!(!i.covers(&d("usr/lib/python3/dist-packages/__pycache__/a.pyc", "path")));
    }

    #[test]
    fn escapes_and_bad_lines() {
        let i = rules("a\\ b\\*\n");
        assert!(i.covers(&d("a b*", "mode")));
        assert!(!i.covers(&d("a bc", "mode")));
        let mut i = Ignore::default();
        let e = i.add(b"ok\nx\\\n", Path::new("f")).map(|_| ()).unwrap_err().to_string();
        assert!(e.starts_with("f:2: "), "{e}");
        let e = i.add(b"x a b\n", Path::new("f")).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("comma-separated"), "{e}");
    }
}
