//! Checking one crash state: mount it (which replays the journal), compare every path of the
//! package with its old and new content, let the real `unpack --recover` finish or roll back an
//! interrupted transaction, compare again, unmount, fsck.
//!
//! The invariants, per path of the package:
//! 1. it holds its old complete content or its new complete content (old is "absent" for an
//!    install): otherwise it is `zero-length` (an empty file where neither version is empty),
//!    `lost-old` (gone, where the old version was), or `torn` (anything else: short, mixed,
//!    garbage, the wrong type, unreadable);
//! 2. in a state a crash after the unpacker's exit can leave, it holds its new content, or it
//!    is `not-durable` (exit 0 meant durable);
//! 3. after `unpack --recover ROOT`, the package is entirely old or entirely new: when it is
//!    entirely old but for new directories still there (a roll-back that did not know them), they
//!    are `leftover-dirs`; otherwise the paths on the side fewer paths took are `mixed`; a
//!    recovery that fails is `recover-failed`;
//! 4. in a root with dpkg's database (the `upgrade-db` scenario), after recovery too: the
//!    database registers the package entirely as one version and the tree is that version's
//!    (`half-registered`, `db-tree`, `db-audit`: see [`super::database`]);
//! 5. for the `bootstrap` scenario, whose call is three transactions, "entirely old or entirely
//!    new" of invariant 3 is "entirely at one of the trees the transactions leave, in order"
//!    (nothing, the layout, the first stage, the second stage), and after recovery the database
//!    registers both packages or none, consistently with the tree, and where it registers none,
//!    `unpack --bootstrap` again finishes the system (`half-registered`, `redo-failed`: see
//!    [`super::bootstrap`]);
//! 6. for the `apt` scenario, whose call is a whole apt run, invariant 3 is per package rather
//!    than over the root: each package where its status says, files and database agreeing, a
//!    package whose scripts had started counted as needing a reinstall; then the
//!    administrator's repair (`dpkg --configure -a`, `apt-get -f install`) leaves a system
//!    `dpkg --audit` and apt find whole (`repair-failed`: see [`super::apt`]); a conffile that
//!    `dpkg --configure` recorded as installed (or kept) while its rename from `NAME.dpkg-new`
//!    (or its removal) was lost is told apart (`conffile-lost`): configure is the real dpkg's
//!    in every cell, under unpack-dpkg's configure guard in the engine's;
//!
//! and, apart from them, because it points at the filesystem rather than at the unpacker: the
//! state mounts, and fsck (`e2fsck -fn`, `xfs_repair -n`, `btrfs check --readonly`) finds
//! nothing. Paths are looked up with openat2's RESOLVE_IN_ROOT, as the engine resolves them: a
//! crash state holding a symlink that points outside cannot make the checker read the host.
//! This module only ever mounts an image it is given, read-write, and always unmounts and
//! detaches it, whatever happens in between.

use super::expect::{content_hash, Content, Tree};
use super::CrashError;
use crate::scratchfs::{LoopDevice, Mounted};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use serde::Serialize;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use unpack::{INTENT, JOURNAL, STATE_DIR};

/// How a path broke an invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    ZeroLength,
    Torn,
    LostOld,
    NotDurable,
    LeftoverDirs,
    Mixed,
    RecoverFailed,
    HalfRegistered,
    DbTree,
    ConffileLost,
    DbAudit,
    RedoFailed,
    RepairFailed,
}

impl Kind {
    /// Every kind, in the order the reports list them.
    pub const ALL: [Kind; 13] = [
        Kind::ZeroLength,
        Kind::Torn,
        Kind::LostOld,
        Kind::NotDurable,
        Kind::LeftoverDirs,
        Kind::Mixed,
        Kind::RecoverFailed,
        Kind::HalfRegistered,
        Kind::DbTree,
        Kind::ConffileLost,
        Kind::DbAudit,
        Kind::RedoFailed,
        Kind::RepairFailed,
    ];

