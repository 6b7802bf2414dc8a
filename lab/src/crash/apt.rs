//! The `apt` scenario: `apt-get upgrade` of the `apt-local` set (issue 28) from version 1 to
//! version 2 in a Debian minbase, cut at any moment, through `unpack-dpkg` (the cell's strategy
//! is the engine's, `UNPACK_DPKG_STRATEGY`) or, in the cell whose strategy is [`DPKG`], with the
//! real dpkg in its safe mode (`--refuse-unsafe-io`, explicit: the root's own dpkg.cfg.d counts
//! inside the chroot, the host's does not).
//!
//! Why it needs its own checks: an apt run is dozens of dpkg calls, so after a power cut the
//! root is not "entirely old or entirely new" but every package is at its own place in the
//! sequence. The promise checked is per package, after `unpack --recover ROOT` alone:
//! - what dpkg's status says of it (`dpkg-query` in the chroot, which merges `updates/`) is one
//!   of the places an upgrade passes through, and its files and info files are that place's:
//!   version 1 configured (`installed`, or `unpacked` / `half-configured` at version 1: dpkg
//!   records those before and while the old prerm runs); version 2 configured; or version 2
//!   `unpacked` / `half-configured`, its files the new ones but each conffile either still
//!   pending (the old content at `NAME`, the new at `NAME.dpkg-new`) or already moved into
//!   place (configure does that one conffile at a time); otherwise `half-registered` (the
//!   status) or `db-tree` (a path);
//! - a package whose status has `reinstreq` or `half-installed` is one whose maintainer
//!   scripts had started (dpkg records that before the preinst): dpkg itself says its files
//!   are unknown and it needs reinstalling, so it is counted as "needs reinstall", its files
//!   not judged, and never a violation by itself (how many of them had files at neither
//!   version is counted apart: what `half-installed` hid);
//! - in a state a crash after apt's exit can leave, every package is version 2 configured
//!   (`not-durable` otherwise).
//!
//! Then the administrator's repair, run as one would run it, offline (the repository is in
//! the root): `dpkg --configure -a`, then `apt-get -f install` when apt or dpkg still see
//! something to do; after it no package is half-installed, `dpkg --audit` says nothing,
//! `apt-get check` passes, and each package is configured at one of its versions with that
//! version's files (`repair-failed` otherwise).
//!
//! What each version holds comes from the packages the lab built ([`Version::of_deb`]), never
//! from a tree an installer wrote. dpkg and apt only ever run inside the root (`chroot`), which
//! holds absolute symlinks: never `dpkg --root`. This module changes a crash state only by
//! recovery and the repair, both of which are the point of the check.

use super::check::{open_root, probe, Checked, Deeper, Expected, Kind, Repair, Violation};
use super::database::{self, db_violation, read_info, Db, Version, INFO_FILES};
use super::expect::Content;
use super::CrashError;
use crate::bench::apt_local;
use crate::bench::minbase::installer_env;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The strategy name of the cell with apt and the real dpkg.
pub const DPKG: &str = "dpkg";

/// Where the front end is copied in the root, as apt's `Dir::Bin::dpkg`.
pub const FRONT_END: &str = "/usr/local/bin/unpack-dpkg";

/// The strategy `unpack --recover` runs with in the [`DPKG`] cell (it finds nothing to do).
pub const RECOVER_STRATEGY: &str = "syncfs";

/// The prepared root and what each package holds at each version.
#[derive(Debug)]
pub struct Apt {
    /// Minbase, the set at version 1 installed, apt pointed at version 2 and updated; on the
    /// host's scratch directory, copied into each cell's filesystem.
    pub root: PathBuf,
    /// Each `al-*` package: version 1 (old) and version 2 (new).
    pub packages: Vec<Db>,
    /// For each path, the packages (indexes into `packages`) that ship it at either version.
    owners: BTreeMap<PathBuf, BTreeSet<usize>>,
}

/// Where a package's status puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Version 1, its files as configured (installed, or unpacked / half-configured around
    /// the old prerm).
    Old,
    /// Version 2 configured (or half-configured again while its triggers run).
    New,
    /// Version 2 unpacked or half-configured: conffiles pending or moved, one by one.
    NewPending,
    /// Its scripts had started: dpkg needs it reinstalled.
    Reinstall,
}

