//! `unpack-vdisk --profile hdd --size 2G [--log FILE] DIR`: serves an emulated disk as
//! `DIR/disk.img` until SIGINT or SIGTERM, so people can run their own tools on it.

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use unpack::cli::Invocation;
use unpack_lab::vdisk::{profile, Profile, VDisk, IMAGE_NAME, MARK_XATTR};

/// Serve an emulated block device as DIR/disk.img (a FUSE file; attach a loop device to it).
#[derive(Parser)]
#[command(name = "unpack-vdisk", version, after_help = profiles_help())]
struct Args {
    /// Device profile: native, nvme, ssd, hdd, sdcard, or flush=8ms,bw=150MB/s
    #[arg(long, default_value = "hdd")]
    profile: Profile,
    /// Disk size: 2G, 512M, ... (powers of 1024)
    #[arg(long, value_parser = profile::parse_size, default_value = "2G")]
    size: u64,
    /// Write a dm-log-writes log of every write, flush, discard and mark here
    #[arg(long)]
    log: Option<PathBuf>,
    /// Directory to serve the disk in (the FUSE filesystem is mounted on it)
    dir: PathBuf,
}

fn profiles_help() -> String {
    let mut s = String::from("Profiles (flush latency, write bandwidth):\n");
    for (name, latency, bw, what) in profile::NAMED {
        s += &format!(
            "  {name:<7} {:>6} {:>8}  {what}\n",
            profile::format_duration(*latency),
            profile::format_bandwidth(*bw)
        );
    }
    s
}

fn main() {
    let Invocation::Run(args) = unpack::cli::parse::<Args>() else { return };
    if let Err(e) = run(args) {
        unpack::stderr!("unpack-vdisk: {}", unpack::error::one_line(e.as_ref()));
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    // Before any thread exists, so every thread inherits the mask and only `wait` sees them.
    let signals = signals::block_int_and_term().context("blocking SIGINT and SIGTERM")?;
    let disk = VDisk::start(&args.profile, args.size, &args.dir, args.log.as_deref())?;
    let image = disk.image().display().to_string();
    // What it serves and how to use it, for the person at the terminal: a closed stdout loses
    // only that, never the disk.
    let say = |text: String| drop(unpack::cli::print(&(text + "\n")));
    say(format!("serving {image}: {}, {} bytes", disk.profile(), args.size));
    if !disk.is_io_flusher() {
        unpack::stderr!("warning: could not make the server an IO flusher (needs CAP_SYS_RESOURCE): avoid memory pressure");
    }
    say(format!("attach and mount it:\n  dev=$(losetup --find --show {image})\n  mkfs.ext4 -q $dev && mount $dev /mnt"));
    if let Some(log) = disk.log_path() {
        say(format!(
            "write log: {}\n  add a mark: setfattr -n {MARK_XATTR} -v LABEL {image}",
            log.display()
        ));
    }
    say("stop: umount /mnt; losetup -d $dev; then Ctrl-C".to_string());
    loop {
        let sig = signals.wait().context("waiting for a signal")?;
        let holders = disk.holders();
        if holders.is_empty() {
            say(format!("signal {sig}: stopping"));
            break;
        }
        unpack::stderr!(
            "{IMAGE_NAME} is still attached to {}: unmount and detach first (umount MOUNTPOINT; losetup -d DEVICE), then stop again",
            holders.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let counters = disk.counters();
    disk.stop()?;
    match counters {
        Some(c) => say(format!("device: {c}")),
        None => say("device: native, not counted".to_string()),
    }
    Ok(())
}

mod signals {
    use std::io;

    /// SIGINT and SIGTERM, blocked and waited for synchronously.
    pub struct Signals(libc::sigset_t);

    pub fn block_int_and_term() -> io::Result<Signals> {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it; pthread_sigmask
        // only reads it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(Signals(set))
        }
    }

    impl Signals {
        /// Waits for one of the blocked signals; returns its number.
        pub fn wait(&self) -> io::Result<i32> {
            let mut sig = 0;
            // SAFETY: the set was initialised above; sig is a valid out pointer.
            let rc = unsafe { libc::sigwait(&self.0, &mut sig) };
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(sig)
        }
    }
}