    /// The name the reports use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ZeroLength => "zero-length",
            Kind::Torn => "torn",
            Kind::LostOld => "lost-old",
            Kind::NotDurable => "not-durable",
            Kind::LeftoverDirs => "leftover-dirs",
            Kind::Mixed => "mixed",
            Kind::RecoverFailed => "recover-failed",
            Kind::HalfRegistered => "half-registered",
            Kind::DbTree => "db-tree",
            Kind::ConffileLost => "conffile-lost",
            Kind::DbAudit => "db-audit",
            Kind::RedoFailed => "redo-failed",
            Kind::RepairFailed => "repair-failed",
        }
    }
}

/// The old and the new tree of a cell, the directory the package goes to inside the
/// filesystem, how to mount and fsck it, and the unpacker that recovers it.
#[derive(Debug)]
pub struct Expected<'a> {
    pub old: &'a Tree,
    pub new: &'a Tree,
    /// The unpack root, relative to the filesystem's top.
    pub root: &'a Path,
    pub fstype: &'a str,
    /// The `unpack` binary, and the strategy it recovers with (the cell's).
    pub unpack: &'a Path,
    pub strategy: &'a str,
    /// What the scenario checks beyond invariant 3 after recovery (dpkg's database in
    /// `upgrade-db`, the bootstrap's stages and database in `bootstrap`).
    pub deeper: Option<&'a dyn Deeper>,
}

impl Expected<'_> {
    /// The trees recovery may leave the root at, in the order the transactions make them: old,
    /// the trees between (the bootstrap's stages), new.
    fn sides(&self) -> Vec<&Tree> {
        let between = self.deeper.map_or(&[][..], |d| d.between());
        std::iter::once(self.old).chain(between).chain([self.new]).collect()
    }
}

/// The checks a scenario adds after recovery, beside invariant 3: implemented by the files
/// that know the scenario ([`super::database`], [`super::bootstrap`]), so that this file, which
/// they build on, never imports them.
pub trait Deeper: std::fmt::Debug {
    /// The trees between old and new that recovery may also leave (the bootstrap's stages).
    fn between(&self) -> &[Tree] {
        &[]
    }

    /// False when the call under test is many transactions whose packages each take their own
    /// side (an apt run): invariant 3 over the whole root is then the scenario's, per package.
    fn whole_root(&self) -> bool {
        true
    }

    /// The checks on `root` after recovery, which invariant 3 found nearest to side `side` of
    /// `Expected::sides` (`None`: recovery failed); `after_returned`: a crash after the call's
    /// exit can leave the state.
    fn check(
        &self,
        root: &Path,
        expected: &Expected<'_>,
        side: Option<usize>,
        id: usize,
        after_returned: bool,
    ) -> Checked;
}

/// What a [`Deeper`] check found.
#[derive(Debug, Default)]
pub struct Checked {
    pub violations: Vec<Violation>,
    /// The scenario's call was run again on the root (the bootstrap, where recovery left a
    /// root that lists no package).
    pub redone: bool,
    /// The packages and the repair of a scenario of many packages (apt).
    pub repair: Option<Repair>,
}

/// What the packages of an apt run were after recovery, and what repairing them took.
#[derive(Debug, Default, Clone)]
pub struct Repair {
    /// Each package as dpkg's status had it after recovery: `VERSION WANT FLAG STATE CONFIG`.
    pub states: Vec<String>,
    /// Packages whose status said `reinstreq` or `half-installed`, and how many of them had
    /// files at neither version.
    pub needs_reinstall: usize,
    pub reinstall_mixed: usize,
    /// `apt-get -f install` ran after `dpkg --configure -a`.
    pub apt_fix: bool,
    /// The repair failed (a `repair-failed` violation).
    pub failed: bool,
}

/// One path of a survey: what the old version, the trees between (the bootstrap's stages) and
/// the new version have there, and what the root holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub path: PathBuf,
    pub old: Content,
    pub between: Vec<Content>,
    pub new: Content,
    pub found: Content,
}

