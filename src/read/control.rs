//! The package's control archive: the `control` file, read for the report (Package, Version,
//! Architecture) and kept whole for dpkg's database, and the other members dpkg keeps in its
//! info directory (md5sums, conffiles, maintainer scripts, ...).
//!
//! Everything is read with size caps so that a hostile control.tar cannot make the engine hold
//! an unbounded amount of memory.

use crate::error::{escape, Error, Result};
use serde::Serialize;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The biggest control file the engine will read (real ones are a few KiB).
const MAX_CONTROL: u64 = 1024 * 1024;
/// The most bytes of other members kept (md5sums of linux-headers is about 1.5 MB, templates
/// with their translations a few hundred KB).
const MAX_MEMBERS: u64 = 64 << 20;

/// A member of the control archive besides `control`: a regular file at its top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name, `postinst` for `./postinst`.
    pub name: String,
    pub bytes: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

/// What a control archive holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlArchive {
    pub control: Control,
    /// The control file as it is, for dpkg's status file.
    pub text: String,
    /// The other members, in archive order.
    pub members: Vec<Member>,
}

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
    /// it ([`crate::read::deb::MemberStream::finish`]).
    pub fn from_tar(package: &Path, member: &str, stream: impl Read) -> Result<Control> {
        ControlArchive::from_tar(package, member, stream).map(|a| a.control)
    }

    /// Parses the deb822 fields of the first paragraph, for the three the report shows.
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

impl ControlArchive {
    /// Reads a control.tar stream to its end: the first `./control`, and the other regular
    /// files at its top up to `MAX_MEMBERS` bytes in all (a later one of the same name is
    /// ignored, as the first control file counts).
    pub fn from_tar(package: &Path, member: &str, stream: impl Read) -> Result<ControlArchive> {
        let bad = |reason: String| Error::bad(package, format!("{member}: {reason}"));
        let (stream, meter) = crate::read::entry::metered(stream);
        let mut archive = tar::Archive::new(stream);
        let mut found: Option<(Control, String)> = None;
        let mut members: Vec<Member> = Vec::new();
        let mut kept = 0u64;
        for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let _held = meter.entry();
            let raw = entry.path_bytes().into_owned();
            let name = raw.strip_prefix(b"./").unwrap_or(&raw);
            let regular = entry.header().entry_type().is_file();
            let top = !name.is_empty() && !name.contains(&b'/');
            if name == b"control" && found.is_none() {
                if entry.size() > MAX_CONTROL {
                    return Err(bad(format!(
                        "control file of {} bytes is larger than {MAX_CONTROL}",
                        entry.size()
                    )));
                }
                let mut text = String::new();
                entry
                    .by_ref()
                    .take(MAX_CONTROL)
                    .read_to_string(&mut text)
                    .map_err(|e| bad(format!("control: {e}")))?;
                found = Some((Control::parse(&text).map_err(bad)?, text));
            } else if regular
                && top
                && name != b"control"
                && !members.iter().any(|m| m.name.as_bytes() == name)
            {
                let name = String::from_utf8(name.to_vec()).map_err(|_| {
                    bad(format!("member '{}': not UTF-8", escape(OsStr::from_bytes(name))))
                })?;
                kept += entry.size();
                if kept > MAX_MEMBERS {
                    return Err(bad(format!("control members of more than {MAX_MEMBERS} bytes")));
                }
                let mode = entry
                    .header()
                    .mode()
                    .map_err(|e| bad(format!("member '{}': bad mode: {e}", escape(&name))))?
                    & 0o7777;
                let mut bytes = Vec::with_capacity(entry.size() as usize);
                entry
                    .by_ref()
                    .take(MAX_MEMBERS)
                    .read_to_end(&mut bytes)
                    .map_err(|e| bad(format!("{name}: {e}")))?;
                members.push(Member { name, bytes, mode });
            }
            // Anything else, and what is left of the above, is read to its end here.
            std::io::copy(&mut entry, &mut std::io::sink()).map_err(|e| bad(e.to_string()))?;
        }
        let (control, text) = found.ok_or_else(|| bad("no control file".into()))?;
        Ok(ControlArchive { control, text, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_fields_and_ignores_the_rest() {
        let c = Control::parse(
            "Package: emacs-common\nversion: 1:28.2\nDescription: x\n more\nArchitecture: all\n",
        )
        .unwrap();
        assert_eq!(
            c,
            Control {
                name: "emacs-common".into(),
                version: "1:28.2".into(),
                architecture: "all".into()
            }
        );
    }

    #[test]
    fn a_control_without_package_is_an_error() {
        assert!(Control::parse("Version: 1\n").unwrap_err().contains("Package"));
        assert!(Control::parse("garbage\n").unwrap_err().contains("malformed"));
    }
}
