//! unpack: a package-unpack durability engine, the core of a dpkg-style installer.
//!
//! [`unpack`] reads Debian packages and writes their files into a root directory through
//! temporary names and renames, so that at any instant of a power cut each path holds its old
//! or its new content, and so that when it returns `Ok` (for every strategy but `none`)
//! everything is on stable storage. How the safety is paid for is a [`Strategy`].
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! let options = unpack::Options::new(unpack::durability::by_name("syncfs", 2)?);
//! let report = unpack::unpack(&[PathBuf::from("hello_1.0_all.deb")], Path::new("/srv/root"), &options)?;
//! println!("{}", report.human());
//! # Ok::<(), unpack::Error>(())
//! ```

pub mod commit;
pub mod control;
pub mod crash;
pub mod deb;
pub mod durability;
pub mod entry;
pub mod error;
pub mod extract;
pub mod mountinfo;
pub mod report;
pub mod root;
pub mod scratchfs;
pub mod syscalls;
pub mod vdisk;

pub use durability::Strategy;
pub use error::{Error, ExitCode, Result};
pub use report::Report;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Called now and then with (bytes of package files read, total bytes of package files).
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

/// How to unpack.
#[derive(Clone)]
pub struct Options {
    pub strategy: Arc<dyn Strategy>,
    /// Wait for another unpack's lock on the root instead of failing with [`Error::Locked`].
    pub wait: bool,
    pub progress: Option<Arc<ProgressFn>>,
}

impl Options {
    pub fn new(strategy: Arc<dyn Strategy>) -> Options {
        Options { strategy, wait: false, progress: None }
    }
}

/// Unpacks `packages` into `root` as one transaction: every file of every package is written
/// under a temporary name, then the strategy's barrier runs, then all are renamed into place.
/// On an error before the renames the root is left as it was (the engine's state directory
/// `var/lib/unpack/` aside).
pub fn unpack(packages: &[PathBuf], root: &Path, options: &Options) -> Result<Report> {
    let started = Instant::now();
    if packages.is_empty() {
        return Err(Error::Usage("no package given".into()));
    }
    raise_fd_limit();
    let mut root_handle = root::Root::open(root)?;
    let _lock = root_handle.lock(options.wait)?;
    let calls = syscalls::Syscalls::default();
    let total: u64 = packages.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let mut reports = Vec::with_capacity(packages.len());
    let mut tx = extract::Transaction::new(&mut root_handle, options.strategy.as_ref(), &calls);
    let mut done_before = 0;
    for (index, package) in packages.iter().enumerate() {
        let mut deb = deb::Deb::open(package)?;
        let size = deb.len();
        let consumed = deb.consumed();
        let progress = options.progress.clone().map(|f| move || f(done_before + consumed.load(Relaxed), total));
        let control = {
            let (member, stream) = deb.control()?;
            control::Control::from_tar(package, &member, stream)?
        };
        let mut report = report::PackageReport::new(control);
        let (member, stream) = deb.data()?;
        let bad = |e: std::io::Error| Error::bad(package, format!("{member}: {e}"));
        let mut archive = tar::Archive::new(stream);
        for item in archive.entries().map_err(bad)? {
            let mut item = item.map_err(bad)?;
            let Some(entry) = entry::validate(&mut item).map_err(|e| Error::bad(package, format!("{member}: {e}")))? else {
                continue;
            };
            report.entries += 1;
            if let entry::Kind::File { size } = entry.kind {
                report.files += 1;
                report.bytes += size;
            }
            tx.add(index, package, &entry, &mut item)?;
            if let Some(p) = &progress {
                p();
            }
        }
        done_before += size;
        reports.push(report);
    }
    let extract_s = started.elapsed().as_secs_f64();
    let times = commit::commit(&mut tx)?;
    drop(tx);
    let phases = report::Phases {
        extract_s,
        barrier_s: times.barrier_s,
        rename_s: times.rename_s,
        dirsync_s: times.dirsync_s,
        total_s: started.elapsed().as_secs_f64(),
    };
    Ok(Report {
        packages: reports,
        strategy: options.strategy.name().to_string(),
        root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
        filesystem: mountinfo::for_path(root).ok(),
        phases,
        syscalls: calls.counts(),
        peak_rss_bytes: report::peak_rss_bytes(),
    })
}

/// The directory cache holds a descriptor per directory of the package (linux-headers has
/// thousands), so the soft limit on open files is raised to the hard one, as servers do.
fn raise_fd_limit() {
    if let (Some(_), Some(hard)) = {
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        (l.current, l.maximum)
    } {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit { current: Some(hard), maximum: Some(hard) },
        );
    }
}
