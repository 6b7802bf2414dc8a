//! `--bootstrap`: a base system in one call, into a root whose dpkg database lists no package.
//!
//! In an empty root no maintainer script can run: there is no shell and no C library to run
//! one. So, as debootstrap does, the call has two stages, each a transaction of its own and
//! all-or-nothing at any crash:
//!
//! 1. **The first stage**: the merged-/usr layout (`bin` -> `usr/bin` and the others of
//!    debootstrap's table for the architecture: Debian's usr-is-merged refuses a root without
//!    it), an empty dpkg database if the root has none, and the files of the `Essential: yes`
//!    packages with everything they Pre-Depend and Depend on among the call's packages (the
//!    Essential ones alone have no libc6). No script runs and nothing is recorded: what
//!    debootstrap's first stage extracts.
//! 2. **The second stage**: every package of the call, with dpkg's database and the unpack
//!    phase's maintainer scripts, exactly as `unpack` in database mode (the first stage's files
//!    are nobody's in the database, so they are taken over as dpkg takes them over); then
//!    `chroot ROOT dpkg --configure -a` finishes the system.
//!
//! A crash or a failure in either stage leaves a root `--bootstrap` accepts again (after the
//! recovery every call starts with): the first stage's files belong to no package, and the call
//! redoes both stages. This module must never bootstrap a root whose database lists a package:
//! that is an upgrade, and the first stage would overwrite installed files behind dpkg's back.

use crate::control::ControlArchive;
use crate::dpkg::deb822::Stanza;
use crate::entry::{Entry, Kind};
use crate::error::{escape, Error, Result};
use crate::extract::Transaction;
use crate::root::{Pending, Root, Stamp};
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What the first stage needs to know of the call's packages.
pub(crate) struct Plan {
    /// The packages of the first stage, in the call's order, and their indices in the call.
    pub first: Vec<PathBuf>,
    pub first_indices: Vec<usize>,
    /// Their names, for the report.
    pub first_names: Vec<String>,
    /// The top-level directories that become symlinks into `usr/`.
    pub merged: Vec<&'static str>,
}

/// The biggest conffile whose bytes the first stage keeps for the second (which writes it
/// again as `NAME.dpkg-new`): conffiles are small files under `/etc`; a package with a bigger
/// one is read again.
const KEPT_CONFFILE: u64 = 1 << 20;

/// What the first stage wrote, kept for the second stage to *adopt*: a package whose files are
/// still as the first stage's commit left them (no maintainer script changed one, nothing
/// diverts or overrides one) has them taken as they are, claimed in the second transaction
/// without being decompressed, written, flushed or renamed again. The first stage's commit
/// made them durable with the same strategy. Anything else is read from its archive again,
/// as debootstrap's dpkg reads every package again.
#[derive(Default)]
pub(crate) struct FirstStage {
    /// By the package's index in the call.
    packages: HashMap<usize, Written>,
    /// The first stage's package number (its index in [`Plan::first`]) -> the call's.
    indices: Vec<usize>,
    /// The names of the packages the second stage adopted, for the report.
    pub adopted: Vec<String>,
}

/// One package the first stage wrote.
pub(crate) struct Written {
    pub control: ControlArchive,
    /// Every entry in archive order, with a conffile's bytes.
    pub entries: Vec<(Entry, Option<Vec<u8>>)>,
    /// What each entry that is not a directory was after the first stage's commit, by entry.
    pub stamps: Vec<Option<Stamp>>,
    conffiles: Vec<PathBuf>,
}

impl FirstStage {
    pub fn new(plan: &Plan) -> FirstStage {
        FirstStage { indices: plan.first_indices.clone(), ..FirstStage::default() }
    }

