//! External commands the bench runs for itself (package metadata, rewriting packages), as
//! opposed to the measured runs in [`super::run`].
//!
//! Why a module: every such command must fail with the file it was about and the tool's own
//! message, and a missing tool must name the Debian package to install. It never runs anything
//! through a shell, so no path is ever interpreted.

use super::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first executable named `tool` in `PATH` (also `/sbin` and `/usr/sbin`, where mkfs tools
/// live and where a non-root `PATH` often does not look).
pub fn find_in_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Fails with the package to install when `tool` is not installed.
pub fn require(tool: &str, package: &'static str) -> Result<PathBuf> {
    find_in_path(tool).ok_or_else(|| Error::MissingTool { tool: tool.to_string(), package })
}

/// Runs `cmd` about `subject`, returning its stdout; on failure the error carries the subject,
/// the command line and the tool's stderr.
pub fn output(cmd: &mut Command, subject: &Path) -> Result<String> {
    let line = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| Error::Command {
        path: subject.to_path_buf(),
        command: line.clone(),
        message: e.to_string(),
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            path: subject.to_path_buf(),
            command: line,
            message: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_and_not_a_made_up_tool() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("no-such-tool-unpack-bench").is_none());
    }

    #[test]
    fn a_missing_tool_names_the_package() {
        let err = require("no-such-tool-unpack-bench", "some-package").unwrap_err();
        assert!(err.to_string().contains("install the Debian package some-package"), "{err}");
    }

    #[test]
    fn a_failing_command_carries_subject_and_stderr() {
        let err =
            output(Command::new("sh").args(["-c", "echo boom >&2; exit 3"]), Path::new("/x/y"))
                .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("/x/y:") && text.contains("boom"), "{text}");
    }
}
