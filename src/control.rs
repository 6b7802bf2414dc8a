//! The package's `control` file, read for the report: Package, Version, Architecture.
//!
//! Only the three fields the report shows are kept. The control file is read with a size cap so
//! that a hostile control.tar cannot make the engine hold an unbounded amount of memory.

use crate::error::{Error, Result};
use serde::Serialize;
use std::io::Read;
use std::path::Path;

/// The biggest control file the engine will read (real ones are a few KiB).
const MAX_CONTROL: u64 = 1024 * 1024;

/// What the report says about a package.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Control {
    pub name: String,
    pub version: String,
    pub architecture: String,
}

impl Control {
    /// Finds `./control` in a control.tar stream and parses it. Reads the archive to its end
    /// (the first `./control` counts), for the caller to verify the member's checksums after
    /// it ([`crate::deb::MemberStream::finish`]).
    pub fn from_tar(package: &Path, member: &str, stream: impl Read) -> Result<Control> {
        let bad = |reason: String| Error::bad(package, format!("{member}: {reason}"));
        let (stream, meter) = crate::entry::metered(stream);
        let mut archive = tar::Archive::new(stream);
        let mut control = None;
        for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let _held = meter.entry();
            let name = entry.path_bytes();
            if control.is_some() || (name.as_ref() != b"./control" && name.as_ref() != b"control") {
                // Skipped here, while unbounded: other members (md5sums) may be large.
                std::io::copy(&mut entry, &mut std::io::sink()).map_err(|e| bad(e.to_string()))?;
                continue;
            }
            if entry.size() > MAX_CONTROL {
                return Err(bad(format!("control file of {} bytes is larger than {MAX_CONTROL}", entry.size())));
            }
            let mut text = String::new();
            entry.take(MAX_CONTROL).read_to_string(&mut text).map_err(|e| bad(format!("control: {e}")))?;
            control = Some(Control::parse(&text).map_err(bad)?);
        }
        control.ok_or_else(|| bad("no control file".into()))
    }

    /// Parses the deb822 fields of the first paragraph.
    pub fn parse(text: &str) -> Result<Control, String> {
        let mut control = Control::default();
        for line in text.lines() {
            if line.trim().is_empty() {
                break;
            }
            if line.starts_with([' ', '\t']) {
                continue;
            }
            let Some((field, value)) = line.split_once(':') else {
                return Err(format!("control: malformed line '{}'", crate::error::escape(line)));
            };
            let slot = match field.to_ascii_lowercase().as_str() {
                "package" => &mut control.name,
                "version" => &mut control.version,
                "architecture" => &mut control.architecture,
                _ => continue,
            };
            if slot.is_empty() {
                *slot = value.trim().to_string();
            }
        }
        if control.name.is_empty() {
            return Err("control: no Package field".into());
        }
        if control.version.is_empty() {
            return Err("control: no Version field".into());
        }
        Ok(control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_fields_and_ignores_the_rest() {
        let c = Control::parse("Package: emacs-common\nversion: 1:28.2\nDescription: x\n more\nArchitecture: all\n").unwrap();
        assert_eq!(c, Control { name: "emacs-common".into(), version: "1:28.2".into(), architecture: "all".into() });
    }

    #[test]
    fn a_control_without_package_is_an_error() {
        assert!(Control::parse("Version: 1\n").unwrap_err().contains("Package"));
        assert!(Control::parse("garbage\n").unwrap_err().contains("malformed"));
    }
}
