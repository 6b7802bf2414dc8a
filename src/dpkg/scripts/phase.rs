//! Where the transaction meets the maintainer scripts of the unpack phase (Debian Policy 6.6,
//! dpkg's src/main/unpack.c): for each package, before any of its files is written, the old
//! `prerm upgrade` and the new `preinst`; after the commit's renames, the old `postrm upgrade`.
//!
//! A failing prerm or preinst ends the call before any rename: the transaction rolls back (the
//! root's files stay as they were), and every package of the call whose scripts ran is unwound
//! as 6.6 says (`postrm abort-install` / `abort-upgrade`, the old `postinst abort-upgrade`).
//! A failing `postrm upgrade` comes after the commit: the new `postrm failed-upgrade` is tried
//! as dpkg tries it; if that fails too the call reports it (exit 1), and the package stays
//! committed, unpacked: its files and database are the new version's. The old scripts are
//! copied aside before the commit, since the commit's renames replace the info files they live
//! in.

use super::runner::{self as scripts, Call, Of, Owner, NEW_SCRIPTS};
use crate::dpkg::database::Database;
use crate::dpkg::format::deb822::{Field, Stanza};
use crate::dpkg::format::status::{self, State, StatusField, Want};
use crate::durability::Directory;
use crate::error::Result;
use crate::options::ScriptOutput;
use crate::txn::transaction::Transaction;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The scripts dpkg keeps and this phase runs.
const SCRIPTS: [&str; 4] = ["preinst", "postinst", "prerm", "postrm"];

impl Database {
    /// Turns the scripts on: `root` is chrooted into (unless `/`), standard output goes to
    /// `output`.
    pub fn run_scripts(&mut self, root: &Path, output: ScriptOutput) {
        let dpkg = self
            .installed
            .packages
            .iter()
            .find(|p| p.name == "dpkg" && p.status.state != State::NotInstalled);
        let version = dpkg.map(|p| p.version.to_string());
        self.scripts =
            Some(scripts::Runner::new(root, &self.admin.rel, output, version.as_deref()));
    }

    /// The scripts of the package begun last that come before its files: the old `prerm
    /// upgrade`, the new `preinst`. On a failure, unwinds every package of the call whose
    /// scripts ran, and fails.
    pub fn before_files(&mut self, tx: &Transaction<'_>) -> Result<()> {
        let index = self.incoming.len() - 1;
        self.emit_before_files(index);
        if self.scripts.is_none() {
            return Ok(());
        }
        self.write_new_scripts(index)?;
        let result = self.prerm_and_preinst(index, tx);
        if result.is_err() {
            self.unwind_all();
        }
        result
    }

