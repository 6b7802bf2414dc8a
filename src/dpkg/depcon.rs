//! Dependencies and conflicts at unpack, decided as dpkg decides them before it touches a
//! package (src/main/unpack.c pkg_check_depcon; src/main/archives.c check_conflict,
//! check_breaks, try_remove_can, try_deconfigure_can; src/main/depcon.c depisok): what the new
//! package `Conflicts` with (directly, through what it or others `Provides`, or what conflicts
//! with it), what it `Breaks`, whether its `Pre-Depends` are satisfied. A conflict is resolved
//! by removing the conflicting package when the new one `Replaces` it (or it is not wanted),
//! its reverse dependencies allowing (deconfigured with `--auto-deconfigure`); a package the new
//! one breaks is deconfigured with `--auto-deconfigure`. Anything else is dpkg's refusal,
//! unless a `--force-*` option lets it through with dpkg's warning.
//!
//! It only decides: the caller ([`crate::dpkg::install`], the scripts) carries out the removal
//! and the deconfiguration. It never reads or writes anything but the database it is given.
//! `Depends` are not checked at unpack (dpkg checks them at configure), nor does dpkg check
//! what installed packages `Break` of the new one here.

use super::admin::Installed;
use super::format::deb822::Stanza;
use super::format::status::{Flag, Package, State, Want};
use super::format::version::{parse_relations, Op, Relation, Version};
use crate::options::Force;

/// The `--force-*` options and the choice that change these decisions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Choices {
    /// What each `--force-*` lets through is a warning here instead of a refusal.
    pub force: Force,
    /// `--auto-deconfigure` (apt passes it): deconfigure what the unpack breaks, or what a
    /// removal leaves without a dependency, instead of refusing.
    pub auto_deconfigure: bool,
}

/// What the unpack of a package must do about the others, in dpkg's order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Installed packages it removes (conflicting ones it replaces), by index.
    pub conflictors: Vec<usize>,
    /// Installed packages it deconfigures, by index, with the conflictor whose removal is the
    /// reason (their `prerm deconfigure in-favour PKG VER [removing CONFLICTOR VER]`).
    pub deconfigure: Vec<(usize, Option<usize>)>,
    /// What dpkg says on its way (notices and the warnings of a `--force-*`), in order.
    pub notes: Vec<String>,
}

/// The package being unpacked.
pub struct Newcomer<'a> {
    pub name: &'a str,
    pub arch: &'a str,
    pub version: &'a Version,
    /// Its control stanza (its relations, Multi-Arch, Essential, Protected).
    pub control: &'a Stanza,
    /// The installed instance it replaces (its own name and architecture), by index.
    pub slot: Option<usize>,
    /// The archive's name in messages (dpkg's "regarding FILE containing ...").
    pub file: &'a str,
}

/// Decides about `new` against the installed packages of `db`; the root's native architecture
/// is `native`. `Err`: dpkg's refusal, the notes before it included.
pub fn check(
    db: &Installed,
    new: &Newcomer<'_>,
    native: &str,
    choices: Choices,
) -> Result<Verdict, String> {
    let mut c = Checker::new(db, new, native, choices);
    c.check_all(new.control).map_err(|refusal| {
        let mut text = c.verdict.notes.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        text + &refusal
    })?;
    Ok(c.verdict)
}

/// How a package is taken by the decision so far (dpkg's `istobe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Istobe {
    Normal,
    /// The new package (its installed instance is [`Istobe::Replaced`]).
    InstallNew,
    Remove,
    Deconfigure,
    /// The installed instance the new package replaces: seen as the new package.
    Replaced,
}

/// The kind of a relation, for the architecture rules and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Depends,
    PreDepends,
    Conflicts,
    Breaks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiArch {
    No,
    Same,
    Foreign,
    Allowed,
}

/// The relation fields of a package, parsed; a field that does not parse counts as absent
/// (a new package's fields are validated before, an installed one's were written by dpkg).
#[derive(Debug, Clone, Default)]
struct Fields {
    conflicts: Vec<Relation>,
    provides: Vec<Relation>,
    depends: Vec<Vec<Relation>>,
    pre_depends: Vec<Vec<Relation>>,
    replaces: Vec<Relation>,
}