    /// The first stage's package number `first` starts.
    pub fn begin(&mut self, first: usize, control: &ControlArchive) {
        let conffiles = match control.members.iter().find(|m| m.name == "conffiles") {
            Some(m) => crate::dpkg::list::parse_conffiles_member(&m.bytes)
                .map(|c| c.into_iter().map(|c| c.path).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let index = self.indices.get(first).copied().unwrap_or(usize::MAX);
        self.packages.insert(
            index,
            Written {
                control: control.clone(),
                entries: Vec::new(),
                stamps: Vec::new(),
                conffiles,
            },
        );
    }

    /// Whether the bytes of `entry`, of the package begun last, are to be kept: a conffile's.
    pub fn keeps(&self, first: usize, entry: &Entry) -> bool {
        let Some(w) = self.indices.get(first).and_then(|i| self.packages.get(i)) else {
            return false;
        };
        matches!(entry.kind, Kind::File { size } if size <= KEPT_CONFFILE)
            && w.conffiles.iter().any(|c| c.strip_prefix("/") == Ok(entry.path.as_path()))
    }

    /// An entry of the first stage's package number `first`, written.
    pub fn entry(&mut self, first: usize, entry: Entry, bytes: Option<Vec<u8>>) {
        if let Some(w) = self.indices.get(first).and_then(|i| self.packages.get_mut(i)) {
            w.entries.push((entry, bytes));
        }
    }

    /// After the first stage's commit: what each written name is now.
    pub fn stamp(&mut self, root: &mut Root) {
        // The directory cache still marks the trees the first stage made as new, whose
        // children are only what it wrote: look on disk, as the second stage will.
        root.forget_dirs();
        for w in self.packages.values_mut() {
            w.stamps = w
                .entries
                .iter()
                .map(|(e, _)| {
                    (e.kind != Kind::Dir)
                        .then(|| root.stamp(&e.path, &|_| Pending::Nothing))
                        .flatten()
                        .map(|(_, s)| s)
                })
                .collect();
        }
    }

    /// The call's package `index` as the first stage wrote it, if the first stage wrote it and
    /// from the same control archive.
    pub fn written(&self, index: usize, control: &ControlArchive) -> Option<&Written> {
        self.packages.get(&index).filter(|w| w.control == *control)
    }

    /// Whether the first stage wrote the call's package `index`.
    pub fn wrote(&self, index: usize) -> bool {
        self.packages.contains_key(&index)
    }

    /// By the call's package index: whether the first stage wrote it.
    pub fn wrote_all(&self, count: usize) -> Vec<bool> {
        (0..count).map(|i| self.wrote(i)).collect()
    }
}

/// Reads every package's control file and plans the first stage.
pub(crate) fn plan(packages: &[PathBuf]) -> Result<Plan> {
    let mut stanzas = Vec::with_capacity(packages.len());
    for package in packages {
        let ControlArchive { text, .. } = crate::pipeline::read_control(package)?;
        stanzas.push(crate::dpkg::admin::control_stanza(package, &text)?);
    }
    let first: Vec<usize> = first_stage(&stanzas);
    let arch = stanzas.iter().filter_map(|s| s.get("Architecture")).find(|a| *a != "all");
    Ok(Plan {
        first: first.iter().map(|&i| packages[i].clone()).collect(),
        first_indices: first.clone(),
        first_names: first
            .iter()
            .map(|&i| stanzas[i].get("Package").unwrap_or_default().to_string())
            .collect(),
        merged: merged_dirs(arch),
    })
}

/// The indices of the `Essential: yes` packages and, transitively, of the packages among
/// `stanzas` that their Pre-Depends and Depends name: of each `a | b` the first alternative the
/// call has (by name, or by a Provides of the call), the others being the admin's choice that
/// the second stage installs anyway. A dependency the call lacks is left out: the first stage
/// only extracts files, and the second does not check dependencies (dpkg's `--force-depends`).
fn first_stage(stanzas: &[Stanza]) -> Vec<usize> {
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, s) in stanzas.iter().enumerate() {
        by_name.entry(s.get("Package").unwrap_or_default()).or_insert(i);
    }
    for (i, s) in stanzas.iter().enumerate() {
        for name in
            s.get("Provides").into_iter().flat_map(|p| p.split(',')).filter_map(relation_name)
        {
            by_name.entry(name).or_insert(i);
        }
    }
    let mut chosen = vec![false; stanzas.len()];
    let mut todo: Vec<usize> = (0..stanzas.len())
        .filter(|&i| stanzas[i].get("Essential").is_some_and(|e| e.eq_ignore_ascii_case("yes")))
        .collect();
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut chosen[i], true) {
            continue;
        }
        let relations = ["Pre-Depends", "Depends"].into_iter().filter_map(|f| stanzas[i].get(f));
        for group in relations.flat_map(|r| r.split(',')) {
            if let Some(&j) =
                group.split('|').filter_map(relation_name).find_map(|n| by_name.get(n))
            {
                todo.push(j);
            }
        }
    }
    (0..stanzas.len()).filter(|&i| chosen[i]).collect()
}

/// The package name of one relation: `libc6 (>= 2.36)` -> `libc6`, `perl:any` -> `perl`.
fn relation_name(relation: &str) -> Option<&str> {
    let name = relation.trim().split([' ', '\t', '(', '[', '<']).next()?;
    let name = name.split(':').next()?;
    (!name.is_empty()).then_some(name)
}

/// debootstrap's `setup_merged_usr` table: `bin`, `sbin`, `lib`, and the multilib directories
/// of the architecture (the first of the call's packages that is not `Architecture: all`).
fn merged_dirs(arch: Option<&str>) -> Vec<&'static str> {
    let multilib: &[&'static str] = match arch.unwrap_or_default() {
        "amd64" | "x32" => &["lib32", "lib64", "libx32"],
        "i386" => &["lib64", "libx32"],
        "mips" | "mipsel" | "ppc64" | "sparc64" => &["lib32", "lib64"],
        a if a.starts_with("mips64") || a.starts_with("mipsn32") => &["lib32", "lib64", "libo32"],
        "powerpc" | "ppc64el" | "sparc" => &["lib64"],
        "s390x" => &["lib32"],
        _ => &[],
    };
    ["bin", "sbin", "lib"].into_iter().chain(multilib.iter().copied()).collect()
}

