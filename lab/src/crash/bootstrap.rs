//! The `bootstrap` scenario: `unpack --bootstrap --no-scripts` into an empty root, cut at any
//! moment of its three transactions (the merged-/usr layout with an empty database, the first
//! stage, the second stage) or between them.
//!
//! Why it needs its own invariant: a crash between the stages leaves a root that is neither the
//! empty one nor the new system, and must be all the same: the promise is that each stage is
//! all there or all absent, and that the root is one `unpack --bootstrap` takes again. So the
//! call's packages are made to exercise both stages: an Essential copy of the package under test
//! (`Essential: yes`, a conffile added, an `md5sums` member made so that the second stage can
//! adopt its files, the conffile written again as `NAME.dpkg-new`), and a package of the test's
//! own, not Essential, with a conffile, which only the second stage writes. Both are
//! `Architecture: all`, so the layout is the three links every architecture has (`bin`, `sbin`,
//! `lib` to `usr/`), known here without asking the engine. After recovery:
//! - the root is entirely at one of the four trees the transactions leave, in order (nothing,
//!   the layout, the first stage, the second stage): a later stage's paths never without an
//!   earlier one's (`mixed`, `leftover-dirs`: invariant 3 of [`super::check`], which takes
//!   [`Bootstrap::between`] as sides);
//! - the status lists no package (none at all while the layout is absent), or, where the
//!   second stage is there, both packages `install ok unpacked` with their versions, and info
//!   files naming their paths; no info file of a package the status does not list
//!   (`half-registered`);
//! - where the status lists no package, `unpack --bootstrap` run again exits 0 and leaves every
//!   path and the database as the new install has them (`redo-failed`).
//!
//! What each tree holds comes from the packages (read as [`Tree::of_deb`] reads them), the
//! second stage's as [`Db::new_tree`] says `dpkg --unpack` leaves a package; the root is read
//! through the checker's confined lookups. This module changes a root only by the redo, which
//! is the engine's own call.

use super::check::{
    open_root, row_violation, survey, violation, Checked, Deeper, Expected, Kind, Violation,
};
use super::database::{self, read_db_file, Db, Rebuild, Version, ADMIN_DIR, CONFFILE, INFO_FILES};
use super::expect::{Content, Tree};
use super::CrashError;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The options of the call under test, besides `-q -s STRATEGY`.
pub const FLAGS: [&str; 2] = ["--bootstrap", "--no-scripts"];

/// The test's own package, which only the second stage writes.
pub const SECOND_PACKAGE: &str = "unpack-crashtest-second";

/// The conffile the Essential copy gets (the second package gets [`CONFFILE`]).
pub const ESSENTIAL_CONFFILE: &str = "etc/unpack-crashtest/essential.conf";

/// The directories the layout makes links into `usr/` for every architecture.
const MERGED: [&str; 3] = ["bin", "sbin", "lib"];

/// The trees in the order the call makes them, by the names the reports use.
pub const STAGES: [&str; 4] = ["nothing", "layout", "first-stage", "second-stage"];

/// The call's packages, what they register, and the tree after each of its transactions.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    /// The Essential copy, then the second package: the call's order.
    pub packages: [PathBuf; 2],
    /// Their names and versions, in the same order.
    pub registered: [(String, Version); 2],
    /// One tree per entry of [`STAGES`].
    pub stages: [Tree; STAGES.len()],
}

/// A package a status file lists: its `Package`, `Status` and `Version`.
type Listed = (String, String, String);

impl Bootstrap {
    /// Writes the call's two packages into `dir` (a new directory) from `package`, and reads
    /// what they hold.
    pub fn write(package: &Path, dir: &Path) -> Result<Bootstrap, CrashError> {
        std::fs::create_dir(dir).map_err(|source| CrashError::Io {
            path: dir.to_path_buf(),
            what: "creating",
            source,
        })?;
        let essential = dir.join("essential.deb");
        let yes = |_: Option<&str>| Some("yes".to_string());
        let all = |_: Option<&str>| Some("all".to_string());
        // `Multi-Arch: same` is refused with `Architecture: all`; the others mean nothing here.
        let none = |_: Option<&str>| None;
        let edit = Rebuild {
            conffile: (ESSENTIAL_CONFFILE, "the Essential copy's conffile\n"),
            files: &[],
            fields: &[("Essential", &yes), ("Architecture", &all), ("Multi-Arch", &none)],
            md5sums: true,
        };
        database::rebuild(package, &essential, dir, &edit)?;
        let second = second_package(dir)?;
        let registered = |deb: &Path| {
            Ok::<_, CrashError>((database::field(deb, "Package")?, Version::of_deb(deb)?))
        };
        let registered = [registered(&essential)?, registered(&second)?];
        let [(name, copy), (second_name, own)] = &registered;
        if name.is_empty() || name == second_name {
            let reason = format!(
                "a package named '{name}' cannot be bootstrapped beside the crash test's own"
            );
            return Err(CrashError::Package { path: package.to_path_buf(), reason });
        }
        let stages = stages(copy, own);
        Ok(Bootstrap { packages: [essential, second], registered, stages })
    }