    /// The old `prerm upgrade` and the new `preinst`, each after the package's state is
    /// recorded durably as dpkg records it ([`crate::dpkg::updates`]).
    fn prerm_and_preinst(&mut self, index: usize, tx: &Transaction<'_>) -> Result<()> {
        let inc = &self.incoming[index];
        let new_version = inc.archive.control.version.clone();
        let old = inc.old.map(|o| {
            (self.installed.packages[o].version.clone(), self.installed.packages[o].status.state)
        });
        let configured = matches!(
            old,
            Some((
                _,
                State::HalfConfigured
                    | State::TriggersAwaited
                    | State::TriggersPending
                    | State::Installed
            ))
        );
        if let Some((old_version, state)) = &old {
            if configured {
                if self.has_old_script(index, "prerm")? {
                    self.note_half_configured(tx, index)?;
                }
                let args = vec!["upgrade".to_string(), new_version.clone()];
                if self
                    .call_noted(index, &Call { of: Of::Old, script: "prerm", args: args.clone() })?
                    == Some(false)
                {
                    let fallback = Call {
                        of: Of::New,
                        script: "prerm",
                        args: vec![
                            "failed-upgrade".into(),
                            old_version.clone(),
                            new_version.clone(),
                        ],
                    };
                    if self.call_noted(index, &fallback)? != Some(true) {
                        if *state != State::HalfConfigured {
                            self.call_noted(
                                index,
                                &Call {
                                    of: Of::Old,
                                    script: "postinst",
                                    args: vec!["abort-upgrade".into(), new_version.clone()],
                                },
                            )?;
                        }
                        return Err(scripts::failed(
                            &self.incoming[index].name,
                            "prerm",
                            &to_str(&args),
                            "the new prerm failed-upgrade failed too; unwound, nothing changed",
                        ));
                    }
                }
                if *state != State::HalfConfigured {
                    self.incoming[index].unwind.push(Call {
                        of: Of::Old,
                        script: "postinst",
                        args: vec!["abort-upgrade".into(), new_version.clone()],
                    });
                }
            }
        }
        let inc = &self.incoming[index];
        let (args, abort) = match (&old, inc.old.map(|o| self.installed.packages[o].status.state)) {
            (None, _) => (vec!["install".to_string()], vec!["abort-install".to_string()]),
            (Some((v, _)), Some(State::ConfigFiles)) => (
                vec!["install".into(), v.clone(), new_version.clone()],
                vec!["abort-install".into(), v.clone(), new_version.clone()],
            ),
            (Some((v, _)), _) => (
                vec!["upgrade".into(), v.clone(), new_version.clone()],
                vec!["abort-upgrade".into(), v.clone(), new_version.clone()],
            ),
        };
        self.deconfigure_others(index, tx)?;
        self.prerm_conflictors(index, tx)?;
        // Undone in reverse: the postrm abort-* first, then the conflictors' postinst
        // abort-remove, the deconfigured packages' postinst abort-deconfigure, then the old
        // postinst abort-upgrade.
        self.incoming[index].unwind.insert(0, Call { of: Of::New, script: "postrm", args: abort });
        if self.incoming[index].archive.members.iter().any(|m| m.name == "preinst") {
            self.note_half_installed(tx, index)?;
        }
        if self.call_noted(index, &Call { of: Of::New, script: "preinst", args: args.clone() })?
            == Some(false)
        {
            return Err(scripts::failed(
                &self.incoming[index].name,
                "preinst",
                &to_str(&args),
                "unwound as Debian Policy 6.6 says; the root's files are as they were",
            ));
        }
        // The files are written where the diversions say after the preinst, as dpkg writes them.
        self.installed.diversions = self.admin.diversions()?;
        Ok(())
    }

    /// The installed packages package `index` deconfigures (a Multi-Arch: same set it takes
    /// out of sync, what it breaks, what a conflictor's removal leaves without a dependency),
    /// as dpkg deconfigures them before the new preinst (src/main/unpack.c
    /// pkg_deconfigure_others): each recorded `half-configured`, then its `prerm deconfigure
    /// in-favour PKG VERSION [removing CONFLICTOR VERSION]`, undone by its `postinst
    /// abort-deconfigure` with the same arguments if the call fails (the prerm's own failure
    /// included, as dpkg's cleanup runs it).
    fn deconfigure_others(&mut self, index: usize, tx: &Transaction<'_>) -> Result<()> {
        let inc = &self.incoming[index];
        let favour = status::info_name(&inc.name, &inc.arch, inc.multi_arch_same);
        let version = inc.archive.control.version.clone();
        for (other, removing) in inc.deconfigures.clone() {
            let mut tail = vec!["in-favour".to_string(), favour.clone(), version.clone()];
            if let Some(c) = removing {
                let c = &self.installed.packages[c];
                tail.extend(["removing".to_string(), c.info_name(), c.version.clone()]);
            }
            let args = |action: &str| [vec![action.to_string()], tail.clone()].concat();
            if self.has_installed_script(other, "prerm")? {
                self.note_other(tx, other, State::HalfConfigured)?;
            }
            let undo = Call {
                of: Of::Installed(other),
                script: "postinst",
                args: args("abort-deconfigure"),
            };
            self.incoming[index].unwind.insert(0, undo);
            let prerm =
                Call { of: Of::Installed(other), script: "prerm", args: args("deconfigure") };
            if self.call_noted(index, &prerm)? == Some(false) {
                return Err(scripts::failed(
                    &self.installed.packages[other].name,
                    "prerm",
                    &to_str(&prerm.args),
                    "unwound as Debian Policy 6.6 says; the root's files are as they were",
                ));
            }
        }
        Ok(())
    }