impl Row {
    /// What side `k` has here: 0 is old, the last new.
    fn side(&self, k: usize) -> &Content {
        match k.checked_sub(1).map(|b| self.between.get(b)) {
            None => &self.old,
            Some(Some(c)) => c,
            Some(None) => &self.new,
        }
    }

    /// True when every side has the same here: the path takes no side.
    fn unchanged(&self) -> bool {
        self.between.iter().chain([&self.new]).all(|c| *c == self.old)
    }
}

/// One path of one state that broke an invariant.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub state: usize,
    pub path: PathBuf,
    pub kind: Kind,
    pub expected_old: Content,
    pub expected_new: Content,
    pub found: Content,
    /// For the kinds of invariant 3: what `unpack --recover` said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recover: Option<String>,
}

/// A state the filesystem itself failed on.
#[derive(Debug, Clone, Serialize)]
pub struct FsFailure {
    pub state: usize,
    /// `mount` or `fsck`.
    pub stage: &'static str,
    /// What the tool said.
    pub detail: String,
}

/// What checking one state found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub violations: Vec<Violation>,
    pub fs_failures: Vec<FsFailure>,
    /// What the engine had left in its state directory, i.e. what `--recover` had to do.
    pub left: Left,
    /// `unpack --recover` ran (the state mounted).
    pub recovered: bool,
    pub stage: Stage,
    pub repair: Option<Repair>,
}

/// What the checks after recovery found.
#[derive(Debug, Default)]
pub struct Recovered {
    pub violations: Vec<Violation>,
    pub stage: Stage,
    pub repair: Option<Repair>,
}

/// The bootstrap scenario: where recovery left the root, and whether the bootstrap ran again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// The side the recovered root is nearest to (0 nothing, then each stage); none when
    /// recovery failed or the scenario is another.
    pub side: Option<usize>,
    /// The bootstrap was run again on the recovered root.
    pub redone: bool,
}

/// The engine's transaction files found in a state, before recovery.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// A rename journal: recovery rolls forward.
    pub journal: bool,
    /// An intent (write phase in progress): recovery rolls back.
    pub intent: bool,
}

/// Mounts `image` on `mnt`, checks state `id`, unmounts, fscks. `after_returned`: a crash after
/// the unpacker's exit can leave this state. Errors are for the harness failing (no loop device,
/// a mount that will not come down); what the state holds is always an [`Outcome`].
pub fn check_state(
    image: &Path,
    mnt: &Path,
    expected: &Expected<'_>,
    id: usize,
    after_returned: bool,
) -> Result<Outcome, CrashError> {
    let io = |what: &'static str| {
        move |source| CrashError::Io { path: image.to_path_buf(), what, source }
    };
    let mut outcome = Outcome::default();
    {
        let device = LoopDevice::attach(image).map_err(io("attaching a loop device to"))?;
        match Mounted::mount(expected.fstype, device.path(), mnt, mount_options(expected.fstype)) {
            Ok(mounted) => {
                let root = mounted.path().join(expected.root);
                outcome.violations = invariants(&survey(&root, expected), id, after_returned);
                outcome.left = Left {
                    journal: root.join(STATE_DIR).join(JOURNAL).exists(),
                    intent: root.join(STATE_DIR).join(INTENT).exists(),
                };
                let after = after_recovery(&root, expected, id, after_returned);
                outcome.violations.extend(after.violations);
                outcome.stage = after.stage;
                outcome.repair = after.repair;
                outcome.recovered = true;
                let at = mounted.path().to_path_buf();
                if let Err(e) = mounted.unmount() {
                    // Try again patiently (and lazily at last) before the loop device goes.
                    drop(Mounted::adopt(&at));
                    return Err(io("unmounting")(e));
                }
            }
            Err(e) => outcome.fs_failures.push(FsFailure {
                state: id,
                stage: "mount",
                detail: e.to_string(),
            }),
        }
        drop(device);
    }
    if let Some(detail) = fsck(expected.fstype, image)? {
        outcome.fs_failures.push(FsFailure { state: id, stage: "fsck", detail });
    }
    Ok(outcome)
}

