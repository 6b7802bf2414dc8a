//! The `apt-local` workload's packages: a local apt repository of packages the lab builds, at
//! version 1 and at version 2, so that an apt run (`apt-get install` of version 1, then
//! `apt-get upgrade` to version 2) needs no network beyond the minbase it starts from and is
//! small enough for CI.
//!
//! The set is made to meet what an installer meets in a real upgrade, a little of each:
//! maintainer scripts (every package has the four, logging their calls), conffiles (changed in
//! version 2 for every other package), `Pre-Depends` and `Depends` chains, a file trigger
//! (`al-00` is interested in `/usr/share/al-docs`, where every package ships a file), files
//! dropped and added by the upgrade, and a file that moves from one package to another with
//! `Replaces` and `Breaks`. Contents are deterministic, so two repositories of one spec are
//! the same packages.
//!
//! Why staged trees and `dpkg-deb --build` rather than the synthetic writer's hand-made
//! archives: these packages carry control files and scripts that must be exactly what dpkg
//! builds and reads, and they are small (a few hundred files in all). The index is
//! `dpkg-scanpackages`' (dpkg-dev). This module writes only under the directory it is given.

use super::command::{output, require};
use super::{Error, Result};
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How many packages, at least 2 (`al-00` is the one the others pre-depend on).
pub const DEFAULT_PACKAGES: usize = 24;

/// The log every maintainer script appends its call to, in the root.
pub const SCRIPT_LOG: &str = "/var/log/apt-local.log";

/// A repository of `packages` packages at `version` (1 or 2) in `dir`: the `.deb` files and
/// a `Packages` index, a flat repository for `deb [trusted=yes] file:DIR ./`. Returns the
/// package names, in order.
pub fn build(dir: &Path, packages: usize, version: u32) -> Result<Vec<String>> {
    if packages < 2 || !(1..=2).contains(&version) {
        return Err(Error::Usage(format!(
            "apt-local: {packages} packages at version {version}: needs at least 2 packages, version 1 or 2"
        )));
    }
    require("dpkg-deb", "dpkg")?;
    require("dpkg-scanpackages", "dpkg-dev")?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let stage = dir.join(".stage");
    let names: Vec<String> = (0..packages).map(name).collect();
    for (i, me) in names.iter().enumerate() {
        if stage.exists() {
            fs::remove_dir_all(&stage).map_err(io(&stage))?;
        }
        let package = Package { i, count: packages, version };
        for (path, bytes, mode) in package.files() {
            let at = stage.join(path.trim_start_matches('/'));
            let parent = at.parent().unwrap_or(&stage);
            fs::create_dir_all(parent).map_err(io(parent))?;
            fs::write(&at, bytes).map_err(io(&at))?;
            fs::set_permissions(&at, fs::Permissions::from_mode(mode)).map_err(io(&at))?;
        }
        let deb = dir.join(format!("{me}_{}_all.deb", package.version()));
        output(
            Command::new("dpkg-deb")
                .args(["--build", "--root-owner-group", "-Zxz"])
                .arg(&stage)
                .arg(&deb),
            &deb,
        )?;
    }
    fs::remove_dir_all(&stage).map_err(io(&stage))?;
    let index = output(
        Command::new("dpkg-scanpackages").args(["--multiversion", "."]).current_dir(dir),
        dir,
    )?;
    let packages_file = dir.join("Packages");
    fs::write(&packages_file, index).map_err(io(&packages_file))?;
    Ok(names)
}

/// The name of package `i`.
pub fn name(i: usize) -> String {
    format!("al-{i:02}")
}

/// Package `i` of a set of `count` at `version`.
struct Package {
    i: usize,
    count: usize,
    version: u32,
}

impl Package {
    fn version(&self) -> String {
        format!("{}.0", self.version)
    }

    /// Every file of the staged tree: (path, bytes, mode), `DEBIAN/` included.
    fn files(&self) -> Vec<(String, Vec<u8>, u32)> {
        let (i, v, me) = (self.i, self.version, name(self.i));
        let mut files = vec![("DEBIAN/control".to_string(), self.control().into_bytes(), 0o644)];
        for script in ["preinst", "postinst", "prerm", "postrm"] {
            files.push((format!("DEBIAN/{script}"), self.script(script).into_bytes(), 0o755));
        }
        let conffile = format!("/etc/apt-local/{me}.conf");
        files.push(("DEBIAN/conffiles".into(), format!("{conffile}\n").into_bytes(), 0o644));
        // Every other package changes its conffile in version 2.
        let setting = if i % 2 == 0 { v } else { 1 };
        files.push((conffile, format!("# {me}\nsetting={setting}\n").into_bytes(), 0o644));
        files.push((
            format!("/usr/bin/{me}"),
            format!("#!/bin/sh\necho {me} {}\n", self.version()).into_bytes(),
            0o755,
        ));
        // Version 1 ships data-0 to data-N, version 2 drops data-0 and adds data-new.
        let data = 8 + i % 8;
        let first = if v == 1 { 0 } else { 1 };
        for k in first..data {
            files.push((format!("/usr/share/{me}/data-{k}"), content(i, k, v), 0o644));
        }
        if v == 2 {
            files.push((format!("/usr/share/{me}/data-new"), content(i, data, v), 0o644));
        }
        files.push((
            format!("/usr/share/al-docs/{me}.txt"),
            format!("{me} {}\n", self.version()).into_bytes(),
            0o644,
        ));
        // The moving file: the second-to-last package's in version 1, the last one's in
        // version 2 (which Replaces and Breaks the older one).
        let moving = "/usr/share/al-shared/moving";
        if (v == 1 && i == self.count - 2) || (v == 2 && i == self.count - 1) {
            files.push((moving.into(), format!("moving, from {me} {v}\n").into_bytes(), 0o644));
        }
        if i == 0 {
            files.push((
                "DEBIAN/triggers".into(),
                b"interest /usr/share/al-docs\n".to_vec(),
                0o644,
            ));
        }
        files
    }

