//! The machine a matrix ran on, recorded next to its numbers.
//!
//! Why: a time without its kernel, CPU count, device and package is not reproducible, and the
//! host filesystem under the loop devices' backing files decides what a flush really costs.
//! Everything here is read from the kernel, never assumed.

use super::plan::Workload;
use serde::Serialize;
use std::path::{Path, PathBuf};
use unpack::fs::mountinfo::{self, MountInfo};

/// The environment of a matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `uname -srvm`.
    pub kernel: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The device provider, or the `--dir` benched.
    pub device: String,
    /// The filesystem holding the backing files (or the `--dir`), as mountinfo reports it.
    pub host_filesystem: Option<MountInfo>,
    /// The `unpack` binary measured.
    pub engine: PathBuf,
    /// What was unpacked: package names, versions and sizes.
    pub workloads: Vec<Workload>,
    /// NFS rows: where the client and server ran, and the client option sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs: Option<String>,
}

impl Environment {
    /// Reads the environment; `host` is the directory whose filesystem holds the runs' backing.
    pub fn read(device: String, host: &Path, engine: &Path, workloads: &[Workload]) -> Environment {
        let u = rustix::system::uname();
        let kernel = [u.sysname(), u.release(), u.version(), u.machine()]
            .map(|s| s.to_string_lossy().into_owned())
            .join(" ");
        Environment {
            kernel,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            device,
            host_filesystem: mountinfo::for_path(host).ok(),
            engine: engine.to_path_buf(),
            workloads: workloads.to_vec(),
            nfs: None,
        }
    }
}