/// Copies of one filesystem share its UUID, which XFS refuses twice unless told.
fn mount_options(fstype: &str) -> &'static str {
    if fstype == "xfs" {
        "nouuid"
    } else {
        "defaults"
    }
}

/// Opens `root` to resolve paths under it, or says why it cannot be.
pub(super) fn open_root(root: &Path) -> Result<OwnedFd, String> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(root, flags, Mode::empty()).map_err(|e| format!("{}: {e}", root.display()))
}

/// What each path of any side holds under `root`.
pub(super) fn survey(root: &Path, expected: &Expected<'_>) -> Vec<Row> {
    let root = open_root(root);
    let sides = expected.sides();
    let paths: std::collections::BTreeSet<&PathBuf> =
        sides.iter().flat_map(|t| t.0.keys()).collect();
    let between = sides.get(1..sides.len().saturating_sub(1)).unwrap_or_default();
    paths
        .into_iter()
        .map(|path| {
            let found = match &root {
                Ok(root) => probe(root, path),
                Err(e) => Content::Other(format!("unreadable root: {e}")),
            };
            Row {
                path: path.clone(),
                old: expected.old.get(path),
                between: between.iter().map(|t| t.get(path)).collect(),
                new: expected.new.get(path),
                found,
            }
        })
        .collect()
}

/// Invariants 1 and 2 over a survey.
fn invariants(survey: &[Row], id: usize, after_returned: bool) -> Vec<Violation> {
    survey
        .iter()
        .filter_map(|r| {
            classify(&r.old, &r.new, &r.found, after_returned)
                .map(|kind| row_violation(id, r, kind, None))
        })
        .collect()
}

/// The checks of a root after a crash: runs `unpack --recover` on it, then invariant 3 and,
/// for the scenarios with dpkg's database, 4, the bootstrap's and apt's (`after_returned`: a
/// crash after the call's exit can leave the state).
pub fn after_recovery(
    root: &Path,
    expected: &Expected<'_>,
    id: usize,
    after_returned: bool,
) -> Recovered {
    let (mut violations, side) = recover(root, expected, id);
    let staged = expected.deeper.is_some_and(|d| !d.between().is_empty());
    let mut stage = Stage { side: side.filter(|_| staged), redone: false };
    let mut repair = None;
    if let Some(deeper) = expected.deeper {
        let checked = deeper.check(root, expected, side, id, after_returned);
        violations.extend(checked.violations);
        stage.redone = checked.redone;
        repair = checked.repair;
    }
    Recovered { violations, stage, repair }
}

/// Invariant 3: runs `unpack --recover` on `root`, then the root must be entirely at one side
/// (old or new; for the bootstrap, or a stage between). Paths whose sides are all the same take
/// no side. Returns the violations and the side the root is nearest to (none when recovery
/// failed; 0 when the scenario's packages take their sides each, [`Deeper::whole_root`]).
fn recover(root: &Path, expected: &Expected<'_>, id: usize) -> (Vec<Violation>, Option<usize>) {
    let ran = Command::new(expected.unpack)
        .args(["-s", expected.strategy, "--recover"])
        .arg(root)
        .output();
    let said = match ran {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        other => {
            let why = match other {
                Ok(out) => {
                    format!(
                        "exit {}: {}",
                        out.status.code().unwrap_or(-1),
                        String::from_utf8_lossy(&out.stderr).trim()
                    )
                }
                Err(e) => format!("cannot run it: {e}"),
            };
            let expected_ok = Content::Other("unpack --recover exits 0".into());
            let found = Content::Other(why.clone());
            let failed = violation(
                id,
                Path::new(""),
                Kind::RecoverFailed,
                &expected_ok,
                &expected_ok,
                &found,
                Some(why),
            );
            return (vec![failed], None);
        }
    };
    if expected.deeper.is_some_and(|d| !d.whole_root()) {
        return (Vec::new(), Some(0));
    }
    let survey = survey(root, expected);
    let (side, off) = one_side(&survey);
    let found = off
        .into_iter()
        .filter_map(|(i, kind)| {
            survey.get(i).map(|r| row_violation(id, r, kind, Some(said.clone())))
        })
        .collect();
    (found, Some(side))
}