    /// The empty root's tree.
    pub fn first(&self) -> &Tree {
        let [nothing, ..] = &self.stages;
        nothing
    }

    /// The tree of the whole system.
    pub fn last(&self) -> &Tree {
        let [.., whole] = &self.stages;
        whole
    }

    /// The checks after recovery on `root`, which invariant 3 found nearest to stage `side`:
    /// the database, and the bootstrap again where the database lists no package.
    fn check_at(&self, root: &Path, expected: &Expected<'_>, side: usize, id: usize) -> Checked {
        let dir = match open_root(root) {
            Ok(dir) => dir,
            Err(why) => {
                return Checked {
                    violations: vec![database::unreadable_root(id, why)],
                    ..Checked::default()
                }
            }
        };
        let listed = status(&dir);
        let mut violations = self.registration(&dir, &listed, side, id);
        let redone = matches!(&listed, Ok(l) if l.as_ref().is_none_or(Vec::is_empty));
        if redone {
            violations.extend(self.redo(root, expected, id));
        }
        Checked { violations, redone, repair: None }
    }

    /// Invariant (b): what the database registers agrees with stage `side`.
    fn registration(
        &self,
        dir: &OwnedFd,
        listed: &Result<Option<Vec<Listed>>, String>,
        side: usize,
        id: usize,
    ) -> Vec<Violation> {
        let status = Path::new(ADMIN_DIR).join("status");
        let complete = side == STAGES.len() - 1;
        let found = match listed {
            Ok(None) if side == 0 => return Vec::new(),
            Ok(None) => "no status file".to_string(),
            Ok(Some(l)) if l.is_empty() && !complete => return self.no_info_files(dir, id),
            Ok(Some(l)) if complete && sorted(l.clone()) == self.expected_status() => {
                return self.info_files(dir, id)
            }
            Ok(Some(l)) => describe(l),
            Err(e) => e.clone(),
        };
        let what = format!(
            "{found}, where recovery left the tree at: {}",
            STAGES.get(side).copied().unwrap_or("?")
        );
        vec![self.registration_violation(id, &status, what)]
    }

    /// `Package Status Version` of both packages, as the second stage registers them.
    fn expected_status(&self) -> Vec<Listed> {
        let unpacked = |(name, v): &(String, Version)| {
            (name.clone(), "install ok unpacked".to_string(), v.version.clone())
        };
        sorted(self.registered.iter().map(unpacked).collect())
    }

    /// Without the second stage, neither package has a list.
    fn no_info_files(&self, dir: &OwnedFd, id: usize) -> Vec<Violation> {
        self.registered
            .iter()
            .map(|(name, _)| format!("info/{name}.list"))
            .filter(|name| read_db_file(dir, name).is_ok())
            .map(|name| {
                let path = Path::new(ADMIN_DIR).join(&name);
                self.registration_violation(
                    id,
                    &path,
                    format!("{name}, where the status lists no package"),
                )
            })
            .collect()
    }

    /// With it, each package's info files name its paths.
    fn info_files(&self, dir: &OwnedFd, id: usize) -> Vec<Violation> {
        let mut found = Vec::new();
        for (name, version) in &self.registered {
            for file in &INFO_FILES {
                let (suffix, expected, _) = file;
                let what = match database::read_info(dir, name, file) {
                    Ok(paths) if paths == expected(version) => continue,
                    Ok(paths) => database::differ(&paths, &expected(version)),
                    Err(e) => e,
                };
                let path = Path::new(ADMIN_DIR).join(format!("info/{name}.{suffix}"));
                found.push(self.registration_violation(
                    id,
                    &path,
                    format!("{what}, where the status lists {name}"),
                ));
            }
        }
        found
    }

    fn registration_violation(&self, id: usize, path: &Path, found: String) -> Violation {
        let listed: Vec<String> =
            self.expected_status().iter().map(|(n, s, v)| format!("{n} {v} {s}")).collect();
        let (old, new) = ("no package".to_string(), listed.join(", "));
        database::db_violation(id, path, Kind::HalfRegistered, old, new, Content::Other(found))
    }