impl Apt {
    /// Builds the repositories and the prepared root under `work`: `unpack --bootstrap` of the
    /// minbase in `minbase` (a directory made by `fixtures/fetch-minbase.sh`), `dpkg --configure
    /// -a`, the front end copied in, the set at version 1 installed by apt with the real dpkg,
    /// and apt pointed at version 2 and updated.
    pub fn prepare(minbase: &Path, unpack: &Path, work: &Path) -> Result<Apt, CrashError> {
        let front_end = front_end(unpack)?;
        let repos = work.join("apt-local");
        let count = apt_local::DEFAULT_PACKAGES;
        for version in [1, 2] {
            apt_local::build(&apt_local::repository(&repos, version), count, version)
                .map_err(|e| lab_error(&repos, e))?;
        }
        let set = crate::bench::minbase::read_set(minbase).map_err(|e| lab_error(minbase, e))?;
        let root = work.join("apt-root");
        std::fs::create_dir(&root).map_err(|source| CrashError::Io {
            path: root.clone(),
            what: "creating",
            source,
        })?;
        super::unpack(unpack, "none", &["--bootstrap"], &set.packages, &root)?;
        run_ok(&mut in_root(&root, &["dpkg", "--configure", "-a"]), &root)?;
        let inside = root.join(FRONT_END.trim_start_matches('/'));
        copy(&front_end, &inside)?;
        apt_local::use_version(&root, &repos, 1).map_err(|e| lab_error(&root, e))?;
        let names: Vec<String> = (0..count).map(apt_local::name).collect();
        let mut install = vec!["install", "-y"];
        install.extend(names.iter().map(String::as_str));
        for args in [&["update"][..], &install] {
            run_ok(installer_env(&mut apt_local::apt_get(&root, None, args)), &root)?;
        }
        apt_local::use_version(&root, &repos, 2).map_err(|e| lab_error(&root, e))?;
        run_ok(installer_env(&mut apt_local::apt_get(&root, None, &["update"])), &root)?;
        let mut packages = Vec::with_capacity(count);
        for name in &names {
            let deb =
                |v: u32| apt_local::repository(&repos, v).join(format!("{name}_{v}.0_all.deb"));
            packages.push(Db::of_debs(&deb(1), &deb(2))?);
        }
        Ok(Apt::new(root, packages))
    }

    fn new(root: PathBuf, packages: Vec<Db>) -> Apt {
        let mut owners: BTreeMap<PathBuf, BTreeSet<usize>> = BTreeMap::new();
        for (i, db) in packages.iter().enumerate() {
            for path in db.old.tree.0.keys().chain(db.new.tree.0.keys()) {
                owners.entry(path.clone()).or_default().insert(i);
            }
        }
        Apt { root, packages, owners }
    }

    /// The bytes the prepared root holds (`du`), for the size of the disk.
    pub fn bytes(&self) -> Result<u64, CrashError> {
        let out = run_ok(Command::new("du").args(["-s", "-x", "-B1"]).arg(&self.root), &self.root)?;
        let said = String::from_utf8_lossy(&out.stdout);
        said.split_whitespace().next().and_then(|n| n.parse().ok()).ok_or_else(|| {
            CrashError::Tool { path: "du".into(), reason: format!("said '{}'", said.trim()) }
        })
    }

    /// Copies the prepared root into `root` (an empty directory), owners, modes, links and
    /// device nodes as they are.
    pub fn copy_into(&self, root: &Path) -> Result<(), CrashError> {
        let mut from = self.root.clone().into_os_string();
        from.push("/.");
        run_ok(Command::new("cp").arg("-a").arg(from).arg(root), root).map(drop)
    }

    /// The recorded call: `apt-get upgrade -y` in `root` through the front end with
    /// `strategy`, or with the real dpkg in its safe mode for [`DPKG`]; must exit 0.
    pub fn upgrade(root: &Path, strategy: &str) -> Result<(), CrashError> {
        let mut cmd = if strategy == DPKG {
            apt_local::apt_get(
                root,
                None,
                &["-o", "DPkg::Options::=--refuse-unsafe-io", "upgrade", "-y"],
            )
        } else {
            apt_local::apt_get(root, Some(FRONT_END), &["upgrade", "-y"])
        };
        installer_env(&mut cmd).env("UNPACK_DPKG_STRATEGY", strategy);
        run_ok(&mut cmd, root).map(drop)
    }

