//! `unpack-compare`: every difference between two roots, tree and dpkg database, so that a root
//! an installer made can be held to the one the real dpkg made from the same start (issue 27:
//! apt with `unpack-dpkg` against apt with dpkg, fixtures/apt-compare.sh).
//!
//! The tree ([`walk`], [`tree`]): every path, its type, mode, owner, size, content (MD5), link
//! count, symlink target and device numbers, and the mtime of what a package lists. The
//! database ([`database`]): `status` stanza by stanza and field by field, every file of `info/`,
//! `triggers/` and `updates/`, `diversions`, `statoverride` and `arch`. [`ignore`] leaves out
//! what two runs of the same installer differ in anyway.
//!
//! This module owns the comparison and nothing else: it reads both roots and never writes,
//! follows no symlink, leaves neither root (both are untrusted: see [`walk`]), runs nothing from
//! them, and never panics on what it finds; a file it cannot read is an error naming it, never a
//! difference or a silence.

pub mod database;
pub mod difference;
pub mod error;
pub mod ignore;
pub mod tree;
pub mod walk;

use database::Database;
use difference::Difference;
use error::Error;
use ignore::Ignore;
use std::collections::BTreeSet;
use std::path::Path;
use walk::Tree;

/// What a comparison found: the differences no rule covers, sorted, and how many were covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub differences: Vec<Difference>,
    pub ignored: usize,
}

/// Compares the roots `a` and `b`, leaving out what `ignore` covers. The two roots are read at
/// once, on a thread each.
pub fn compare(a: &Path, b: &Path, ignore: &Ignore) -> Result<Comparison, Error> {
    let (sa, sb) = std::thread::scope(|s| {
        let other = s.spawn(|| read_root(b));
        let own = read_root(a);
        (own, other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let ((ta, da), (tb, db)) = (sa?, sb?);
    let mut listed = listed(&ta, &da);
    listed.append(&mut self::listed(&tb, &db));
    let mut all = tree::differences(&ta, &tb, &listed, database::owns);
    all.extend(database::differences(&da, &db));
    let total = all.len();
    let mut differences: Vec<Difference> = all.into_iter().filter(|d| !ignore.covers(d)).collect();
    // By subject, then as the lines read: each subject's differences together, A's before B's.
    differences.sort_by_cached_key(|d| (d.subject.clone(), d.line()));
    Ok(Comparison { ignored: total - differences.len(), differences })
}

fn read_root(root: &Path) -> Result<(Tree, Database), Error> {
    let tree = Tree::walk(root)?;
    let db = Database::read(&tree)?;
    Ok((tree, db))
}

/// The paths below `tree`'s root of everything its packages list, resolved in it.
fn listed(tree: &Tree, db: &Database) -> BTreeSet<Vec<u8>> {
    db.lists()
        .flat_map(|list| list.split(|&b| b == b'\n'))
        .filter(|line| !line.is_empty())
        .filter_map(|line| tree::resolve(tree, line))
        .collect()
}