    /// The conflicting packages package `index` removes, as dpkg starts removing them before
    /// the new preinst: a configured one recorded `half-configured`, its `prerm remove
    /// in-favour PKG VERSION` run (undone by its `postinst abort-remove in-favour PKG VERSION`
    /// if the call fails), then recorded `half-installed`. Their files go in the package's
    /// commit ([`crate::dpkg::conflictors`]), their `postrm remove` after it.
    fn prerm_conflictors(&mut self, index: usize, tx: &Transaction<'_>) -> Result<()> {
        let inc = &self.incoming[index];
        let favour = status::info_name(&inc.name, &inc.arch, inc.multi_arch_same);
        let tail = vec!["in-favour".to_string(), favour, inc.archive.control.version.clone()];
        for c in inc.conflictors.clone() {
            let state = self.installed.packages[c].status.state;
            if !crate::dpkg::database::configured(state) {
                continue;
            }
            self.note_other(tx, c, State::HalfConfigured)?;
            if state != State::HalfConfigured {
                let undo = Call {
                    of: Of::Installed(c),
                    script: "postinst",
                    args: [vec!["abort-remove".to_string()], tail.clone()].concat(),
                };
                self.incoming[index].unwind.insert(0, undo);
            }
            let args = [vec!["remove".to_string()], tail.clone()].concat();
            let prerm = Call { of: Of::Installed(c), script: "prerm", args };
            if self.call_noted(index, &prerm)? == Some(false) {
                return Err(scripts::failed(
                    &self.installed.packages[c].name,
                    "prerm",
                    &to_str(&prerm.args),
                    "unwound as Debian Policy 6.6 says; the root's files are as they were",
                ));
            }
            self.note_other(tx, c, State::HalfInstalled)?;
        }
        Ok(())
    }

    /// Runs the unwinding calls of every package whose scripts ran, last package first. Their
    /// own failures are not fatal here: the call fails anyway, with the first error.
    pub fn unwind_all(&mut self) {
        for index in (0..self.incoming.len()).rev() {
            let calls = std::mem::take(&mut self.incoming[index].unwind);
            for c in &calls {
                let _ = self.call_noted(index, c);
            }
        }
        let _ = scripts::remove_new(&self.admin.dir);
    }

    /// Before the commit: keeps the old postrm of each upgraded package aside (the commit
    /// replaces the info file it lives in) for [`Database::after_commit`].
    pub fn before_commit(&mut self) -> Result<()> {
        if self.scripts.is_none() {
            return Ok(());
        }
        for index in 0..self.incoming.len() {
            let Some(o) = self.incoming[index].old else { continue };
            let file = format!("{}.postrm", self.installed.packages[o].info_name());
            if let Some(bytes) = crate::dpkg::admin::read_file(&self.admin.info, &file, 64 << 20)? {
                let dir = self.new_dir(index)?;
                scripts::write_file(&dir, "old-postrm", &bytes, 0o755)?;
            }
        }
        for &(o, by) in &self.disappearing {
            let file = format!("{}.postrm", self.installed.packages[o].info_name());
            if let Some(bytes) = crate::dpkg::admin::read_file(&self.admin.info, &file, 64 << 20)? {
                scripts::write_file(&self.new_dir(by)?, &format!("disappear-{o}"), &bytes, 0o755)?;
            }
        }
        Ok(())
    }