    /// The checks of one recovered state (`after_returned`: a crash after apt's exit can leave
    /// it), then the repair and the checks after it.
    fn check_state(&self, root: &Path, id: usize, after_returned: bool) -> Checked {
        let mut repair = Repair::default();
        let mut violations = match self.places(root, id) {
            Ok(places) => {
                let mut found = Vec::new();
                for (db, (place, said)) in self.packages.iter().zip(&places) {
                    repair.states.push(said.clone());
                    repair.needs_reinstall += usize::from(*place == Place::Reinstall);
                    if after_returned && *place != Place::New {
                        found.push(status_violation(id, db, Kind::NotDurable, said));
                    }
                }
                found.extend(self.trees(root, &places, id, Kind::DbTree));
                repair.reinstall_mixed = self.mixed(root, &places);
                found
            }
            Err(v) => v,
        };
        let (fixed, apt_fix) = self.repair(root, id);
        repair.apt_fix = apt_fix;
        repair.failed = !fixed.is_empty();
        violations.extend(fixed);
        Checked { violations, redone: false, repair: Some(repair) }
    }

    /// Each package's place after recovery, with what dpkg said of it; violations for the
    /// packages dpkg places nowhere an upgrade passes through.
    fn places(&self, root: &Path, id: usize) -> Result<Vec<(Place, String)>, Vec<Violation>> {
        let said = statuses(root).map_err(|why| {
            vec![db_violation(
                id,
                &Path::new(database::ADMIN_DIR).join("status"),
                Kind::HalfRegistered,
                "dpkg-query lists the al-* packages".into(),
                "dpkg-query lists the al-* packages".into(),
                Content::Other(why),
            )]
        })?;
        let mut places = Vec::new();
        let mut found = Vec::new();
        for db in &self.packages {
            let fields = said.get(&db.package).cloned().unwrap_or_default();
            let line = fields.join(" ");
            match place(db, &fields) {
                Some(place) => places.push((place, line)),
                None => found.push(status_violation(id, db, Kind::HalfRegistered, &line)),
            }
        }
        if found.is_empty() {
            Ok(places)
        } else {
            Err(found)
        }
    }

    /// How many of the packages needing a reinstall have files at neither version (neither
    /// version 1's nor version 2's as unpacked): what dpkg's `half-installed` can hide. Not a
    /// violation (dpkg says their files are unknown), but what a power cut left.
    fn mixed(&self, root: &Path, places: &[(Place, String)]) -> usize {
        let Ok(dir) = open_root(root) else { return 0 };
        let reinstall = self.packages.iter().zip(places).enumerate();
        reinstall
            .filter(|(_, (_, (place, _)))| *place == Place::Reinstall)
            .filter(|(i, (db, _))| {
                [Place::Old, Place::NewPending]
                    .iter()
                    .all(|&side| !self.files(&dir, *i, db, side, 0, Kind::DbTree).is_empty())
            })
            .count()
    }

    /// Each placed package's files and info files are its place's; `kind` names what breaks it.
    fn trees(
        &self,
        root: &Path,
        places: &[(Place, String)],
        id: usize,
        kind: Kind,
    ) -> Vec<Violation> {
        let dir = match open_root(root) {
            Ok(dir) => dir,
            Err(why) => return vec![database::unreadable_root(id, why)],
        };
        let mut found = Vec::new();
        for (i, (db, (place, _))) in self.packages.iter().zip(places).enumerate() {
            if *place == Place::Reinstall {
                continue;
            }
            found.extend(self.files(&dir, i, db, *place, id, kind));
            found.extend(info_files(&dir, db, *place, id, kind));
        }
        found
    }