/// Adds the first stage's layout to `tx`: `usr/DIR` and `DIR` -> `usr/DIR` for each merged
/// directory the root does not have yet (one it has must already be that symlink: a root with
/// a real `/bin` is not one to bootstrap), and an empty database at `admin` unless the root has
/// one (`database`). False: the root has it all, nothing was added.
pub(crate) fn add_layout(
    tx: &mut Transaction<'_>,
    plan: &Plan,
    admin: &Path,
    database: bool,
) -> Result<bool> {
    let root: &Root = tx.root;
    let mut missing = Vec::new();
    for dir in &plan.merged {
        let target = format!("usr/{dir}");
        match rustix::fs::readlinkat(root.dir().fd(), *dir, Vec::new()) {
            Ok(link) if link.as_bytes() == target.as_bytes() => {}
            Err(Errno::NOENT) => missing.push((*dir, target)),
            Ok(_) | Err(Errno::INVAL) => {
                return Err(Error::Usage(format!(
                    "--bootstrap: {} is not a symlink to {target}: the bootstrap makes a merged-/usr root, into an empty one",
                    escape(&root.display(Path::new(dir)))
                )))
            }
            Err(e) => return Err(Error::root(root.display(Path::new(dir)), "readlink", e)),
        }
    }
    let usr = rustix::fs::statat(root.dir().fd(), "usr", AtFlags::SYMLINK_NOFOLLOW).is_ok();
    let added = !missing.is_empty() || !database;
    if !usr && !missing.is_empty() {
        tx.add_layout(Path::new("usr"), Kind::Dir)?;
    }
    for (dir, target) in missing {
        tx.add_layout(Path::new(&target), Kind::Dir)?;
        tx.add_layout(Path::new(dir), Kind::Symlink { target: target.into() })?;
    }
    if !database {
        let mut made = PathBuf::new();
        for part in admin {
            made.push(part);
            tx.add_generated_dir(&made, 0o755)?;
        }
        for sub in ["info", "updates"] {
            tx.add_generated_dir(&admin.join(sub), 0o755)?;
        }
        tx.add_generated(&admin.join("status"), b"", 0o644)?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stanzas(text: &str) -> Vec<Stanza> {
        crate::dpkg::deb822::parse(text.as_bytes()).unwrap()
    }

    fn names(s: &[Stanza], picked: Vec<usize>) -> Vec<&str> {
        picked.into_iter().map(|i| s[i].get("Package").unwrap()).collect()
    }

    #[test]
    fn the_first_stage_is_the_essential_packages_and_their_closure_within_the_call() {
        let s = stanzas(
            "Package: bash\nEssential: yes\nPre-Depends: libc6 (>= 2.36), libtinfo6 (>= 6)\nDepends: base-files (>= 2.1.12), debianutils (>= 5.6-0.1)\n\n\
             Package: libc6\nDepends: libgcc-s1\n\n\
             Package: libgcc-s1\nDepends: gcc-12-base (= 12.2.0-14), libc6 (>= 2.35)\n\n\
             Package: libtinfo6\n\n\
             Package: base-files\nEssential: yes\nPre-Depends: awk\n\n\
             Package: mawk\nProvides: awk\n\n\
             Package: init-system-helpers\nEssential: yes\nDepends: usrmerge | usr-is-merged, perl-base:any\n\n\
             Package: usr-is-merged\n\n\
             Package: perl-base\nEssential: yes\n\n\
             Package: apt\nDepends: libapt-pkg6.0 (>= 2.6.1)\n\n\
             Package: libapt-pkg6.0\n",
        );
        assert_eq!(
            names(&s, first_stage(&s)),
            ["bash", "libc6", "libgcc-s1", "libtinfo6", "base-files", "mawk", "init-system-helpers", "usr-is-merged", "perl-base"],
            "apt and its library are not Essential: the second stage installs them; debianutils and gcc-12-base are not in the call"
        );
    }

    #[test]
    fn relation_names_lose_versions_architectures_and_restrictions() {
        for (relation, name) in [
            (" libc6 (>= 2.36)", Some("libc6")),
            ("perl:any", Some("perl")),
            ("foo [amd64]", Some("foo")),
            ("bar<stage1>", Some("bar")),
            (" ", None),
        ] {
            assert_eq!(relation_name(relation), name, "{relation:?}");
        }
    }

    #[test]
    fn merged_dirs_follow_debootstrap() {
        assert_eq!(merged_dirs(Some("amd64")), ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]);
        assert_eq!(merged_dirs(Some("arm64")), ["bin", "sbin", "lib"]);
        assert_eq!(merged_dirs(None), ["bin", "sbin", "lib"]);
        assert_eq!(
            merged_dirs(Some("mips64el")),
            ["bin", "sbin", "lib", "lib32", "lib64", "libo32"]
        );
    }
}