    /// After the commit's renames: the old `postrm upgrade NEW` of each upgraded package, and
    /// the new `postrm failed-upgrade OLD NEW` when it fails. Returns the packages for which
    /// both failed (see [`Database::postrm_failure_state`]) with the first such error.
    pub fn after_commit(&mut self) -> Result<Option<(Vec<usize>, crate::error::Error)>> {
        if self.scripts.is_none() {
            return Ok(None);
        }
        let mut first_error = None;
        let mut failed = Vec::new();
        for index in 0..self.incoming.len() {
            let Some(o) = self.incoming[index].old else { continue };
            if self.installed.packages[o].status.state == State::ConfigFiles {
                continue;
            }
            let old_version = self.installed.packages[o].version.clone();
            let new_version = self.incoming[index].archive.control.version.clone();
            let args = vec!["upgrade".to_string(), new_version.clone()];
            let dir = self.new_dir(index)?;
            let in_root = self.in_root(&dir);
            let ran = self.run_in(index, Of::Old, &dir, &in_root, "old-postrm", "postrm", &args)?;
            if ran == Some(false) {
                let fallback = vec!["failed-upgrade".to_string(), old_version, new_version];
                if self.run_new(index, "postrm", &fallback)? != Some(true) {
                    failed.push(index);
                    first_error.get_or_insert_with(|| {
                        scripts::failed(&self.incoming[index].name, "postrm", &to_str(&args), "and the new postrm failed-upgrade failed too: the new version's files are committed, and the package is recorded half-installed, for a reinstall")
                    });
                }
            }
        }
        // Conflictors removed: `postrm remove`, as dpkg's removal runs it once their files
        // are gone. A failure leaves the conflictor half-installed, its replacement unpacked.
        for (c, by) in self.conflictor_calls() {
            let call = Call { of: Of::Installed(c), script: "postrm", args: vec!["remove".into()] };
            if self.call(by, &call)? == Some(false) {
                self.conflict_failed.push(c);
                first_error.get_or_insert_with(|| {
                    scripts::failed(&self.installed.packages[c].name, "postrm", &["remove"], "the package that replaces it is unpacked, and it is recorded half-installed: dpkg --remove finishes its removal")
                });
            }
        }
        // Packages whose every file another took: `postrm disappear OVERWRITER VERSION`, as
        // dpkg calls it, its failure only a warning there too.
        for &(o, by) in &self.disappearing {
            let gone = &self.installed.packages[o];
            let inc = &self.incoming[by];
            let owner = Owner { package: &gone.name, arch: &gone.arch, refcount: 1 };
            let args = ["disappear", inc.name.as_str(), inc.archive.control.version.as_str()];
            let dir = self.new_dir(by)?;
            if let Some(runner) = &self.scripts {
                let in_root = self.in_root(&dir);
                if runner.run(&dir, &in_root, &format!("disappear-{o}"), "postrm", &owner, &args)?
                    == Some(false)
                {
                    let warning =
                        scripts::failed(&gone.name, "postrm", &args, "ignored, as dpkg ignores it");
                    let _ = writeln!(std::io::stderr(), "unpack: warning: {warning}");
                }
            }
        }
        scripts::remove_new(&self.admin.dir)?;
        Ok(first_error.map(|e| (failed, e)))
    }

    /// The removed conflictors that keep a postrm, each with the package of the call that
    /// removed it.
    fn conflictor_calls(&self) -> Vec<(usize, usize)> {
        let kept: HashSet<usize> =
            self.conflicted.iter().filter(|(_, kept)| *kept).map(|(c, _)| *c).collect();
        self.incoming
            .iter()
            .enumerate()
            .flat_map(|(by, inc)| inc.conflictors.iter().map(move |&c| (c, by)))
            .filter(|(c, _)| kept.contains(c))
            .collect()
    }

    /// Writes the package's scripts into its own directory under [`NEW_SCRIPTS`].
    /// None for a package without scripts: nothing is made, so a call that fails leaves even
    /// the admin directory's times as they were.
    fn write_new_scripts(&mut self, index: usize) -> Result<()> {
        if !self.incoming[index].archive.members.iter().any(|m| SCRIPTS.contains(&m.name.as_str()))
        {
            return Ok(());
        }
        // The whole control archive, as dpkg extracts it into tmp.ci: the scripts may read
        // the rest (debconf reads `control`, `templates` and `config`).
        let dir = self.new_dir(index)?;
        let archive = &self.incoming[index].archive;
        scripts::write_file(&dir, "control", archive.text.as_bytes(), 0o644)?;
        for m in archive.members.iter().filter(|m| m.name != "control" && !m.name.contains('/')) {
            scripts::write_file(&dir, &m.name, &m.bytes, m.mode)?;
        }
        Ok(())
    }

    /// `ADMIN/tmp.ci.unpack-new/INDEX/`, made if missing.
    fn new_dir(&self, index: usize) -> Result<Directory> {
        let top = crate::fs::root::open_or_make_dir(&self.admin.dir, NEW_SCRIPTS)?;
        crate::fs::root::open_or_make_dir(&top, &index.to_string())
    }

    /// [`Database::call`], noting that a script ran.
    fn call_noted(&mut self, index: usize, call: &Call) -> Result<Option<bool>> {
        let ran = self.call(index, call)?;
        self.incoming[index].scripts_ran |= ran.is_some();
        Ok(ran)
    }