impl Fields {
    fn of(stanza: &Stanza) -> Fields {
        let groups =
            |name: &str| stanza.get(name).and_then(|v| parse_relations(v).ok()).unwrap_or_default();
        let flat = |name: &str| groups(name).into_iter().flatten().collect();
        Fields {
            conflicts: flat("Conflicts"),
            provides: flat("Provides"),
            depends: groups("Depends"),
            pre_depends: groups("Pre-Depends"),
            replaces: flat("Replaces"),
        }
    }
}

/// What the decision needs of one package.
struct View {
    name: String,
    arch: String,
    version: Option<Version>,
    config_version: Option<Version>,
    multi_arch: MultiArch,
    state: State,
    want: Want,
    reinstreq: bool,
    essential: bool,
    protected: bool,
    fields: Fields,
}

impl View {
    fn installed(p: &Package) -> View {
        let config_version = p.config_version().and_then(|v| Version::parse(v).ok());
        View {
            version: Version::parse(&p.version).ok(),
            config_version,
            state: p.status.state,
            want: p.status.want,
            reinstreq: p.status.flag == Flag::Reinstreq,
            ..View::of(&p.name, &p.arch, &p.stanza)
        }
    }

    fn of(name: &str, arch: &str, stanza: &Stanza) -> View {
        let yes = |field: &str| stanza.get(field).is_some_and(|v| v.eq_ignore_ascii_case("yes"));
        let multi_arch = match stanza.get("Multi-Arch").map(str::to_ascii_lowercase).as_deref() {
            Some("same") => MultiArch::Same,
            Some("foreign") => MultiArch::Foreign,
            Some("allowed") => MultiArch::Allowed,
            _ => MultiArch::No,
        };
        View {
            name: name.to_ascii_lowercase(),
            arch: arch.to_string(),
            version: None,
            config_version: None,
            multi_arch,
            state: State::NotInstalled,
            want: Want::Install,
            reinstreq: false,
            essential: yes("Essential"),
            protected: yes("Protected"),
            fields: Fields::of(stanza),
        }
    }

    /// dpkg's name of it (pkg_name, pnaw_nonambig): with its architecture where Multi-Arch:
    /// same makes the name ambiguous.
    fn shown(&self) -> String {
        if self.multi_arch == MultiArch::Same {
            format!("{}:{}", self.name, self.arch)
        } else {
            self.name.clone()
        }
    }

    fn version_text(&self) -> String {
        self.version.as_ref().map(Version::to_string).unwrap_or_default()
    }
}

/// A package's state as dpkg's messages say it (src/main/help.c statusstrings).
fn state_text(state: State) -> &'static str {
    match state {
        State::NotInstalled => "not installed",
        State::ConfigFiles => "not installed but configs remain",
        State::HalfInstalled => "broken due to failed removal or installation",
        State::Unpacked => "unpacked but not configured",
        State::HalfConfigured => "broken due to postinst failure",
        State::TriggersAwaited => "awaiting trigger processing by another package",
        State::TriggersPending => "triggered",
        State::Installed => "installed",
    }
}

fn configured(state: State) -> bool {
    matches!(state, State::Installed | State::TriggersPending | State::TriggersAwaited)
}

/// Whether `constraint` holds for `version` (none: any version, even an unknown one).
fn version_holds(constraint: &Option<(Op, Version)>, version: Option<&Version>) -> bool {
    match (constraint, version) {
        (None, _) => true,
        (Some((op, wanted)), Some(v)) => op.holds(v.cmp(wanted)),
        (Some(_), None) => false,
    }
}

/// dpkg's pkg_virtual_deppossi_satisfied: a provider satisfies a versioned relation only by
/// an `=` version of its own.
fn provider_satisfies(wanted: &Relation, provided: &Relation) -> bool {
    match (&provided.constraint, &wanted.constraint) {
        (Some((Op::Eq, _)) | None, None) => true,
        (Some((Op::Eq, version)), constraint) => version_holds(constraint, Some(version)),
        _ => false,
    }
}