    fn control(&self) -> String {
        let (i, me) = (self.i, name(self.i));
        let mut control = format!(
            "Package: {me}\nVersion: {}\nArchitecture: all\nMaintainer: unpack lab <lab@unpack.invalid>\nPriority: optional\nSection: misc\n",
            self.version()
        );
        if i > 0 {
            let _ = writeln!(control, "Pre-Depends: al-00 (>= {})", self.version());
            let _ = writeln!(control, "Depends: {}", name(i - 1));
        }
        if self.version == 2 && i == self.count - 1 {
            let older = name(i - 1);
            let _ = writeln!(control, "Replaces: {older} (<< 2.0)\nBreaks: {older} (<< 2.0)");
        }
        let _ = writeln!(control, "Description: apt-local workload package {i}");
        control
    }

    /// A maintainer script that logs its call to [`SCRIPT_LOG`]; `al-00`'s postinst also
    /// rebuilds the index of `/usr/share/al-docs` when triggered.
    fn script(&self, script: &str) -> String {
        let me = name(self.i);
        let mut text = format!(
            "#!/bin/sh\nset -e\necho \"{me} {} {script} $*\" >> {SCRIPT_LOG}\n",
            self.version()
        );
        if self.i == 0 && script == "postinst" {
            text.push_str(
                "if [ \"$1\" = triggered ] || [ \"$1\" = configure ]; then\n    ls /usr/share/al-docs > /var/lib/al-docs.index\nfi\n",
            );
        }
        if self.i == 0 && script == "postrm" {
            text.push_str("if [ \"$1\" = purge ]; then rm -f /var/lib/al-docs.index; fi\n");
        }
        text
    }
}

/// Deterministic file contents of a few hundred bytes to 16 KiB: package `i`, file `k`,
/// version `v`.
fn content(i: usize, k: usize, v: u32) -> Vec<u8> {
    let len = 256 << ((i + k) % 7);
    let mut state = (i as u64) << 32 ^ (k as u64) << 8 ^ u64::from(v);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        // xorshift64: text-like bytes that compress as data would, not to nothing.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push(b'a' + (state % 26) as u8);
        if state % 61 == 0 {
            out.push(b'\n');
        }
    }
    out
}

/// The paths [`build`] writes a repository to for each version under `dir`.
pub fn repository(dir: &Path, version: u32) -> PathBuf {
    dir.join(format!("v{version}"))
}

/// Where a root's apt finds the repositories: `ROOT/srv/apt-local/vN`.
const IN_ROOT: &str = "srv/apt-local";

/// Copies the repositories of both versions under `dir` into `root` and points the root's apt
/// at version `version`'s alone (its `sources.list` replaced, `sources.list.d` emptied of
/// `.list` and `.sources` files), ready for `apt-get update`.
pub fn use_version(root: &Path, dir: &Path, version: u32) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let from = repository(dir, version);
    let to = root.join(IN_ROOT).join(format!("v{version}"));
    if !to.exists() {
        fs::create_dir_all(&to).map_err(io(&to))?;
        for entry in fs::read_dir(&from).map_err(io(&from))? {
            let entry = entry.map_err(io(&from))?;
            let target = to.join(entry.file_name());
            fs::copy(entry.path(), &target).map_err(io(&target))?;
        }
    }
    let parts = root.join("etc/apt/sources.list.d");
    if parts.is_dir() {
        for entry in fs::read_dir(&parts).map_err(io(&parts))? {
            let path = entry.map_err(io(&parts))?.path();
            if path.extension().is_some_and(|e| e == "list" || e == "sources") {
                fs::remove_file(&path).map_err(io(&path))?;
            }
        }
    }
    let sources = root.join("etc/apt/sources.list");
    let line = format!("deb [trusted=yes] file:/{IN_ROOT}/v{version} ./\n");
    fs::write(&sources, line).map_err(io(&sources))
}

/// `chroot ROOT apt-get ARGS` as the workload runs it: no terminal (`Dpkg::Use-Pty=0`, as a
/// chroot has no /dev/pts), no questions (`DEBIAN_FRONTEND=noninteractive`), and with `dpkg`
/// as apt's dpkg when given (`Dir::Bin::dpkg`, a path inside the root: a dpkg front end).
pub fn apt_get(root: &Path, dpkg: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = Command::new("chroot");
    cmd.arg(root).args(apt_get_words(dpkg, args)).env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

/// The words of [`apt_get`]'s command inside the root, from `apt-get` on, for a caller that
/// starts the chroot itself (the bench, under a timer and an RSS counter).
pub fn apt_get_words(dpkg: Option<&str>, args: &[&str]) -> Vec<String> {
    let mut words: Vec<String> =
        ["apt-get", "-q", "-o", "Dpkg::Use-Pty=0"].iter().map(|w| w.to_string()).collect();
    if let Some(dpkg) = dpkg {
        words.extend(["-o".to_string(), format!("Dir::Bin::dpkg={dpkg}")]);
    }
    words.extend(args.iter().map(|a| a.to_string()));
    words
}