/// Invariant 3 over a survey taken after recovery: the side the root is nearest to, and the
/// paths (by index) that keep it from being entirely at that side, and why. Paths whose sides
/// are all the same take no side. A root entirely at a side but for directories a later side
/// has (a roll-back that did not know them) has them `leftover-dirs`; otherwise the side fewest
/// paths are off (the later one of a tie) is the root's, and the paths off it are `mixed`.
fn one_side(survey: &[Row]) -> (usize, Vec<(usize, Kind)>) {
    let sides = survey.first().map_or(2, |r| r.between.len() + 2);
    let sided: Vec<usize> = (0..survey.len()).filter(|&i| !survey[i].unchanged()).collect();
    let off = |k: usize| -> Vec<usize> {
        sided.iter().copied().filter(|&i| survey[i].found != *survey[i].side(k)).collect()
    };
    if let Some(k) = (0..sides).rev().find(|&k| off(k).is_empty()) {
        return (k, Vec::new());
    }
    let leftover_dir = |i: usize, k: usize| {
        let r = &survey[i];
        *r.side(k) == Content::Absent
            && r.found == Content::Dir
            && (k + 1..sides).any(|later| *r.side(later) == Content::Dir)
    };
    for k in 0..sides - 1 {
        let off = off(k);
        if off.iter().all(|&i| leftover_dir(i, k)) {
            return (k, off.into_iter().map(|i| (i, Kind::LeftoverDirs)).collect());
        }
    }
    let nearest = (0..sides).rev().min_by_key(|&k| off(k).len()).unwrap_or(sides - 1);
    (nearest, off(nearest).into_iter().map(|i| (i, Kind::Mixed)).collect())
}

/// A violation of a surveyed path.
pub(super) fn row_violation(
    id: usize,
    row: &Row,
    kind: Kind,
    recover: Option<String>,
) -> Violation {
    violation(id, &row.path, kind, &row.old, &row.new, &row.found, recover)
}

pub(super) fn violation(
    state: usize,
    path: &Path,
    kind: Kind,
    old: &Content,
    new: &Content,
    found: &Content,
    recover: Option<String>,
) -> Violation {
    Violation {
        state,
        path: path.to_path_buf(),
        kind,
        expected_old: old.clone(),
        expected_new: new.clone(),
        found: found.clone(),
        recover,
    }
}

/// The invariants for one path; `None` when it holds.
pub fn classify(
    old: &Content,
    new: &Content,
    found: &Content,
    after_returned: bool,
) -> Option<Kind> {
    if found == new {
        None
    } else if found == old {
        after_returned.then_some(Kind::NotDurable)
    } else {
        match found {
            Content::Absent => Some(Kind::LostOld),
            Content::File { len: 0, .. } => Some(Kind::ZeroLength),
            _ => Some(Kind::Torn),
        }
    }
}

