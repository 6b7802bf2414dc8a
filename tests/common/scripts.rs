//! Maintainer scripts that log their calls, for the tests that hold the engine's scripts to
//! dpkg's: each of the four appends one line per call to ROOT/var/log/scripts.log,
//! `NAME_VERSION SCRIPT [ARG]...`, then the environment dpkg gives it, then after ` || ` the
//! two values that name the caller and may differ (`DPKG_RUNNING_VERSION`, `DPKG_FORCE`). A
//! script exits 1 when ROOT/fail/NAME_VERSION.SCRIPT.ACTION exists.

use super::dpkg::Pkg;
use std::path::Path;

/// The log of the fixtures' scripts.
pub const LOG: &str = "var/log/scripts.log";

/// `pkg` with the four maintainer scripts, each logging its call (see the module's doc) and
/// failing on its marker.
pub fn logging(mut pkg: Pkg, name: &str, version: &str) -> Pkg {
    for script in ["preinst", "postinst", "prerm", "postrm"] {
        pkg = pkg.script(script, &logging_script(&format!("{name}_{version}"), script));
    }
    pkg
}

pub fn logging_script(who: &str, script: &str) -> String {
    format!(
        r#"#!/bin/sh
# The dpkg oracle's maintainer script: one line per call, then the failure asked for, if any.
args=
for a in "$@"; do args="$args [$a]"; done
echo "{who} {script}$args | package=${{DPKG_MAINTSCRIPT_PACKAGE-(unset)}} name=${{DPKG_MAINTSCRIPT_NAME-(unset)}} arch=${{DPKG_MAINTSCRIPT_ARCH-(unset)}} refcount=${{DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT-(unset)}} debug=${{DPKG_MAINTSCRIPT_DEBUG-(unset)}} root=${{DPKG_ROOT-(unset)}} admindir=${{DPKG_ADMINDIR-(unset)}} cwd=$PWD umask=$(umask) || running=${{DPKG_RUNNING_VERSION-(unset)}} force=${{DPKG_FORCE-(unset)}}" >> /{LOG}
if [ -e "/fail/{who}.{script}.$1" ]; then exit 1; fi
exit 0
"#
    )
}

/// The calls a root's log holds, each without what may differ between dpkg and unpack.
pub fn calls(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(LOG)).unwrap_or_default();
    text.lines().map(|l| l.split_once(" || ").map_or(l, |(call, _)| call).to_string()).collect()
}

/// The calls alone (`NAME_VERSION SCRIPT [ARG]...`), to assert dpkg's sequence.
pub fn sequence(root: &Path) -> Vec<String> {
    calls(root)
        .iter()
        .map(|l| l.split_once(" | ").map_or(l.as_str(), |(call, _)| call).to_string())
        .collect()
}