    /// The package's paths at `place`; a path its place lacks that another package ships is
    /// that package's to hold (the file that moves, shared directories).
    fn files(
        &self,
        dir: &OwnedFd,
        i: usize,
        db: &Db,
        place: Place,
        id: usize,
        kind: Kind,
    ) -> Vec<Violation> {
        let (old, new, unpacked) = (&db.old.tree, &db.new.tree, db.new_tree());
        let want = if place == Place::Old { old } else { new };
        let paths: BTreeSet<&PathBuf> =
            old.0.keys().chain(new.0.keys()).chain(unpacked.0.keys()).collect();
        let shared = |path: &Path| self.owners.get(path).is_some_and(|o| o.iter().any(|&j| j != i));
        let pending = |path: &Path| place == Place::NewPending && db.new.conffiles.contains(path);
        let mut found = Vec::new();
        for path in paths {
            let expected = want.get(path);
            if expected == Content::Absent && shared(path) {
                continue;
            }
            let at = probe(dir, path);
            let fine = at == expected
                || (pending(path)
                    && at == old.get(path)
                    && probe(dir, &dpkg_new(path)) == expected)
                || (place == Place::NewPending
                    && is_pending_name(db, path)
                    && at == unpacked.get(path));
            if !fine {
                let kind = if kind == Kind::DbTree && self.conffile_lost(dir, db, place, path) {
                    Kind::ConffileLost
                } else {
                    kind
                };
                found.push(super::check::violation(
                    id,
                    path,
                    kind,
                    &old.get(path),
                    &expected,
                    &at,
                    None,
                ));
            }
        }
        found
    }

    /// Whether `path` (a conffile of version 2, or its `NAME.dpkg-new`) of a package dpkg
    /// records as configured at version 2 is as it was before configure renamed it: the old
    /// content at `NAME`, the new at `NAME.dpkg-new` (the same content for a conffile the
    /// upgrade did not change, whose `NAME.dpkg-new` configure removes). The unpack left it
    /// right and dpkg's configure recorded the conffile as done, but its rename (or removal)
    /// did not reach the disk (src/main/configure.c does neither with a directory sync; only
    /// the status is flushed, and on btrfs an fsync flushes that file alone). In the engine's
    /// cells, `unpack --recover` redoes it from unpack-dpkg's configure guard's record.
    fn conffile_lost(&self, dir: &OwnedFd, db: &Db, place: Place, path: &Path) -> bool {
        let conffile = if is_pending_name(db, path) {
            db.new.conffiles.iter().find(|c| dpkg_new(c) == path)
        } else {
            db.new.conffiles.iter().find(|c| c.as_path() == path)
        };
        let Some(conffile) = conffile else { return false };
        place == Place::New
            && probe(dir, conffile) == db.old.tree.get(conffile)
            && probe(dir, &dpkg_new(conffile)) == db.new.tree.get(conffile)
    }

    /// The administrator's repair and the checks after it: `repair-failed` violations, and
    /// whether `apt-get -f install` was needed.
    fn repair(&self, root: &Path, id: usize) -> (Vec<Violation>, bool) {
        let mut found = Vec::new();
        let mut failed = |what: &str, why: String| {
            found.push(db_violation(
                id,
                Path::new(database::ADMIN_DIR),
                Kind::RepairFailed,
                format!("{what} succeeds"),
                format!("{what} succeeds"),
                Content::Other(why),
            ))
        };
        let configured = said(&mut in_root(root, &["dpkg", "--configure", "-a"]));
        let apt_fix = configured.is_err() || audit(root).is_err() || apt_check(root).is_err();
        if apt_fix {
            let args = ["-f", "install", "-y"];
            if let Err(why) = said(installer_env(&mut apt_local::apt_get(root, None, &args))) {
                let before = configured
                    .err()
                    .map_or(String::new(), |c| format!("dpkg --configure -a: {c}; "));
                failed("apt-get -f install", format!("{before}{why}"));
            }
        }
        if let Err(why) = audit(root) {
            failed("dpkg --audit says nothing", why);
        }
        if let Err(why) = apt_check(root) {
            failed("apt-get check", why);
        }
        let repaired = match self.places(root, id) {
            Ok(places) => places,
            Err(v) => {
                found.extend(v.into_iter().map(|v| Violation { kind: Kind::RepairFailed, ..v }));
                return (found, apt_fix);
            }
        };
        for (db, (place, line)) in self.packages.iter().zip(&repaired) {
            if !matches!(place, Place::Old | Place::New) || !line.contains(" installed") {
                found.push(status_violation(id, db, Kind::RepairFailed, line));
            }
        }
        found.extend(self.trees(root, &repaired, id, Kind::RepairFailed));
        (found, apt_fix)
    }
}