/// What `path` holds under `root`, looked up without ever leaving it.
pub(super) fn probe(root: &OwnedFd, path: &Path) -> Content {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = path.file_name() else { return Content::Other("no file name".into()) };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let confined = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    let dir = match rustix::fs::openat2(root, parent, flags, Mode::empty(), confined) {
        Ok(dir) => dir,
        Err(rustix::io::Errno::NOENT) => return Content::Absent,
        Err(rustix::io::Errno::NOTDIR) => {
            return Content::Other(format!("{} is not a directory", parent.display()))
        }
        Err(rustix::io::Errno::LOOP) => {
            return Content::Other(format!("symlink loop in {}", parent.display()))
        }
        Err(e) => {
            return Content::Other(format!("unreadable: resolving {}: {e}", parent.display()))
        }
    };
    let dir = dir.as_fd();
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Content::Absent,
        Err(e) => return Content::Other(format!("unreadable: stat: {e}")),
    };
    let rdev = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let read = rustix::fs::openat(dir, name, flags, Mode::empty())
                .map_err(std::io::Error::from)
                .and_then(|fd| content_hash(&mut File::from(fd)));
            match read {
                Ok((len, hash)) => Content::File { len, hash },
                Err(e) => Content::Other(format!("unreadable file of {} bytes: {e}", st.st_size)),
            }
        }
        FileType::Directory => Content::Dir,
        FileType::Symlink => match rustix::fs::readlinkat(dir, name, Vec::new()) {
            Ok(target) => {
                Content::Symlink(std::ffi::OsStr::from_bytes(target.as_bytes()).to_os_string())
            }
            Err(e) => Content::Other(format!("unreadable symlink: {e}")),
        },
        FileType::Fifo => Content::Fifo,
        FileType::CharacterDevice => Content::CharDevice(rdev.0, rdev.1),
        FileType::BlockDevice => Content::BlockDevice(rdev.0, rdev.1),
        other => Content::Other(format!("{other:?}")),
    }
}

