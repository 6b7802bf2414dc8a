//! Two walked trees, entry by entry: what only one root has, and for a path both have, its type,
//! mode, owner, size, content, link count, symlink target, device numbers, whether a filesystem
//! is mounted on it, and the mtime where a package lists the path.
//!
//! The mtime is compared only for what a package lists (`var/lib/dpkg/info/*.list`), and never
//! for a directory: an unpacker sets a package file's mtime from its archive, so two unpackers
//! must agree on it, while what scripts make at configure time (`/etc/passwd`, caches) and a
//! directory's mtime (the moment its last entry came or went) bear the moment of the run. A
//! listed path is resolved as the root resolves it (`/bin/sh` is `usr/bin/sh` below a merged-
//! /usr root's `bin -> usr/bin`), from the walked entries alone, never through the filesystem.
//!
//! The database part ([`super::database`]) reads the content of dpkg's files itself and reports
//! what differs in it field by field and line by line; for those files this part compares the
//! metadata alone.

use super::difference::{subject, Difference, Side};
use super::walk::{Entry, Kind, Tree};
use std::collections::BTreeSet;

/// Linux's own limit on symlinks followed in one lookup.
const MAX_SYMLINKS: usize = 40;

/// Every difference between the trees `a` and `b`. `listed` holds the paths whose mtime counts;
/// `content_elsewhere` says which files' size and content another part compares.
pub fn differences(
    a: &Tree,
    b: &Tree,
    listed: &BTreeSet<Vec<u8>>,
    content_elsewhere: impl Fn(&[u8]) -> bool,
) -> Vec<Difference> {
    let mut out = Vec::new();
    for (path, ea) in &a.entries {
        match b.entries.get(path) {
            None => out.push(Difference::only(subject(path), "path", Side::A, summary(ea))),
            Some(eb) => {
                let content = !content_elsewhere(path);
                entry_differences(path, ea, eb, content, listed.contains(path), &mut out);
            }
        }
    }
    for (path, eb) in &b.entries {
        if !a.entries.contains_key(path) {
            out.push(Difference::only(subject(path), "path", Side::B, summary(eb)));
        }
    }
    out
}

/// What differs between two entries of one path.
fn entry_differences(
    path: &[u8],
    a: &Entry,
    b: &Entry,
    content: bool,
    listed: bool,
    out: &mut Vec<Difference>,
) {
    let mut differ = |aspect: &'static str, x: String, y: String| {
        if x != y {
            out.push(Difference::new(subject(path), aspect, x, y));
        }
    };
    if a.kind != b.kind {
        // Nothing else of two kinds of entry compares.
        differ("type", a.kind.name().to_string(), b.kind.name().to_string());
        return;
    }
    differ("mode", format!("{:04o}", a.mode), format!("{:04o}", b.mode));
    differ("owner", owner(a), owner(b));
    differ("mount", mount(a).to_string(), mount(b).to_string());
    if a.kind == Kind::Dir {
        return;
    }
    differ("links", a.nlink.to_string(), b.nlink.to_string());
    if content && a.kind == Kind::File {
        differ("size", a.size.to_string(), b.size.to_string());
        differ("content", md5(a), md5(b));
    }
    differ("target", target(a), target(b));
    differ("device", device(a), device(b));
    if listed {
        differ("mtime", mtime(a), mtime(b));
    }
}

/// One line for an entry only one root has.
fn summary(e: &Entry) -> String {
    let mut s = format!("{}, {:04o}, {}", e.kind.name(), e.mode, owner(e));
    match e.kind {
        Kind::File => s += &format!(", {} bytes", e.size),
        Kind::Symlink => s += &format!(" -> {}", target(e)),
        Kind::Char | Kind::Block => s += &format!(", {}", device(e)),
        _ => {}
    }
    s
}

fn owner(e: &Entry) -> String {
    format!("{}:{}", e.uid, e.gid)
}

fn mount(e: &Entry) -> &'static str {
    if e.mount {
        "a mount point (not walked)"
    } else {
        "not a mount point"
    }
}

fn md5(e: &Entry) -> String {
    e.md5.map(|h| h.iter().map(|b| format!("{b:02x}")).collect()).unwrap_or_default()
}

fn target(e: &Entry) -> String {
    e.target.as_deref().map(super::difference::escape).unwrap_or_default()
}

fn device(e: &Entry) -> String {
    format!("{},{}", e.device.0, e.device.1)
}

fn mtime(e: &Entry) -> String {
    format!("{}.{:09}", e.mtime.0, e.mtime.1)
}

/// Where the absolute `path` a package lists is in `tree`: the path below the root, every
/// directory on the way resolved through the tree's symlinks as the kernel would inside the
/// root (`/` and `..` stopping at the root), the last component itself not followed. `None` when
/// the way leads nowhere the tree has, or through more than 40 symlinks.
pub fn resolve(tree: &Tree, path: &[u8]) -> Option<Vec<u8>> {
    let mut todo: Vec<Vec<u8>> = components(path).rev().map(<[u8]>::to_vec).collect();
    let mut at: Vec<Vec<u8>> = Vec::new();
    let mut followed = 0;
    while let Some(name) = todo.pop() {
        match name.as_slice() {
            b"." => continue,
            b".." => {
                at.pop();
                continue;
            }
            _ => {}
        }
        at.push(name);
        if todo.is_empty() {
            break;
        }
        let here = at.join(&b'/');
        let entry = tree.entries.get(&here)?;
        if let Some(target) = &entry.target {
            followed += 1;
            if followed > MAX_SYMLINKS {
                return None;
            }
            at.pop();
            if target.starts_with(b"/") {
                at.clear();
            }
            todo.extend(components(target).rev().map(<[u8]>::to_vec));
        } else if entry.kind != Kind::Dir {
            return None;
        }
    }
    Some(at.join(&b'/'))
}

fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}