impl Deeper for Apt {
    fn whole_root(&self) -> bool {
        false
    }

    fn check(
        &self,
        root: &Path,
        _: &Expected<'_>,
        side: Option<usize>,
        id: usize,
        after_returned: bool,
    ) -> Checked {
        side.map_or_else(Checked::default, |_| self.check_state(root, id, after_returned))
    }
}

/// Where the fields `Version`, `Status`, `Config-Version` put the package, if anywhere an
/// upgrade from `db.old` to `db.new` passes through.
fn place(db: &Db, fields: &[String]) -> Option<Place> {
    let [version, _want, flag, state, config] = fields else { return None };
    let configured =
        matches!(state.as_str(), "installed" | "triggers-awaited" | "triggers-pending");
    let between = matches!(state.as_str(), "unpacked" | "half-configured");
    if flag == "reinstreq" || state == "half-installed" {
        Some(Place::Reinstall)
    } else if flag != "ok" {
        None
    } else if *version == db.old.version && (configured || between) {
        Some(Place::Old)
    } else if *version == db.new.version && configured {
        Some(Place::New)
    } else if *version == db.new.version && state == "half-configured" && *config == *version {
        // Configured already, its `postinst triggered` running: dpkg's trigger processing
        // marks the package half-configured meanwhile (src/main/trigproc.c); its files and
        // conffiles are version 2's, and `dpkg --configure -a` runs the triggers again.
        Some(Place::New)
    } else if *version == db.new.version && between && *config == db.old.version {
        Some(Place::NewPending)
    } else {
        None
    }
}

/// `NAME.dpkg-new`.
fn dpkg_new(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".dpkg-new");
    PathBuf::from(name)
}

/// True for `NAME.dpkg-new` of a conffile of the new version.
fn is_pending_name(db: &Db, path: &Path) -> bool {
    db.new.conffiles.iter().any(|c| dpkg_new(c) == path)
}

/// The info files name the paths of the version at `place`.
fn info_files(dir: &OwnedFd, db: &Db, place: Place, id: usize, kind: Kind) -> Vec<Violation> {
    let version: &Version = if place == Place::Old { &db.old } else { &db.new };
    let kind = if kind == Kind::DbTree { Kind::HalfRegistered } else { kind };
    let mut found = Vec::new();
    for file in &INFO_FILES {
        let (suffix, expected, _) = file;
        let what = match read_info(dir, &db.package, file) {
            Ok(paths) if paths == expected(version) => continue,
            Ok(paths) => database::differ(&paths, &expected(version)),
            Err(e) => e,
        };
        let path = Path::new(database::ADMIN_DIR).join(format!("info/{}.{suffix}", db.package));
        let says = |v: &Version| format!("the {suffix} of version {}", v.version);
        found.push(db_violation(
            id,
            &path,
            kind,
            says(&db.old),
            says(&db.new),
            Content::Other(what),
        ));
    }
    found
}

fn status_violation(id: usize, db: &Db, kind: Kind, said: &str) -> Violation {
    let status = Path::new(database::ADMIN_DIR).join("status");
    let want = |v: &Version, s: &str| format!("{} {} {s}", db.package, v.version);
    db_violation(
        id,
        &status,
        kind,
        want(&db.old, "install ok installed"),
        want(&db.new, "install ok installed"),
        Content::Other(format!("{} {said}", db.package)),
    )
}

/// `Version`, the three words of `Status` and `Config-Version` of every `al-*` package, by
/// name, as `dpkg-query` in the chroot reads them.
fn statuses(root: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let format = "${Package} ${Version} ${Status} ${Config-Version}\\n";
    let out = said(&mut in_root(root, &["dpkg-query", "-W", "-f", format, "al-*"]))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            let name = words.next()?;
            let mut fields: Vec<String> = words.collect();
            fields.resize(5, String::new());
            Some((name, fields))
        })
        .collect())
}