/// Runs the filesystem's checker read-only on `image`; `Some(what it said)` when it found
/// something.
fn fsck(fstype: &str, image: &Path) -> Result<Option<String>, CrashError> {
    let mut cmd = match fstype {
        "xfs" => {
            let mut c = Command::new("xfs_repair");
            c.args(["-n", "-f"]);
            c
        }
        "btrfs" => {
            let mut c = Command::new("btrfs");
            c.args(["check", "--readonly"]);
            c
        }
        _ => {
            let mut c = Command::new("e2fsck");
            c.args(["-f", "-n"]);
            c
        }
    };
    let out = cmd.arg(image).output().map_err(|source| CrashError::Tool {
        path: PathBuf::from(cmd.get_program()),
        reason: format!("cannot run it on {}: {source}", image.display()),
    })?;
    if out.status.success() {
        return Ok(None);
    }
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(8)..].join(" | ");
    Ok(Some(format!("{:?} exited {}: {tail}", cmd.get_program(), out.status.code().unwrap_or(-1))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(len: u64, hash: u64) -> Content {
        Content::File { len, hash }
    }

    #[test]
    fn old_or_new_holds_and_everything_else_is_named() {
        let (old, new) = (file(10, 1), file(20, 2));
        assert_eq!(classify(&old, &new, &new, false), None);
        assert_eq!(classify(&old, &new, &old, false), None);
        assert_eq!(classify(&old, &new, &old, true), Some(Kind::NotDurable));
        assert_eq!(classify(&old, &new, &new, true), None);
        assert_eq!(classify(&old, &new, &file(0, 9), false), Some(Kind::ZeroLength));
        assert_eq!(classify(&old, &new, &file(15, 3), false), Some(Kind::Torn));
        assert_eq!(
            classify(&old, &new, &file(20, 3), false),
            Some(Kind::Torn),
            "right length, wrong bytes"
        );
        assert_eq!(classify(&old, &new, &Content::Absent, false), Some(Kind::LostOld));
        assert_eq!(classify(&old, &new, &Content::Dir, false), Some(Kind::Torn));
    }

    fn survey(rows: &[(Content, Content, Content)]) -> Vec<Row> {
        rows.iter()
            .map(|(o, n, f)| (o.clone(), vec![], n.clone(), f.clone()))
            .enumerate()
            .map(row)
            .collect()
    }

    fn row(
        (i, (old, between, new, found)): (usize, (Content, Vec<Content>, Content, Content)),
    ) -> Row {
        Row { path: PathBuf::from(format!("p{i}")), old, between, new, found }
    }

    #[test]
    fn after_recovery_the_package_is_entirely_old_or_entirely_new() {
        let (a, b) = (file(1, 1), file(2, 2));
        let absent = Content::Absent;
        let dir = Content::Dir;
        // Entirely new, entirely old; unchanged paths (the directory in an upgrade) take no side.
        assert!(one_side(&survey(&[
            (a.clone(), b.clone(), b.clone()),
            (dir.clone(), dir.clone(), dir.clone())
        ]))
        .1
        .is_empty());
        assert!(one_side(&survey(&[
            (a.clone(), b.clone(), a.clone()),
            (a.clone(), b.clone(), a.clone())
        ]))
        .1
        .is_empty());
        // A rolled-back install whose new directories stayed.
        let rows = [
            (absent.clone(), dir.clone(), dir.clone()),
            (absent.clone(), b.clone(), absent.clone()),
        ];
        assert_eq!(one_side(&survey(&rows)), (0, vec![(0, Kind::LeftoverDirs)]));
        // Files on both sides: the side fewer paths took is mixed.
        let rows = [
            (a.clone(), b.clone(), b.clone()),
            (a.clone(), b.clone(), b.clone()),
            (a.clone(), b.clone(), a.clone()),
        ];
        assert_eq!(one_side(&survey(&rows)), (1, vec![(2, Kind::Mixed)]));
        // A torn file after recovery is on no side.
        let rows = [(a.clone(), b.clone(), b.clone()), (a.clone(), b.clone(), file(0, 0))];
        assert_eq!(one_side(&survey(&rows)), (1, vec![(1, Kind::Mixed)]));
    }

    /// The bootstrap's sides: nothing, a directory (the layout), a file in it (the first
    /// stage), a second file (the second stage).
    #[test]
    fn with_stages_between_the_root_is_entirely_at_one_of_them_in_order() {
        let (absent, dir, a, b) = (Content::Absent, Content::Dir, file(1, 1), file(2, 2));
        let sides = [
            (absent.clone(), vec![dir.clone(), dir.clone()], dir.clone()),
            (absent.clone(), vec![absent.clone(), a.clone()], a.clone()),
            (absent.clone(), vec![absent.clone(), absent.clone()], b.clone()),
        ];
        let at = |found: [&Content; 3]| -> Vec<Row> {
            sides
                .iter()
                .zip(found)
                .map(|((o, m, n), f)| (o.clone(), m.clone(), n.clone(), f.clone()))
                .enumerate()
                .map(row)
                .collect()
        };
        for (k, found) in [
            [&absent, &absent, &absent],
            [&dir, &absent, &absent],
            [&dir, &a, &absent],
            [&dir, &a, &b],
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(one_side(&at(found)), (k, vec![]), "at side {k}");
        }
        // The second stage's file without the first stage's.
        assert_eq!(one_side(&at([&dir, &absent, &b])), (3, vec![(1, Kind::Mixed)]));
        // A roll-back to nothing that left a directory only a later side has.
        let only_dir = vec![
            row((0, (absent.clone(), vec![absent.clone()], dir.clone(), dir.clone()))),
            row((1, (absent.clone(), vec![absent.clone()], a.clone(), absent.clone()))),
        ];
        assert_eq!(one_side(&only_dir), (0, vec![(0, Kind::LeftoverDirs)]));
    }

    #[test]
    fn for_an_install_absent_is_the_old_version_and_an_empty_new_file_is_no_loss() {
        let new = file(5, 1);
        assert_eq!(classify(&Content::Absent, &new, &Content::Absent, false), None);
        assert_eq!(
            classify(&Content::Absent, &new, &Content::Absent, true),
            Some(Kind::NotDurable)
        );
        assert_eq!(classify(&Content::Absent, &new, &file(0, 0), false), Some(Kind::ZeroLength));
        let empty = file(0, 7);
        assert_eq!(classify(&Content::Absent, &empty, &empty, true), None);
    }
}
