//! The packages a matrix unpacks: their identity and size, for the report's environment and for
//! sizing the scratch filesystems.
//!
//! Why `dpkg-deb --field` and not our own reader: the bench must not depend on the engine's
//! parser being right (it measures that engine), and dpkg-deb is the reference reader. This
//! module never extracts anything.

use super::{command, Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A `.deb` the matrix unpacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    pub path: PathBuf,
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// Size of the `.deb` file.
    pub bytes: u64,
    /// `Installed-Size` from the control file, when the package declares it.
    pub installed_kib: Option<u64>,
}

impl Package {
    /// Reads the identity of the package at `path` (made absolute: the tools run elsewhere).
    pub fn inspect(path: &Path) -> Result<Package> {
        let path = path.canonicalize().map_err(Error::io(path))?;
        let bytes = path.metadata().map_err(Error::io(&path))?.len();
        command::require("dpkg-deb", "dpkg")?;
        let fields = command::output(
            Command::new("dpkg-deb").arg("--field").arg(&path).args([
                "Package",
                "Version",
                "Architecture",
                "Installed-Size",
            ]),
            &path,
        )?;
        let field = |name: &str| {
            fields
                .lines()
                .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')))
                .map(|v| v.trim().to_string())
        };
        Ok(Package {
            name: field("Package").unwrap_or_default(),
            version: field("Version").unwrap_or_default(),
            architecture: field("Architecture").unwrap_or_default(),
            installed_kib: field("Installed-Size").and_then(|v| v.parse().ok()),
            bytes,
            path,
        })
    }

    /// A generous estimate of the bytes unpacking takes: the declared installed size, or, when
    /// the package does not declare it, ten times the compressed size.
    pub fn unpacked_estimate(&self) -> u64 {
        self.installed_kib.map_or(self.bytes.saturating_mul(10), |kib| kib.saturating_mul(1024))
    }
}