/// `dpkg --audit` in the root says nothing.
fn audit(root: &Path) -> Result<(), String> {
    let out = said(&mut in_root(root, &["dpkg", "--audit"]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("dpkg --audit: {}", database::one_line(&text)))
    }
}

fn apt_check(root: &Path) -> Result<(), String> {
    said(installer_env(&mut apt_local::apt_get(root, None, &["check"]))).map(drop)
}

/// `chroot ROOT ARGS` in an installer's environment.
fn in_root(root: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("chroot");
    cmd.arg(root).args(args);
    installer_env(&mut cmd);
    cmd
}

/// Runs `cmd`; its output when it exits 0, else what it said on one line.
fn said(cmd: &mut Command) -> Result<Output, String> {
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(out),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(6)..].join(" | ");
            Err(format!(
                "{:?} exited {}: {tail}",
                cmd.get_program(),
                out.status.code().unwrap_or(-1)
            ))
        }
        Err(e) => Err(format!("cannot run {:?}: {e}", cmd.get_program())),
    }
}

/// [`said`] as the preparation's error, about `path`.
fn run_ok(cmd: &mut Command, path: &Path) -> Result<Output, CrashError> {
    let line: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    said(cmd).map_err(|why| CrashError::Tool {
        path: path.to_path_buf(),
        reason: format!("{}: {why}", line.join(" ")),
    })
}

fn copy(from: &Path, to: &Path) -> Result<(), CrashError> {
    let io = |what| move |source| CrashError::Io { path: to.to_path_buf(), what, source };
    std::fs::create_dir_all(to.parent().unwrap_or(to)).map_err(io("creating the parent of"))?;
    std::fs::copy(from, to).map(drop).map_err(io("copying the front end to"))
}

/// `unpack-dpkg` beside the `unpack` binary under test.
fn front_end(unpack: &Path) -> Result<PathBuf, CrashError> {
    let path = unpack.with_file_name("unpack-dpkg");
    if path.is_file() {
        Ok(path)
    } else {
        Err(CrashError::Tool { path, reason: "not found beside the unpack binary".into() })
    }
}

