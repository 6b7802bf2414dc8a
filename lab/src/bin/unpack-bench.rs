//! `unpack-bench`: the benchmark matrix. Parses arguments, runs [`unpack_lab::bench`], writes or
//! prints the result. Exit status (the lab's table, the same in `unpack-crashtest`): 0 every
//! counted run succeeded, 3 the matrix was made but some runs failed (they are in it, as
//! failed), 1 the bench itself failed, 2 usage (including not being root without `--dir`),
//! 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP between runs.

use anyhow::Context as _;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use unpack::cli::Invocation;
use unpack_lab::bench::cache::Cache;
use unpack_lab::bench::device;
use unpack_lab::bench::guest;
use unpack_lab::bench::matrix::{run_matrix, Config};
use unpack_lab::bench::nfs::{self, Backing, Export};
use unpack_lab::bench::peers::Peer;
use unpack_lab::bench::scenario::Scenario;
use unpack_lab::bench::{output, synthetic};

const FAIRNESS: &str = "\
How the numbers are made (fairness rules):
  - Every run gets a fresh filesystem (mkfs + mount on a loop device), so runs never see each
    other; with --dir, a fresh directory on that filesystem.
  - Strategies and peers alternate within each round of a row (A B C A B C ...), after one
    warm-up round that is not counted, so drift on a shared machine hits all of them alike.
  - Each run records the time until the unpacker exited and the time until its data was stable
    (the exit plus a syncfs of the filesystem): `none` is only fast until you count the second.
  - Every run starts with no dirty data (sync); `--cache cold` also drops the page cache.
  - The dpkg peer runs with --refuse-unsafe-io (dpkg as shipped, whatever dpkg.cfg.d says);
    dpkg-unsafe with --force-unsafe-io. dpkg gets a minimal admin directory under the root and
    --force-not-root --force-depends --no-triggers, which keep it to the unpack.
  - A run that fails counts as failed in the table, never as a time.
  - The upgrade scenario first installs a rewritten copy of the package (same paths, other
    contents) with `unpack -s none` and a sync, untimed; upgrade-db installs and configures it
    with dpkg in a root with dpkg's database instead, so that every tool upgrades a database.
  - The busy scenarios' writer (64 MiB/s in 1 MiB writes, never flushing) starts after the
    run's sync, has 16 MiB dirty before the unpacker starts, stops when it exits, and runs
    alike beside every tool of a row.
  - The minbase scenario installs the base system of a fixtures/fetch-minbase.sh directory as an
    installer does: dpkg gets debootstrap's first stage (merged-/usr symlinks, the files of
    first-stage.list's packages, an empty database, the packages copied inside), untimed, then
    `chroot ROOT dpkg --force-depends --unpack` of them all; our engine gets the empty root and
    `unpack --bootstrap`, both stages timed. A third time adds a timed
    `chroot ROOT dpkg --configure -a` (which must exit 0) and a syncfs to the time until stable.
  - The apt-local scenario prepares one chroot per bench run, untimed: the minbase of a
    fixtures/fetch-minbase.sh directory bootstrapped and configured, eatmydata installed (from
    the host's `apt-get download eatmydata libeatmydata1`: network), unpack-dpkg copied in, the
    lab's 24 apt-local packages installed at version 1 by apt and the real dpkg, version 2 in
    apt's lists. Each run copies it onto its fresh filesystem and times `apt-get upgrade -y`
    alone: dpkg with DPkg::Options::=--refuse-unsafe-io, dpkg-unsafe with --force-unsafe-io,
    eatmydata as `eatmydata apt-get` (and --refuse-unsafe-io), each strategy as unpack-dpkg
    (UNPACK_DPKG_STRATEGY, which no force-unsafe-io overrides). apt's dpkg is a timer script
    whose log gives the share of the time in unpack and in configure calls; GNU time the peak
    RSS. A run whose tree or database ends other than a reference upgraded by the dpkg peer
    (logs, apt's caches and the engine's state left out) fails. Ratios are to the dpkg peer.
  - apt-install and dist-upgrade are the same measure on real Debian workloads: PACKAGE is the
    directory of fixtures/make-apt-chroot.sh (bookworm.tar, bookworm-devel.tar; made once, with
    the network). The chroot is the tarball extracted once per bench run, untimed, unpack-dpkg
    and the timer copied in (dist-upgrade: apt's sources switched to trixie); each run copies
    it and times `apt-get install -y python3 perl vim git build-essential` or `apt-get
    dist-upgrade -y`, offline, entered as fixtures/apt-workload.sh enters it (its library's
    in_root: /proc, /sys, /dev, a /run tmpfs in namespaces that die with the run). The
    reference is the eatmydata peer's run of another copy. One run takes minutes: bench them
    alone, with few strategies and --runs.
  - With --counts, the counting runs (strace; valgrind or perf) come after a row's timed runs,
    each on a fresh filesystem, and are never timed.";

/// The benchmark matrix: our durability strategies and peers (dpkg, tar) x filesystems x mount
/// options x page cache x scenario -> seconds until exit and until the data is stable.
#[derive(Parser, Debug)]
#[command(name = "unpack-bench", version, after_long_help = FAIRNESS)]
struct Args {
    /// Packages to unpack, all together in each run; or one directory made by
    /// fixtures/fetch-minbase.sh, which stands for its packages (and is what --scenario minbase
    /// and --scenario apt-local need); for --scenario apt-install and dist-upgrade, the directory
    /// of fixtures/make-apt-chroot.sh's tarballs.
    #[arg(required_unless_present = "synthetic")]
    packages: Vec<PathBuf>,

    /// Filesystems to make: ext4, ext3, xfs, btrfs; or nfs alone: the kernel's NFS server
    /// exporting the backing filesystem (--nfs-backing) on 127.0.0.1 and its client mounting it,
    /// with -o as the client's option sets (default vers=3 and vers=4.2), beside a row of the
    /// backing filesystem itself. Where this kernel has no NFS, in a user-mode-linux guest:
    /// UNPACK_BENCH_UML=DIR names a kit (fixtures/fetch-uml.sh DIR makes one), else the system's.
    #[arg(
        long = "fs",
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "ext4",
        conflicts_with = "dir"
    )]
    filesystems: Vec<String>,

    /// A mount option set, one row per set; repeatable (-o defaults -o 'data=journal,commit=30').
    /// Default: the ext4 matrix on ext4 (defaults, nodelalloc, noauto_da_alloc, data=journal,
    /// data=writeback, commit=60, nobarrier, data=writeback,journal_async_commit), the same
    /// without the two delalloc options and the async commit on ext3, defaults on xfs and btrfs.
    #[arg(short = 'o', long = "mount-options", value_name = "SET", conflicts_with = "dir")]
    mount_options: Vec<String>,

    /// Our strategies (comma-separated; '' for none); default: all six (none, fsync, batch,
    /// syncfs, writeback, parallel).
    #[arg(short = 's', long, value_name = "LIST")]
    strategies: Option<String>,

    /// Peers: dpkg, dpkg-unsafe, eatmydata (dpkg under eatmydata), tar, tar-sync, decompress
    /// (comma-separated; '' for none); default: those installed (apt-local: dpkg, dpkg-unsafe,
    /// eatmydata, which run in its chroot).
    #[arg(long, value_name = "LIST")]
    peers: Option<String>,

    /// Page cache before each run: warm, cold (sync and drop caches).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "warm")]
    cache: Vec<Cache>,

    /// install (into an empty root), upgrade (over an installed copy with other contents),
    /// upgrade-db (the same copy installed by dpkg, in a root with dpkg's database), busy
    /// (install while a background writer dirties 64 MiB/s on the same filesystem),
    /// busy-elsewhere (the writer on a filesystem of its own), minbase (a base system into an
    /// empty root: unpack --bootstrap against dpkg after a first stage, then dpkg --configure -a;
    /// peers dpkg and dpkg-unsafe only), apt-local (`apt-get upgrade` of 24 packages in a copy
    /// of a prepared minbase chroot, apt driving each peer's dpkg or unpack-dpkg with each
    /// strategy; peers dpkg, dpkg-unsafe and eatmydata; needs GNU time and the network once),
    /// apt-install (`apt-get install python3 perl vim git build-essential` in a copy of
    /// bookworm.tar) and dist-upgrade (`apt-get dist-upgrade` to trixie in a copy of
    /// bookworm-devel.tar), the same peers, offline, alone (PACKAGE is their tarballs' directory).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "install")]
    scenario: Vec<Scenario>,

    /// Counted runs per cell, after one warm-up round.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,

    /// Also bench a generated package of N files of SIZE bytes (e.g. 10000:4k); repeatable.
    #[arg(long, value_name = "N:SIZE")]
    synthetic: Vec<synthetic::Spec>,

    /// Bench on this existing directory's filesystem (no mkfs, mount options as they are; no
    /// root needed for warm runs).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// The device under every filesystem: native (this machine), nvme, ssd, hdd, sdcard, or
    /// flush=LATENCY,bw=BANDWIDTH (e.g. flush=8ms,bw=150MB/s), emulated by a virtual disk that
    /// counts the flushes and bytes reaching it.
    #[arg(long, value_name = "NAME", default_value = "native", conflicts_with = "dir")]
    device: unpack_lab::vdisk::Profile,

    /// Also count, for every cell, in two runs of its own after the row's timed runs: the system
    /// calls of the tool and all its children by kind (strace -f), and the instructions they
    /// retire (perf where the CPU's counter is offered, else valgrind: user space only); per
    /// entry of the archives. Tables in matrix.md, every kind in counts.csv and matrix.json.
    #[arg(long)]
    counts: bool,

    /// With --fs nfs: the filesystem under the export, FS or FS:OPTIONS.
    #[arg(long, value_name = "FS[:OPTIONS]", default_value = "ext4")]
    nfs_backing: Backing,

    /// With --fs nfs: the server's export modes, one table each: sync (exports(5)'s default:
    /// stable on the server's disk before it replies), async (replies first).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "sync")]
    nfs_export: Vec<Export>,

    /// Write matrix.md, matrix.csv, matrix.json and matrix.svg here (and counts.csv with
    /// --counts) instead of printing the markdown.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let Invocation::Run(args) = unpack::cli::parse::<Args>() else { return ExitCode::SUCCESS };
    // Ctrl-C stops the matrix between runs, so the last filesystem still comes down.
    unpack::interrupt::install();
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            unpack::stderr!("unpack-bench: {}", unpack::error::one_line(e.as_ref()));
            ExitCode::from(
                e.downcast_ref::<unpack_lab::bench::Error>().map_or(1, |e| e.exit_status()),
            )
        }
    }
}

