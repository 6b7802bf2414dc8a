//! The bootstrap's plan: which of the call's packages the first stage writes, and the
//! merged-/usr layout for their architecture. Reads control files only; it must never touch the
//! root.

use crate::dpkg::format::deb822::Stanza;
use crate::dpkg::format::version::parse_relations;
use crate::error::Result;
use crate::read::control::ControlArchive;
use std::collections::HashMap;
use std::path::PathBuf;

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

/// Reads every package's control file and plans the first stage.
pub(crate) fn plan(packages: &[PathBuf]) -> Result<Plan> {
    let mut stanzas = Vec::with_capacity(packages.len());
    for package in packages {
        let ControlArchive { text, .. } = crate::read::lanes::read_control(package)?;
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
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (i, s) in stanzas.iter().enumerate() {
        by_name.entry(s.get("Package").unwrap_or_default().to_ascii_lowercase()).or_insert(i);
    }
    for (i, s) in stanzas.iter().enumerate() {
        for provided in relations(s, "Provides").into_iter().flatten() {
            by_name.entry(provided).or_insert(i);
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
        let groups = ["Pre-Depends", "Depends"].into_iter().flat_map(|f| relations(&stanzas[i], f));
        for group in groups {
            if let Some(&j) = group.iter().find_map(|n| by_name.get(n.as_str())) {
                todo.push(j);
            }
        }
    }
    (0..stanzas.len()).filter(|&i| chosen[i]).collect()
}

/// The package names of a relation field's groups (`a (>= 1) | b:any, c` -> `[[a, b], [c]]`),
/// read as the database reads them ([`parse_relations`]); a field that does not parse names
/// nothing here, and the second stage refuses its package.
fn relations(stanza: &Stanza, field: &str) -> Vec<Vec<String>> {
    let groups = stanza.get(field).map(parse_relations).and_then(|r| r.ok()).unwrap_or_default();
    groups.into_iter().map(|g| g.into_iter().map(|r| r.name).collect()).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stanzas(text: &str) -> Vec<Stanza> {
        crate::dpkg::format::deb822::parse(text.as_bytes()).unwrap()
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