fn lab_error(path: &Path, e: crate::bench::Error) -> CrashError {
    CrashError::Tool { path: path.to_path_buf(), reason: unpack::error::one_line(&e) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::expect::Tree;

    fn db() -> Db {
        let version = |v: &str| Version {
            version: v.into(),
            tree: Tree::default(),
            conffiles: BTreeSet::new(),
        };
        Db { package: "al-01".into(), old: version("1.0"), new: version("2.0") }
    }

    fn fields(line: &str) -> Vec<String> {
        let mut f: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        f.resize(5, String::new());
        f
    }

    fn file(bytes: &[u8]) -> Content {
        let (len, hash) = crate::crash::expect::content_hash(&mut &bytes[..]).unwrap();
        Content::File { len, hash }
    }

    /// One package whose conffile changes and whose `data-0` goes, over a root written here.
    fn conffile_package() -> Db {
        let tree = |conf: &[u8], data: bool| {
            let mut paths = vec![("etc", Content::Dir), ("etc/al.conf", file(conf))];
            if data {
                paths.push(("usr/data-0", file(b"zero")));
            }
            Tree(paths.into_iter().map(|(p, c)| (PathBuf::from(p), c)).collect())
        };
        let conffiles: BTreeSet<PathBuf> = [PathBuf::from("etc/al.conf")].into();
        let version =
            |v: &str, tree| Version { version: v.into(), tree, conffiles: conffiles.clone() };
        Db {
            package: "al-01".into(),
            old: version("1.0", tree(b"old", true)),
            new: version("2.0", tree(b"new", false)),
        }
    }

    /// The paths the check finds off `place` in a root holding `files`.
    fn off(place: Place, files: &[(&str, &[u8])]) -> Vec<PathBuf> {
        off_as(place, files).into_iter().map(|(path, _)| path).collect()
    }

    /// The same, each path with the kind of its violation.
    fn off_as(place: Place, files: &[(&str, &[u8])]) -> Vec<(PathBuf, Kind)> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::create_dir_all(dir.path().join("usr")).unwrap();
        for (path, bytes) in files {
            std::fs::write(dir.path().join(path), bytes).unwrap();
        }
        let apt = Apt::new(dir.path().to_path_buf(), vec![conffile_package()]);
        let root = open_root(dir.path()).unwrap();
        let db = &apt.packages[0];
        let found = apt.files(&root, 0, db, place, 1, Kind::DbTree).into_iter();
        found.map(|v| (v.path, v.kind)).collect()
    }

    #[test]
    fn a_configured_package_whose_conffile_is_still_pending_lost_configure_s_rename() {
        let pending: &[(&str, &[u8])] =
            &[("etc/al.conf", b"old"), ("etc/al.conf.dpkg-new", b"new")];
        let lost = [
            (PathBuf::from("etc/al.conf"), Kind::ConffileLost),
            ("etc/al.conf.dpkg-new".into(), Kind::ConffileLost),
        ];
        assert_eq!(off_as(Place::New, pending), lost);
        // Anything else wrong with it is the tree's, as before.
        let torn: &[(&str, &[u8])] = &[("etc/al.conf", b"ol"), ("etc/al.conf.dpkg-new", b"new")];
        assert!(off_as(Place::New, torn).iter().all(|(_, kind)| *kind == Kind::DbTree));
        let gone: &[(&str, &[u8])] = &[("etc/al.conf", b"old")];
        assert_eq!(off_as(Place::New, gone), [(PathBuf::from("etc/al.conf"), Kind::DbTree)]);
    }

    #[test]
    fn each_place_has_its_files_and_a_pending_conffile_may_be_either_side_of_its_move() {
        let old: &[(&str, &[u8])] = &[("etc/al.conf", b"old"), ("usr/data-0", b"zero")];
        assert!(off(Place::Old, old).is_empty());
        assert_eq!(off(Place::New, old), [PathBuf::from("etc/al.conf"), "usr/data-0".into()]);
        let pending: &[(&str, &[u8])] =
            &[("etc/al.conf", b"old"), ("etc/al.conf.dpkg-new", b"new")];
        assert!(off(Place::NewPending, pending).is_empty());
        let moved: &[(&str, &[u8])] = &[("etc/al.conf", b"new")];
        assert!(off(Place::NewPending, moved).is_empty());
        assert!(off(Place::New, moved).is_empty());
        assert_eq!(
            off(Place::New, pending),
            [PathBuf::from("etc/al.conf"), "etc/al.conf.dpkg-new".into()],
            "configured means moved"
        );
        let torn: &[(&str, &[u8])] = &[("etc/al.conf", b""), ("etc/al.conf.dpkg-new", b"new")];
        assert_eq!(off(Place::NewPending, torn), [PathBuf::from("etc/al.conf")]);
    }

    #[test]
    fn the_status_places_each_package_where_an_upgrade_passes_or_nowhere() {
        let db = db();
        let at = |line: &str| place(&db, &fields(line));
        assert_eq!(at("1.0 install ok installed"), Some(Place::Old));
        assert_eq!(at("1.0 install ok half-configured 1.0"), Some(Place::Old), "the old prerm ran");
        assert_eq!(at("1.0 install ok unpacked 1.0"), Some(Place::Old));
        assert_eq!(at("2.0 install ok installed 2.0"), Some(Place::New));
        assert_eq!(at("2.0 install ok triggers-awaited 2.0"), Some(Place::New));
        assert_eq!(at("2.0 install ok unpacked 1.0"), Some(Place::NewPending));
        assert_eq!(at("2.0 install ok half-configured 1.0"), Some(Place::NewPending));
        assert_eq!(
            at("2.0 install ok half-configured 2.0"),
            Some(Place::New),
            "in trigger processing"
        );
        assert_eq!(at("1.0 install reinstreq half-installed 1.0"), Some(Place::Reinstall));
        assert_eq!(at("2.0 install ok half-installed 1.0"), Some(Place::Reinstall));
        assert_eq!(at("2.0 install ok unpacked"), None, "unpacked over nothing");
        assert_eq!(at("3.0 install ok installed"), None);
        assert_eq!(at("1.0 deinstall ok config-files"), None);
        assert_eq!(at(""), None, "not listed");
    }
}