/// The decision in progress over every installed package and the new one (the last view).
struct Checker<'a> {
    views: Vec<View>,
    istobe: Vec<Istobe>,
    /// The index of the new package's view.
    new: usize,
    native: &'a str,
    choices: Choices,
    file: &'a str,
    verdict: Verdict,
}

impl<'a> Checker<'a> {
    fn new(db: &Installed, new: &Newcomer<'a>, native: &'a str, choices: Choices) -> Checker<'a> {
        let mut views: Vec<View> = db.packages.iter().map(View::installed).collect();
        let mut istobe = vec![Istobe::Normal; views.len()];
        if let Some(slot) = new.slot {
            istobe[slot] = Istobe::Replaced;
        }
        let mut view = View::of(new.name, new.arch, new.control);
        view.version = Some(new.version.clone());
        views.push(view);
        istobe.push(Istobe::InstallNew);
        let new_index = views.len() - 1;
        Checker {
            views,
            istobe,
            new: new_index,
            native,
            choices,
            file: new.file,
            verdict: Verdict::default(),
        }
    }

    /// pkg_check_depcon: the new package's relations in the order its control file has them
    /// (Conflicts; Breaks; what conflicts with what it Provides; Pre-Depends), then what
    /// conflicts with it.
    fn check_all(&mut self, control: &Stanza) -> Result<(), String> {
        for field in &control.fields {
            let Ok(groups) = parse_relations(&field.value) else { continue };
            match field.name.to_ascii_lowercase().as_str() {
                "conflicts" => {
                    for rel in groups.iter().flatten() {
                        self.check_conflict(self.new, rel)?;
                    }
                }
                "breaks" => {
                    for rel in groups.iter().flatten() {
                        self.check_breaks(rel)?;
                    }
                }
                "provides" => {
                    for virt in groups.iter().flatten() {
                        for (q, rel) in self.installed_relations(|f| &f.conflicts, &virt.name) {
                            self.check_conflict(q, &rel)?;
                        }
                    }
                }
                "pre-depends" => {
                    for group in &groups {
                        self.check_pre_depends(group)?;
                    }
                }
                _ => {}
            }
        }
        let name = self.views[self.new].name.clone();
        for (q, rel) in self.installed_relations(|f| &f.conflicts, &name) {
            self.check_conflict(q, &rel)?;
        }
        Ok(())
    }

    /// dpkg's deparchsatisfied: whether package `p` is of an architecture `rel` (a relation of
    /// a package of architecture `depender_arch`) accepts.
    fn arch_ok(&self, p: usize, rel: &Relation, kind: Kind, depender_arch: &str) -> bool {
        let view = &self.views[p];
        if rel.arch.is_none() && view.multi_arch == MultiArch::Foreign {
            return true;
        }
        let any_kind = matches!(kind, Kind::Conflicts | Kind::Breaks);
        let wanted = match &rel.arch {
            Some(a) => a.as_str(),
            None if any_kind => "any",
            None => depender_arch,
        };
        if wanted == "any" && (view.multi_arch == MultiArch::Allowed || any_kind) {
            return true;
        }
        let native = |a: &str| -> String {
            if a.is_empty() || a == "all" { self.native } else { a }.to_string()
        };
        native(wanted) == native(&view.arch)
    }

    /// The instances of `name` (the new package in its slot's place), by index.
    fn instances(&self, name: &str) -> Vec<usize> {
        (0..self.views.len())
            .filter(|&i| self.istobe[i] != Istobe::Replaced && self.views[i].name == name)
            .collect()
    }

    /// Installed packages (not the slot, not the new one) that provide `name`, with the
    /// relation of their Provides that names it.
    fn providers(&self, name: &str) -> Vec<(usize, Relation)> {
        (0..self.new)
            .filter(|&i| self.istobe[i] != Istobe::Replaced)
            .flat_map(|i| {
                self.views[i]
                    .fields
                    .provides
                    .iter()
                    .filter(|r| r.name == name)
                    .map(move |r| (i, r.clone()))
            })
            .collect()
    }

    /// Installed packages whose relations of `field` name `name`, with the relation.
    fn installed_relations(
        &self,
        field: impl Fn(&Fields) -> &Vec<Relation>,
        name: &str,
    ) -> Vec<(usize, Relation)> {
        (0..self.new)
            .filter(|&i| self.istobe[i] != Istobe::Replaced)
            .flat_map(|i| {
                field(&self.views[i].fields)
                    .iter()
                    .filter(|r| r.name == name)
                    .map(move |r| (i, r.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// dpkg's describedepcon: "PKG conflicts with REL".
    fn describe(&self, depender: usize, rel: &Relation, kind: Kind) -> String {
        let verb = match kind {
            Kind::Depends => "depends on",
            Kind::PreDepends => "pre-depends on",
            Kind::Conflicts => "conflicts with",
            Kind::Breaks => "breaks",
        };
        format!(" {} {verb} {rel}\n", self.views[depender].shown())
    }

    /// The depender side of depisok: a relation of a package that is going, or that is not
    /// installed enough for the relation to matter, holds.
    fn depender_matters(&self, depender: usize, kind: Kind) -> bool {
        match self.istobe[depender] {
            Istobe::Remove | Istobe::Deconfigure | Istobe::Replaced => false,
            Istobe::InstallNew => true,
            Istobe::Normal => match self.views[depender].state {
                State::Installed | State::TriggersPending | State::TriggersAwaited => true,
                State::HalfConfigured | State::Unpacked | State::HalfInstalled => {
                    matches!(kind, Kind::PreDepends | Kind::Conflicts | Kind::Breaks)
                }
                State::ConfigFiles | State::NotInstalled => false,
            },
        }
    }

    /// depisok for Conflicts and Breaks: `None` when `rel` of `depender` is not violated,
    /// otherwise why, and the one package whose removal (or deconfiguration) would fix it.
    fn violated(
        &self,
        depender: usize,
        rel: &Relation,
        kind: Kind,
    ) -> Option<(String, Option<usize>)> {
        if !self.depender_matters(depender, kind) {
            return None;
        }
        let breaks = kind == Kind::Breaks;
        let mut why = self.describe(depender, rel, kind);
        let mut found: Vec<usize> = Vec::new();
        let depender_name = self.views[depender].name.clone();
        if rel.name != depender_name {
            for p in self.instances(&rel.name) {
                if !self.arch_ok(p, rel, kind, &self.views[depender].arch) {
                    continue;
                }
                let view = &self.views[p];
                let present = match self.istobe[p] {
                    Istobe::Remove | Istobe::Replaced => continue,
                    Istobe::InstallNew => {
                        if !version_holds(&rel.constraint, view.version.as_ref()) {
                            continue;
                        }
                        why += &format!(
                            "  {} (version {}) is to be installed.\n",
                            view.shown(),
                            view.version_text()
                        );
                        found.push(p);
                        continue;
                    }
                    Istobe::Deconfigure if breaks => continue,
                    Istobe::Normal | Istobe::Deconfigure => view.state,
                };
                let counts = match present {
                    State::NotInstalled | State::ConfigFiles => false,
                    State::HalfInstalled | State::Unpacked | State::HalfConfigured => !breaks,
                    _ => true,
                };
                if counts && version_holds(&rel.constraint, view.version.as_ref()) {
                    why += &format!(
                        "  {} (version {}) is present and {}.\n",
                        view.shown(),
                        view.version_text(),
                        state_text(present)
                    );
                    found.push(p);
                }
            }
        }
        // The new package provides it: nothing to remove can fix that.
        let new = &self.views[self.new];
        if self.views[depender].name != new.name
            && new.fields.provides.iter().any(|v| v.name == rel.name && provider_satisfies(rel, v))
        {
            why += &format!("  {} provides {} and is to be installed.\n", new.shown(), rel.name);
            return Some((why, None));
        }
        for (p, provided) in self.providers(&rel.name) {
            let view = &self.views[p];
            if view.name == depender_name || !provider_satisfies(rel, &provided) {
                continue;
            }
            match self.istobe[p] {
                Istobe::Remove | Istobe::InstallNew | Istobe::Replaced => continue,
                Istobe::Deconfigure if breaks => continue,
                _ => {}
            }
            let counts = match view.state {
                State::NotInstalled | State::ConfigFiles => false,
                State::HalfInstalled | State::Unpacked | State::HalfConfigured => !breaks,
                _ => true,
            };
            if counts {
                why += &format!(
                    "  {} provides {} and is present and {}.\n",
                    view.shown(),
                    rel.name,
                    state_text(view.state)
                );
                found.push(p);
            }
        }
        match found.as_slice() {
            [] => None,
            [one] => Some((why, Some(*one))),
            _ => Some((why, None)),
        }
    }

    /// depisok for Depends and Pre-Depends: `Err(why)` when no alternative of `group` of
    /// `depender` is satisfied; `unconfigured`: an unpacked package whose configured version
    /// satisfies it counts (Pre-Depends at unpack).
    fn satisfied(
        &self,
        depender: usize,
        group: &[Relation],
        kind: Kind,
        unconfigured: bool,
    ) -> Result<(), String> {
        if !self.depender_matters(depender, kind) {
            return Ok(());
        }
        let mut why = String::new();
        for rel in group {
            why += &self.describe(depender, rel, kind);
            let mut said = false;
            for p in self.instances(&rel.name) {
                if !self.arch_ok(p, rel, kind, &self.views[depender].arch) {
                    continue;
                }
                match self.instance_satisfies(p, rel, unconfigured) {
                    Ok(()) => return Ok(()),
                    Err(Some(line)) => {
                        why += &line;
                        said = true;
                    }
                    Err(None) => {}
                }
            }
            let new = &self.views[self.new];
            if new.fields.provides.iter().any(|v| v.name == rel.name && provider_satisfies(rel, v))
            {
                return Ok(());
            }
            for (p, provided) in self.providers(&rel.name) {
                if !provider_satisfies(rel, &provided) {
                    continue;
                }
                let view = &self.views[p];
                let state = match self.istobe[p] {
                    Istobe::Remove => "to be removed",
                    Istobe::Deconfigure => "to be deconfigured",
                    Istobe::Replaced | Istobe::InstallNew => continue,
                    Istobe::Normal
                        if matches!(view.state, State::Installed | State::TriggersPending) =>
                    {
                        return Ok(())
                    }
                    Istobe::Normal => state_text(view.state),
                };
                why += &format!("  {} provides {} but is {state}.\n", view.shown(), rel.name);
                said = true;
            }
            if !said {
                why += &format!("  {} is not installed.\n", rel.name);
            }
        }
        Err(why)
    }

    /// Whether instance `p` satisfies `rel`: `Err(Some(why))` when it does not and dpkg says
    /// why, `Err(None)` when it says nothing (a package not installed: perhaps a virtual one).
    fn instance_satisfies(
        &self,
        p: usize,
        rel: &Relation,
        unconfigured: bool,
    ) -> Result<(), Option<String>> {
        let view = &self.views[p];
        let (name, version) = (view.shown(), view.version_text());
        let holds = version_holds(&rel.constraint, view.version.as_ref());
        match self.istobe[p] {
            Istobe::Remove => return Err(Some(format!("  {name} is to be removed.\n"))),
            Istobe::Deconfigure => return Err(Some(format!("  {name} is to be deconfigured.\n"))),
            Istobe::InstallNew if holds => return Ok(()),
            Istobe::InstallNew => {
                return Err(Some(format!(
                    "  {name} is to be installed, but is version {version}.\n"
                )))
            }
            Istobe::Replaced | Istobe::Normal => {}
        }
        match view.state {
            State::Installed | State::TriggersPending if holds => Ok(()),
            State::Installed | State::TriggersPending => {
                Err(Some(format!("  {name} is installed, but is version {version}.\n")))
            }
            State::NotInstalled => Err(None),
            State::TriggersAwaited | State::Unpacked | State::HalfConfigured if unconfigured => {
                match &view.config_version {
                    None => {
                        Err(Some(format!("  {name} is unpacked, but has never been configured.\n")))
                    }
                    Some(_) if !holds => {
                        Err(Some(format!("  {name} is unpacked, but is version {version}.\n")))
                    }
                    Some(configured) if !version_holds(&rel.constraint, Some(configured)) => {
                        Err(Some(format!("  {name} latest configured version is {configured}.\n")))
                    }
                    Some(_) => Ok(()),
                }
            }
            state => Err(Some(format!("  {name} is {}.\n", state_text(state)))),
        }
    }

    /// dpkg's check_breaks for a Breaks relation of the new package.
    fn check_breaks(&mut self, rel: &Relation) -> Result<(), String> {
        let Some((why, fix)) = self.violated(self.new, rel, Kind::Breaks) else {
            return Ok(());
        };
        let new = self.views[self.new].shown();
        let fix = fix.filter(|&f| self.istobe[f] == Istobe::Normal);
        if let (Some(f), true) = (fix, self.choices.auto_deconfigure) {
            let broken = self.views[f].shown();
            self.note(format!(
                "considering deconfiguration of {broken}, which would be broken by installation of {new} ..."
            ));
            if self.choices.force.breaks {
                self.note(format!(
                    "warning: ignoring dependency problem with installation of {new}:\n{why}"
                ));
                return Ok(());
            }
            self.istobe[f] = Istobe::Deconfigure;
            self.verdict.deconfigure.push((f, None));
            self.note(format!("yes, will deconfigure {broken} (broken by {new})"));
            return Ok(());
        }
        self.note(format!("regarding {} containing {new}:\n{why}", self.file));
        if self.choices.force.breaks {
            self.note("warning: ignoring breakage, may proceed anyway!".into());
            return Ok(());
        }
        Err(match fix {
            Some(f) => format!(
                "installing {new} would break {}, and\n deconfiguration is not permitted (--auto-deconfigure might help)",
                self.views[f].shown()
            ),
            None => format!("installing {new} would break existing software"),
        })
    }

    /// dpkg's check_conflict for a Conflicts relation `rel` of `depender` (the new package, or
    /// an installed one that conflicts with it or with what it provides).
    fn check_conflict(&mut self, depender: usize, rel: &Relation) -> Result<(), String> {
        let Some((why, fix)) = self.violated(depender, rel, Kind::Conflicts) else {
            return Ok(());
        };
        // The new package itself conflicts: the package to remove is the one whose relation it
        // is.
        let fix = fix.map(|f| if self.istobe[f] == Istobe::InstallNew { depender } else { f });
        if let Some(f) = fix.filter(|&f| self.removable(f)) {
            if self.try_remove(f) {
                return Ok(());
            }
        }
        let new = self.views[self.new].shown();
        self.note(format!("regarding {} containing {new}:\n{why}", self.file));
        if self.choices.force.conflicts {
            self.note("warning: ignoring conflict, may proceed anyway!".into());
            return Ok(());
        }
        Err(format!("conflicting packages - not installing {new}"))
    }

    /// The first test of check_conflict: whether the conflicting package `f` may be removed at
    /// all (not wanted any more, or the new package replaces it; Essential and Protected).
    fn removable(&self, f: usize) -> bool {
        let (new, other) = (&self.views[self.new], &self.views[f]);
        let replaces = other.version.as_ref().is_some_and(|v| {
            new.fields.replaces.iter().any(|r| {
                r.name == other.name
                    && version_holds(&r.constraint, Some(v))
                    && self.arch_ok(f, r, Kind::Conflicts, &new.arch)
            })
        });
        let both_special = (new.essential || new.protected) && (other.essential || other.protected);
        let unwanted = !matches!(other.want, Want::Install | Want::Hold);
        let allowed = !other.essential
            || self.choices.force.remove_essential
            || !other.protected
            || self.choices.force.remove_protected;
        both_special || ((unwanted || replaces) && allowed)
    }

    /// The rest of check_conflict: `f` becomes a conflictor unless a reverse dependency that
    /// cannot be deconfigured, a hold or a reinstallation it needs keeps it.
    fn try_remove(&mut self, f: usize) -> bool {
        let (other, new) = (self.views[f].shown(), self.views[self.new].shown());
        self.istobe[f] = Istobe::Remove;
        self.note(format!("considering removing {other} in favour of {new} ..."));
        let mut kept = if configured(self.views[f].state) {
            !self.reverse_dependencies_allow(f)
        } else {
            self.note(format!(
                "{other} is not properly installed; ignoring any dependencies on it"
            ));
            false
        };
        if !kept && self.views[f].want == Want::Hold {
            if self.choices.force.hold {
                self.note(format!(
                    "package {other} was on hold, processing it anyway as requested"
                ));
            } else {
                self.note(format!(
                    "Package {other} is on hold, not touching it. Use --force-hold to override."
                ));
                kept = true;
            }
        }
        if !kept && self.views[f].reinstreq {
            if self.choices.force.remove_reinstreq {
                self.note(format!(
                    "package {other} requires reinstallation, but will remove anyway as requested"
                ));
            } else {
                self.note(format!("package {other} requires reinstallation, will not remove"));
                kept = true;
            }
        }
        if kept {
            self.istobe[f] = Istobe::Normal;
            return false;
        }
        self.verdict.conflictors.push(f);
        self.note(format!("yes, will remove {other} in favour of {new}"));
        true
    }

    /// Whether every installed package that depends on `f` (or on what it provides) is still
    /// satisfied without it, or may be deconfigured (try_remove_can).
    fn reverse_dependencies_allow(&mut self, f: usize) -> bool {
        let mut names = vec![(self.views[f].name.clone(), false)];
        names.extend(self.views[f].fields.provides.iter().map(|p| (p.name.clone(), true)));
        for (name, virtual_name) in names {
            for r in 0..self.new {
                let view = &self.views[r];
                let groups: Vec<(Kind, Vec<Relation>)> = [
                    (Kind::Depends, &view.fields.depends),
                    (Kind::PreDepends, &view.fields.pre_depends),
                ]
                .into_iter()
                .flat_map(|(k, gs)| gs.iter().map(move |g| (k, g.clone())))
                .filter(|(_, g)| g.iter().any(|rel| rel.name == name))
                .collect();
                for (kind, group) in groups {
                    let Err(why) = self.satisfied(r, &group, kind, false) else { continue };
                    if virtual_name {
                        self.note(format!(
                            "may have trouble removing {}, as it provides {name} ...",
                            self.views[f].shown()
                        ));
                    }
                    if !self.try_remove_can(r, f, &why) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// dpkg's try_remove_can: package `r`, whose dependency `why` the removal of `f` breaks.
    fn try_remove_can(&mut self, r: usize, f: usize, why: &str) -> bool {
        let (depender, removed) = (self.views[r].shown(), self.views[f].shown());
        if self.choices.force.depends {
            self.note(format!(
                "warning: ignoring dependency problem with removal of {removed}:\n{why}"
            ));
            return true;
        }
        if !self.choices.auto_deconfigure {
            self.note(format!(
                "no, cannot proceed with removal of {removed} (--auto-deconfigure will help):\n{why}"
            ));
            return false;
        }
        for (special, forced, what) in [
            (self.views[r].essential, self.choices.force.remove_essential, "essential"),
            (self.views[r].protected, self.choices.force.remove_protected, "protected"),
        ] {
            if special && !forced {
                self.note(format!(
                    "no, {depender} is {what}, will not deconfigure\n it to enable removal of {removed}"
                ));
                return false;
            }
            if special {
                self.note(format!(
                    "warning: considering deconfiguration of {what}\n package {depender}, to enable removal of {removed}"
                ));
            }
        }
        self.istobe[r] = Istobe::Deconfigure;
        self.verdict.deconfigure.push((r, Some(f)));
        true
    }

    /// Pre-Depends of the new package, checked as dpkg checks them at unpack (an unpacked
    /// package counts by its configured version).
    fn check_pre_depends(&mut self, group: &[Relation]) -> Result<(), String> {
        let Err(why) = self.satisfied(self.new, group, Kind::PreDepends, true) else {
            return Ok(());
        };
        let new = self.views[self.new].shown();
        self.note(format!(
            "regarding {} containing {new}, pre-dependency problem:\n{why}",
            self.file
        ));
        if self.choices.force.depends {
            self.note("warning: ignoring pre-dependency problem!".into());
            return Ok(());
        }
        Err(format!("pre-dependency problem - not installing {new}"))
    }

    fn note(&mut self, text: String) {
        self.verdict.notes.push(text);
    }
}