/// Runs the matrix `args` ask for; returns the exit status.
fn run(args: Args) -> anyhow::Result<u8> {
    let peers = match args.peers.as_deref() {
        None => None,
        Some(list) => Some(names(list).map(str::parse).collect::<Result<Vec<Peer>, _>>()?),
    };
    if args.filesystems.iter().any(|f| f == nfs::FS_NAME) && !nfs::kernel_has_nfs() {
        unpack::stderr!(
            "unpack-bench: this kernel has no NFS; running the matrix in a user-mode-linux guest"
        );
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        return Ok(guest::run_bench(&argv, args.out.as_deref())?);
    }
    let strategies = args.strategies.as_deref().map(|list| names(list).map(String::from).collect());
    let config = Config {
        packages: args.packages,
        synthetic: args.synthetic,
        filesystems: args.filesystems,
        option_sets: args.mount_options,
        strategies,
        peers,
        caches: args.cache,
        scenarios: args.scenario,
        runs: args.runs,
        dir: args.dir,
        device: device::for_profile(args.device),
        counts: args.counts,
        nfs_backing: args.nfs_backing,
        nfs_exports: args.nfs_export,
    };
    let matrix = run_matrix(config)?;
    match &args.out {
        Some(dir) => {
            output::write_all(&matrix, dir)
                .with_context(|| format!("writing the matrix to {}", dir.display()))?;
            let files = if output::has_counts(&matrix) {
                "matrix.json, matrix.svg and counts.csv"
            } else {
                "matrix.json and matrix.svg"
            };
            unpack::stderr!(
                "unpack-bench: wrote matrix.md, matrix.csv, {files} to {}",
                dir.display()
            );
        }
        None => unpack::cli::print(&output::markdown(&matrix))
            .context("printing the matrix on stdout")?,
    }
    let failed = matrix.failed_runs();
    if failed == 0 {
        return Ok(0);
    }
    unpack::stderr!(
        "unpack-bench: {failed} counted run(s) failed, the matrix is incomplete; their cells show as failed, with \
         reasons: {}",
        matrix.failed_cells().join("; ")
    );
    Ok(unpack_lab::bench::EXIT_INCOMPLETE)
}

/// The names in a comma-separated list; an empty list ('') names nothing.
fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|n| !n.is_empty())
}