    /// After a failed call whose scripts ran and were unwound: the database as dpkg leaves a
    /// package whose preinst failed (`install ok not-installed` for a new one, `install ok
    /// config-files` for one that had only its config files, an upgraded one as it was), for
    /// every such package, written through `tx`. False: no script ran, nothing to record (the
    /// root stays as it was).
    pub fn failure_state(&self, tx: &mut Transaction<'_>) -> Result<bool> {
        if !self.incoming.iter().any(|i| i.scripts_ran) {
            return Ok(false);
        }
        let mut stanzas: Vec<Stanza> =
            self.installed.packages.iter().map(|p| p.stanza.clone()).collect();
        for inc in self.incoming.iter().filter(|i| i.scripts_ran) {
            match (inc.old, inc.slot) {
                // A not-installed stanza: Package, Status, and what dpkg keeps of the control
                // file it read (unpack.c's cleanup blanks the rest).
                (None, slot) => {
                    let kept = ["Priority", "Section", "Architecture", "Multi-Arch"];
                    let mut fields = vec![
                        Field { name: "Package".into(), value: inc.name.clone() },
                        Field { name: "Status".into(), value: "install ok not-installed".into() },
                    ];
                    fields.extend(kept.iter().filter_map(|name| {
                        let value = if *name == "Architecture" {
                            Some(inc.arch.as_str())
                        } else {
                            inc.control.get(name)
                        };
                        value.map(|v| Field { name: (*name).into(), value: v.into() })
                    }));
                    let stanza = Stanza { fields, line: 0 };
                    match slot {
                        Some(s) => stanzas[s] = stanza,
                        None => stanzas.push(stanza),
                    }
                }
                (Some(o), _) if self.installed.packages[o].status.state == State::ConfigFiles => {
                    let status = self.installed.packages[o].status;
                    let wanted = StatusField { want: Want::Install, ..status };
                    if let Some(f) =
                        stanzas[o].fields.iter_mut().find(|f| f.name.eq_ignore_ascii_case("Status"))
                    {
                        f.value = wanted.to_string();
                    }
                }
                (Some(_), _) => {}
            }
        }
        let refs: Vec<&Stanza> = stanzas.iter().collect();
        tx.add_generated(&self.admin.rel.join("status"), &status::write_status(&refs), 0o644)?;
        if self.installed.triggers_missing {
            self.make_triggers_dir(tx)?;
        }
        tx.plan_removals(self.record_paths())?;
        Ok(true)
    }

    /// After both postrms of an upgrade failed behind the commit: the status file the commit
    /// wrote, those packages `install reinstreq half-installed` (dpkg --audit names them, apt
    /// reinstalls them), written through `tx`.
    pub fn postrm_failure_state(&self, failed: &[usize], tx: &mut Transaction<'_>) -> Result<()> {
        let mut stanzas = self.status.clone();
        for &c in &self.conflict_failed {
            let p = &self.installed.packages[c];
            let same = |s: &Stanza| {
                s.get("Package") == Some(p.name.as_str())
                    && s.get("Architecture") == Some(p.arch.as_str())
            };
            for stanza in stanzas.iter_mut().filter(|s| same(s)) {
                let state = StatusField { state: State::HalfInstalled, ..p.status };
                status::set_known(stanza, "Status", state.to_string());
            }
        }
        for &index in failed {
            let inc = &self.incoming[index];
            let same = |s: &Stanza| {
                s.get("Package") == Some(inc.name.as_str())
                    && s.get("Architecture") == Some(inc.arch.as_str())
            };
            for stanza in stanzas.iter_mut().filter(|s| same(s)) {
                if let Some(f) = stanza.fields.iter_mut().find(|f| f.name == "Status") {
                    f.value = StatusField {
                        want: Want::Install,
                        flag: status::Flag::Reinstreq,
                        state: State::HalfInstalled,
                    }
                    .to_string();
                }
            }
        }
        let refs: Vec<&Stanza> = stanzas.iter().collect();
        tx.add_generated(&self.admin.rel.join("status"), &status::write_status(&refs), 0o644)?;
        tx.plan_removals(self.record_paths())
    }

    /// Whether the installed version of package `index` has `script` in `info/`.
    fn has_old_script(&self, index: usize, script: &str) -> Result<bool> {
        match self.incoming[index].old {
            Some(o) => self.has_installed_script(o, script),
            None => Ok(false),
        }
    }