    /// Invariant (c): `unpack --bootstrap` again on the recovered root exits 0 and leaves the
    /// whole system, its tree and its database.
    fn redo(&self, root: &Path, expected: &Expected<'_>, id: usize) -> Vec<Violation> {
        let redone =
            super::unpack(expected.unpack, expected.strategy, &FLAGS, &self.packages, root);
        if let Err(e) = redone {
            let ok = Content::Other("unpack --bootstrap exits 0".into());
            return vec![violation(
                id,
                Path::new(""),
                Kind::RedoFailed,
                &ok,
                &ok,
                &Content::Other(e.to_string()),
                None,
            )];
        }
        let mut found: Vec<Violation> = survey(root, expected)
            .iter()
            .filter(|r| r.found != r.new)
            .map(|r| row_violation(id, r, Kind::RedoFailed, None))
            .collect();
        let registered = match open_root(root) {
            Ok(dir) => self.registration(&dir, &status(&dir), STAGES.len() - 1, id),
            Err(why) => vec![database::unreadable_root(id, why)],
        };
        found.extend(registered.into_iter().map(|v| Violation { kind: Kind::RedoFailed, ..v }));
        found
    }
}

impl Deeper for Bootstrap {
    /// The layout and the first stage.
    fn between(&self) -> &[Tree] {
        &self.stages[1..STAGES.len() - 1]
    }

    fn check(
        &self,
        root: &Path,
        expected: &Expected<'_>,
        side: Option<usize>,
        id: usize,
        _: bool,
    ) -> Checked {
        side.map_or_else(Checked::default, |side| self.check_at(root, expected, side, id))
    }
}