    /// Whether installed package `o` has `script` in `info/`.
    fn has_installed_script(&self, o: usize, script: &str) -> Result<bool> {
        let file = format!("{}.{script}", self.installed.packages[o].info_name());
        match rustix::fs::statat(
            self.admin.info.fd(),
            file.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(_) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(crate::error::Error::root(self.admin.info.path().join(&file), "stat", e)),
        }
    }

    /// Whether a script of a package of the call ran: then the commit checks first that no
    /// script removed a name the call has pending ([`Transaction::check_pending`]).
    pub fn scripts_ran(&self) -> bool {
        self.incoming.iter().any(|i| i.scripts_ran)
    }

    /// Runs `call` for package `index`: its new script, the installed version's in `info/`, or
    /// a sibling instance's there.
    fn call(&self, index: usize, call: &Call) -> Result<Option<bool>> {
        let installed = match call.of {
            Of::New => {
                if !self.incoming[index].archive.members.iter().any(|m| m.name == call.script) {
                    return Ok(None);
                }
                return self.run_new(index, call.script, &call.args);
            }
            Of::Old => match self.incoming[index].old {
                Some(o) => o,
                None => return Ok(None),
            },
            Of::Installed(o) => o,
        };
        let file = format!("{}.{}", self.installed.packages[installed].info_name(), call.script);
        let in_root = self.in_root(&self.admin.info);
        self.run_in(index, call.of, &self.admin.info, &in_root, &file, call.script, &call.args)
    }

    /// Runs the new `script` of package `index` as dpkg runs it: from `ADMIN/tmp.ci/`, where the
    /// rest of its control archive is.
    fn run_new(&self, index: usize, script: &str, args: &[String]) -> Result<Option<bool>> {
        let dir = self.new_dir(index)?;
        let _tmp_ci = scripts::ControlDir::link(&self.admin.dir, &index.to_string())?;
        let in_root = self.admin.rel.join(scripts::CONTROL_DIR);
        self.run_in(index, Of::New, &dir, &in_root, script, script, args)
    }

    /// Runs `dir/file`, which the scripts see as `in_root/file`: a script of package `index`'s
    /// new version or of its installed one (`whose`), with dpkg's environment for it.
    #[allow(clippy::too_many_arguments)]
    fn run_in(
        &self,
        index: usize,
        whose: Of,
        dir: &Directory,
        in_root: &Path,
        file: &str,
        name: &str,
        args: &[String],
    ) -> Result<Option<bool>> {
        let Some(runner) = &self.scripts else { return Ok(None) };
        let inc = &self.incoming[index];
        let present = |p: &status::Package| p.status.state != State::NotInstalled;
        let old = inc.old.map(|o| &self.installed.packages[o]);
        // Whose script it is: the package's, or an installed one's it deconfigures or removes.
        let package = match whose {
            Of::Installed(o) => self.installed.packages[o].name.as_str(),
            _ => inc.name.as_str(),
        };
        // The instances of the name that are not `not-installed`, this one counted: dpkg has
        // recorded it half-installed before any of its scripts runs.
        let others = self.installed.packages.iter().filter(|p| p.name == package && present(p));
        // Counted once dpkg noted it half-installed, which it does after deconfiguring the
        // other instances (their prerm deconfigure counts them alone).
        let noted = !matches!(whose, Of::Installed(_));
        let refcount = others.count() + usize::from(noted && !old.is_some_and(present));
        let arch = match (whose, old) {
            (Of::Old, Some(old)) => old.arch.as_str(),
            (Of::Installed(o), _) => self.installed.packages[o].arch.as_str(),
            _ => inc.arch.as_str(),
        };
        let owner = Owner { package, arch, refcount };
        runner.run(dir, in_root, file, name, &owner, &to_str(args))
    }

    /// Where `dir`, a directory in the admin directory, is as the scripts see it.
    fn in_root(&self, dir: &Directory) -> PathBuf {
        dir.path()
            .strip_prefix(self.admin.dir.path())
            .map(|rel| self.admin.rel.join(rel))
            .unwrap_or_else(|_| PathBuf::from(&self.admin.rel))
    }
}

fn to_str(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