/// The packages the status file lists (`None`: there is none), read without leaving the root.
fn status(dir: &OwnedFd) -> Result<Option<Vec<Listed>>, String> {
    match read_db_file(dir, "status") {
        Ok(text) => Ok(Some(listed(&text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("status: {e}")),
    }
}

/// `Package`, `Status` and `Version` of every stanza of a status file that has a `Package`.
fn listed(status: &str) -> Vec<Listed> {
    status
        .split("\n\n")
        .filter_map(|stanza| {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            };
            Some((
                field("Package")?,
                field("Status").unwrap_or_default(),
                field("Version").unwrap_or_default(),
            ))
        })
        .collect()
}

fn sorted(mut listed: Vec<Listed>) -> Vec<Listed> {
    listed.sort();
    listed
}

/// A status's packages on one line.
fn describe(listed: &[Listed]) -> String {
    let each: Vec<String> = listed.iter().map(|(n, s, v)| format!("{n} {v} {s}")).collect();
    format!(
        "the status lists {}",
        if each.is_empty() { "no package".to_string() } else { each.join(", ") }
    )
}

/// The test's own package: a few generated files (the bench's synthetic package of six files
/// of 3,000 bytes) and [`CONFFILE`], named [`SECOND_PACKAGE`], shipping no md5sums.
fn second_package(dir: &Path) -> Result<PathBuf, CrashError> {
    let spec = crate::bench::synthetic::Spec { files: 6, size: 3000 };
    let generated = spec
        .generate(dir)
        .map_err(|e| CrashError::Package { path: dir.to_path_buf(), reason: e.to_string() })?;
    let second = dir.join("second.deb");
    let name = |_: Option<&str>| Some(SECOND_PACKAGE.to_string());
    let edit = Rebuild {
        conffile: (CONFFILE, "the second stage's conffile\n"),
        files: &[],
        fields: &[("Package", &name)],
        md5sums: false,
    };
    database::rebuild(&generated, &second, dir, &edit)?;
    Ok(second)
}

/// The trees after each transaction of a bootstrap of `essential` (the first stage's) and
/// `second`: nothing; the layout; the first stage's files over it; then what the second stage
/// adds, each package as `dpkg --unpack` leaves it in a root whose files are not its own yet
/// (a conffile the root has stays, its new content at `NAME.dpkg-new`).
fn stages(essential: &Version, second: &Version) -> [Tree; STAGES.len()] {
    let layout = layout();
    let first = over(&layout, &essential.tree);
    let nothing_before =
        Version { version: String::new(), tree: Tree::default(), conffiles: Default::default() };
    let adopted = Db { package: String::new(), old: essential.clone(), new: essential.clone() };
    let fresh = Db { package: String::new(), old: nothing_before, new: second.clone() };
    let whole = over(&over(&first, &adopted.new_tree()), &fresh.new_tree());
    [Tree::default(), layout, first, whole]
}

/// The layout's tree: `usr/DIR` and `DIR` -> `usr/DIR` for each of [`MERGED`], and dpkg's
/// admin directory with `info/` and `updates/` (its `status` is the database's to check; its
/// parents are the engine's state directory's too, made before any transaction).
fn layout() -> Tree {
    let mut tree = Tree::default();
    tree.0.insert(PathBuf::from("usr"), Content::Dir);
    for dir in MERGED {
        let target = Path::new("usr").join(dir);
        tree.0.insert(target.clone(), Content::Dir);
        tree.0.insert(PathBuf::from(dir), Content::Symlink(target.into_os_string()));
    }
    tree.0.insert(PathBuf::from(ADMIN_DIR), Content::Dir);
    for dir in ["info", "updates"] {
        tree.0.insert(Path::new(ADMIN_DIR).join(dir), Content::Dir);
    }
    tree
}

/// `package`'s paths over `base`: a directory where `base` has a symlink keeps the symlink, as
/// dpkg keeps a directory symlink the root has.
fn over(base: &Tree, package: &Tree) -> Tree {
    let mut tree = base.clone();
    for (path, content) in &package.0 {
        let keeps_link =
            *content == Content::Dir && matches!(base.0.get(path), Some(Content::Symlink(_)));
        if !keeps_link {
            tree.0.insert(path.clone(), content.clone());
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(len: u64, hash: u64) -> Content {
        Content::File { len, hash }
    }

    fn version(paths: &[(&str, Content)], conffiles: &[&str]) -> Version {
        Version {
            version: "1".into(),
            tree: Tree(paths.iter().map(|(p, c)| (PathBuf::from(p), c.clone())).collect()),
            conffiles: conffiles.iter().map(PathBuf::from).collect(),
        }
    }

    #[test]
    fn each_stage_adds_to_the_one_before_and_the_second_writes_conffiles_as_dpkg_new() {
        let essential = version(
            &[("bin", Content::Dir), ("bin/sh", file(1, 1)), ("etc/e.conf", file(2, 2))],
            &["etc/e.conf"],
        );
        let second =
            version(&[("usr/share/s", file(3, 3)), ("etc/s.conf", file(4, 4))], &["etc/s.conf"]);
        let [nothing, layout, first, whole] = &stages(&essential, &second);
        assert!(nothing.0.is_empty());
        assert_eq!(layout.get(Path::new("bin")), Content::Symlink("usr/bin".into()));
        assert_eq!(layout.get(Path::new("var/lib/dpkg/info")), Content::Dir);
        assert_eq!(
            first.get(Path::new("bin")),
            Content::Symlink("usr/bin".into()),
            "a package's directory keeps the layout's link"
        );
        assert_eq!(first.get(Path::new("bin/sh")), file(1, 1));
        assert_eq!(
            first.get(Path::new("etc/e.conf")),
            file(2, 2),
            "the first stage writes a conffile at its name"
        );
        assert_eq!(first.get(Path::new("usr/share/s")), Content::Absent);
        assert_eq!(whole.get(Path::new("etc/e.conf")), file(2, 2));
        assert_eq!(
            whole.get(Path::new("etc/e.conf.dpkg-new")),
            file(2, 2),
            "and the second again, beside it"
        );
        assert_eq!(whole.get(Path::new("etc/s.conf")), Content::Absent);
        assert!(whole.0.contains_key(Path::new("etc/s.conf")), "whose absence is checked");
        assert_eq!(whole.get(Path::new("etc/s.conf.dpkg-new")), file(4, 4));
        for (earlier, later) in [(nothing, layout), (layout, first), (first, whole)] {
            for (path, content) in &earlier.0 {
                assert_eq!(later.get(path), *content, "{} stays", path.display());
            }
        }
    }

    #[test]
    fn the_status_is_read_stanza_by_stanza() {
        let text = "Package: a\nStatus: install ok unpacked\nVersion: 1\nDescription: x\n more\n\nPackage: b\nVersion: 2\nStatus: install ok unpacked\n";
        assert_eq!(
            listed(text),
            [
                ("a".into(), "install ok unpacked".into(), "1".into()),
                ("b".into(), "install ok unpacked".into(), "2".into())
            ]
        );
        assert!(listed("").is_empty());
        assert_eq!(describe(&[]), "the status lists no package");
    }
}
