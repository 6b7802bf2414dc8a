//! The virtual disk against real loop devices, real ext4 and the real FUSE kernel driver (as
//! root). Every test takes down what it made, through guards, even when it fails.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use unpack_lab::scratchfs::ScratchFs;
use unpack_lab::vdisk::log::LogReader;
use unpack_lab::vdisk::{Counters, Profile, VDisk, VdiskError};

const SIZE: u64 = 64 << 20;

fn profile(spec: &str) -> Profile {
    spec.parse().unwrap()
}

/// A temp dir with `disk/` (where the disk is served) and `mnt/` (where ext4 goes).
struct Place {
    tmp: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("disk")).unwrap();
        Place { tmp }
    }
    fn disk(&self) -> PathBuf {
        self.tmp.path().join("disk")
    }
    fn mnt(&self) -> PathBuf {
        self.tmp.path().join("mnt")
    }
    fn log(&self) -> PathBuf {
        self.tmp.path().join("write.log")
    }
    /// Mounts below this place and loop devices whose backing file is below it.
    fn leftovers(&self) -> Vec<String> {
        let root = self.tmp.path().canonicalize().unwrap();
        let mut found: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
            .filter(|mp| Path::new(mp).starts_with(&root))
            .map(|mp| format!("mount {mp}"))
            .collect();
        for e in std::fs::read_dir("/sys/block").unwrap().filter_map(Result::ok) {
            if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
                if Path::new(b.trim()).starts_with(&root) {
                    found.push(format!("loop {:?} -> {}", e.file_name(), b.trim()));
                }
            }
        }
        found
    }
}

fn delta(disk: &VDisk, before: &Counters) -> Counters {
    disk.counters().unwrap().since(before)
}

fn write_and_fsync(path: &Path, chunks: usize, byte: u8) {
    let f = OpenOptions::new().create(true).write(true).truncate(true).open(path).unwrap();
    for i in 0..chunks {
        f.write_all_at(&[byte.wrapping_add(i as u8); 4096], i as u64 * 4096).unwrap();
        f.sync_all().unwrap();
    }
}

#[test]
fn n_fsyncs_on_the_filesystem_give_at_least_n_device_flushes_each_slept() {
    let place = Place::new();
    let disk = VDisk::start(&profile("flush=1ms"), SIZE, &place.disk(), None).unwrap();
    let fs = disk.scratch_fs("ext4", &place.mnt(), "defaults").unwrap();
    let before = disk.counters().unwrap();
    write_and_fsync(&fs.path().join("f"), 10, 1);
    let d = delta(&disk, &before);
    assert!(d.flushes >= 10, "10 fsyncs gave {} device flushes", d.flushes);
    assert!(d.bytes >= 10 * 4096, "10 fsynced 4 KiB writes put {} bytes on the device", d.bytes);
    // The server slept the profile's latency once per flush, and only for flushes.
    let total = disk.counters().unwrap();
    assert_eq!(total.flush_wait, Duration::from_millis(1) * total.flushes as u32);
    assert_eq!(total.write_wait, Duration::ZERO, "an unpaced profile made writes wait");
    fs.teardown().unwrap();
    disk.stop().unwrap();
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

#[test]
fn writes_without_fsync_reach_no_device_flush_before_unmount() {
    let place = Place::new();
    let disk = VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), None).unwrap();
    // commit=300: no periodic journal commit during the test.
    let fs = disk.scratch_fs("ext4", &place.mnt(), "commit=300").unwrap();
    // Settle what mkfs and mount left dirty, so only the test's own writes are pending.
    let root = File::open(fs.path()).unwrap();
    rustix::fs::syncfs(&root).unwrap();
    drop(root);
    let before = disk.counters().unwrap();
    let mut f = File::create(fs.path().join("unsynced")).unwrap();
    f.write_all(&[7u8; 1 << 20]).unwrap();
    drop(f);
    assert_eq!(delta(&disk, &before).flushes, 0, "a write without fsync flushed the device");
    fs.teardown().unwrap();
    let after = delta(&disk, &before);
    assert!(after.flushes > 0, "unmount did not flush the device");
    assert!(after.bytes >= 1 << 20, "unmount wrote {} bytes, less than the file", after.bytes);
    disk.stop().unwrap();
}

#[test]
fn the_log_replayed_from_zeros_rebuilds_the_image_and_keeps_marks_in_order() {
    let place = Place::new();
    let disk =
        VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), Some(&place.log())).unwrap();
    disk.mark("mkfs").unwrap();
    let fs = disk.scratch_fs("ext4", &place.mnt(), "defaults").unwrap();
    disk.mark("start").unwrap();
    write_and_fsync(&fs.path().join("f"), 1, 0xa5);
    disk.mark("returned").unwrap();
    fs.teardown().unwrap();
    let image = std::fs::read(disk.image()).unwrap();
    let counters = disk.counters().unwrap();
    disk.stop().unwrap();

    let reader = LogReader::open(&place.log()).unwrap();
    assert_eq!(reader.sector_size(), 512);
    let mut replayed = vec![0u8; SIZE as usize];
    let (mut marks, mut flushes) = (Vec::new(), 0);
    let (mut pattern_bytes, mut pattern_written_between) = (0, false);
    let mut flushed_after_pattern = false;
    for entry in reader {
        let e = entry.unwrap();
        let at = (e.sector * 512) as usize;
        if let Some(label) = &e.mark {
            marks.push(label.clone());
        } else if e.is_discard() {
            replayed[at..at + (e.nr_sectors * 512) as usize].fill(0);
        } else if e.is_write() {
            replayed[at..at + e.data.len()].copy_from_slice(&e.data);
            if marks.last().map(String::as_str) == Some("start") {
                pattern_bytes += e.data.iter().filter(|b| **b == 0xa5).count();
                pattern_written_between = pattern_bytes >= 4096;
            }
        }
        if e.is_flush() {
            flushes += 1;
            flushed_after_pattern |=
                pattern_written_between && marks.last().map(String::as_str) == Some("start");
        }
    }
    assert_eq!(marks, ["mkfs", "start", "returned"]);
    assert!(
        pattern_written_between,
        "the fsynced block is not logged between 'start' and 'returned'"
    );
    assert!(flushed_after_pattern, "no flush logged after the fsynced block and before 'returned'");
    assert_eq!(flushes, counters.flushes, "the log and the counters disagree on flushes");
    assert!(replayed == image, "replaying the log does not rebuild the image");
}

#[test]
fn bandwidth_pacing_makes_the_server_wait_and_flush_latency_does_not() {
    let place = Place::new();
    let disk = VDisk::start(&profile("flush=0ms,bw=4MB/s"), SIZE, &place.disk(), None).unwrap();
    let fs = disk.scratch_fs("ext4", &place.mnt(), "defaults").unwrap();
    let before = disk.counters().unwrap();
    let f = File::create(fs.path().join("big")).unwrap();
    f.write_all_at(&[3u8; 2 << 20], 0).unwrap();
    f.sync_all().unwrap();
    let d = delta(&disk, &before);
    assert!(d.bytes >= 2 << 20);
    assert!(d.write_wait > Duration::ZERO, "2 MiB at 4 MB/s never waited");
    assert_eq!(d.flush_wait, Duration::ZERO);
    drop(f);
    fs.teardown().unwrap();
    disk.stop().unwrap();
}

#[test]
fn the_image_itself_answers_fsync_and_fallocate_as_a_device() {
    let place = Place::new();
    let disk =
        VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), Some(&place.log())).unwrap();
    let before = disk.counters().unwrap();
    let img = OpenOptions::new().read(true).write(true).open(disk.image()).unwrap();
    img.write_all_at(&[9u8; 8192], 4096).unwrap();
    img.sync_all().unwrap();
    let d = delta(&disk, &before);
    // The kernel may cut one write(2) into several requests; bytes and flushes are exact.
    assert!(d.writes >= 1);
    assert_eq!((d.bytes, d.flushes), (8192, 1));
    // Discard (what loop sends for BLKDISCARD) and write-zeroes: both must be served, and
    // both leave zeros.
    use rustix::fs::FallocateFlags as F;
    rustix::fs::fallocate(&img, F::PUNCH_HOLE | F::KEEP_SIZE, 4096, 4096).unwrap();
    rustix::fs::fallocate(&img, F::ZERO_RANGE | F::KEEP_SIZE, 8192, 4096).unwrap();
    let d = delta(&disk, &before);
    assert_eq!((d.discards, d.zeroes), (1, 1));
    let mut back = [1u8; 8192];
    img.read_exact_at(&mut back, 4096).unwrap();
    assert!(back.iter().all(|b| *b == 0), "discarded and zeroed ranges do not read back as zeros");
    // A device cannot grow, and cannot be written past its end.
    assert!(img.set_len(SIZE * 2).is_err());
    assert!(img.write_all_at(&[1], SIZE).is_err());
    drop(img);
    disk.stop().unwrap();
    // (kind, first sector, sectors), with consecutive writes that touch or overlap merged (a
    // request cut at a byte that is not a sector boundary logs that sector twice).
    let mut kinds: Vec<(&str, u64, u64)> = Vec::new();
    for e in LogReader::open(&place.log()).unwrap().map(Result::unwrap) {
        let kind = if e.is_flush() {
            "flush"
        } else if e.is_discard() {
            "discard"
        } else {
            "write"
        };
        match kinds.last_mut() {
            Some(("write", first, n))
                if kind == "write" && e.sector >= *first && e.sector <= *first + *n =>
            {
                *n = (*n).max(e.sector + e.nr_sectors - *first);
            }
            _ => kinds.push((kind, e.sector, e.nr_sectors)),
        }
    }
    assert_eq!(kinds, [("write", 8, 16), ("flush", 0, 0), ("discard", 8, 8), ("write", 16, 8)]);
}

#[test]
fn teardown_after_a_panic_leaves_no_mount_no_loop_device_no_fuse_mount() {
    let place = Place::new();
    let result = std::panic::catch_unwind(|| {
        let disk =
            VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), Some(&place.log())).unwrap();
        let fs = disk.scratch_fs("ext4", &place.mnt(), "defaults").unwrap();
        std::fs::write(fs.path().join("half-done"), b"x").unwrap();
        assert!(!place.leftovers().is_empty(), "nothing was mounted to begin with");
        panic!("a failed run between mount and teardown");
    });
    assert!(result.is_err());
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

#[test]
fn stopping_the_disk_first_takes_down_what_still_uses_its_image() {
    let place = Place::new();
    let disk = VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), None).unwrap();
    // The wrong order, possible only by attaching the image by hand.
    let fs = ScratchFs::on_existing("ext4", disk.image(), &place.mnt(), "defaults").unwrap();
    let device = fs.device().to_path_buf();
    assert_eq!(disk.holders(), vec![device.clone()]);
    match disk.stop() {
        Err(VdiskError::LeftAttached { devices, .. }) => assert_eq!(devices, vec![device]),
        other => panic!("stopping under a mounted filesystem gave {other:?}"),
    }
    assert_eq!(place.leftovers(), Vec::<String>::new());
    // The late guard finds nothing left to do, and touches nothing else.
    drop(fs);
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

#[test]
fn native_is_a_plain_sparse_file_without_counters_or_log() {
    let place = Place::new();
    let native = Profile::Native;
    let err = VDisk::start(&native, SIZE, &place.disk(), Some(&place.log())).unwrap_err();
    assert!(matches!(err, VdiskError::LogNeedsEmulation { .. }), "{err}");
    let disk = VDisk::start(&native, SIZE, &place.disk(), None).unwrap();
    let meta = std::fs::metadata(disk.image()).unwrap();
    assert_eq!(meta.len(), SIZE);
    assert_eq!(disk.counters(), None);
    disk.mark("ignored").unwrap();
    let image = disk.image().to_path_buf();
    disk.stop().unwrap();
    assert!(!image.exists(), "the native image outlived its disk");
}

#[test]
fn bad_arguments_are_errors_naming_the_path() {
    let place = Place::new();
    let p = profile("flush=0ms");
    let err = VDisk::start(&p, 1000, &place.disk(), None).unwrap_err();
    assert!(
        err.to_string().contains("disk.img") && err.to_string().contains("multiple of 512"),
        "{err}"
    );
    let missing = place.disk().join("nope");
    let err = VDisk::start(&p, SIZE, &missing, None).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    let err = VDisk::start(&p, SIZE, &place.disk(), Some(&place.disk().join("log"))).unwrap_err();
    assert!(matches!(err, VdiskError::LogInsideDisk { .. }), "{err}");
    let disk = VDisk::start(&p, SIZE, &place.disk(), None).unwrap();
    let err = disk.mark(&"x".repeat(600)).unwrap_err();
    assert!(err.to_string().contains("disk.img"), "{err}");
    disk.stop().unwrap();
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

#[test]
fn the_serving_thread_is_an_io_flusher_exactly_when_the_disk_says_so() {
    const PF_MEMALLOC_NOIO: u64 = 0x0008_0000;
    let place = Place::new();
    let disk = VDisk::start(&profile("flush=0ms"), SIZE, &place.disk(), None).unwrap();
    // Any thread fuser serves from ("fuser-N"); every disk in this process is alike.
    let mut serving = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().filter_map(Result::ok) {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with("fuser-") {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // Field 9 (flags) is the 7th after the parenthesised command name.
            let flags: u64 =
                stat.rsplit_once(") ").unwrap().1.split(' ').nth(6).unwrap().parse().unwrap();
            serving.push(flags & PF_MEMALLOC_NOIO != 0);
        }
    }
    assert!(!serving.is_empty(), "no serving thread found");
    assert!(
        serving.iter().all(|f| *f == disk.is_io_flusher()),
        "flags {serving:?}, disk says {}",
        disk.is_io_flusher()
    );
    disk.stop().unwrap();
}

#[test]
fn unpack_vdisk_serves_until_sigint_and_prints_the_counters() {
    let place = Place::new();
    let (mut reap, image) = serve(&place, Stdio::piped());
    let img = OpenOptions::new().write(true).open(&image).unwrap();
    img.write_all_at(&[1u8; 4096], 0).unwrap();
    img.sync_all().unwrap();
    drop(img);
    let pid = reap.0.as_ref().map(|c| c.id()).unwrap();
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = reap.0.take().unwrap().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&image.display().to_string()), "{stdout}");
    assert!(stdout.contains("4096 bytes, 1 flushes"), "{stdout}");
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

#[test]
fn unpack_vdisk_will_not_stop_while_a_loop_device_uses_the_image() {
    use std::io::BufRead;
    let place = Place::new();
    let (mut reap, image) = serve(&place, Stdio::null());
    let stderr = reap.0.as_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let pid = rustix::process::Pid::from_raw(reap.0.as_ref().unwrap().id() as i32).unwrap();
    // Declared after the server's guard, so it is detached before the server is killed.
    let lo = unpack_lab::scratchfs::LoopDevice::attach(&image).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let refusal = loop {
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("no refusal on stderr");
        if line.contains("still attached") {
            break line;
        }
    };
    assert!(refusal.contains(&lo.path().display().to_string()), "{refusal}");
    assert!(
        matches!(reap.0.as_mut().unwrap().try_wait(), Ok(None)),
        "it stopped under an attached loop device"
    );
    drop(lo);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = reap.0.take().unwrap().wait().unwrap();
    assert!(status.success());
    assert_eq!(place.leftovers(), Vec::<String>::new());
}

/// A running `unpack-vdisk`: killed, and its mount taken down, if a test fails before the
/// server stopped by itself.
struct Reap(Option<std::process::Child>, PathBuf);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = Command::new("umount").arg(&self.1).status();
        }
    }
}

/// Starts `unpack-vdisk` on a 64 MiB disk in `place` and waits until it serves the image.
fn serve(place: &Place, stdout: Stdio) -> (Reap, PathBuf) {
    let child = Command::new(env!("CARGO_BIN_EXE_unpack-vdisk"))
        .args(["--profile", "flush=0ms", "--size", "64M"])
        .arg(place.disk())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reap = Reap(Some(child), place.disk());
    let image = place.disk().join("disk.img");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&image).map(|m| m.len()).ok() != Some(64 << 20) {
        assert!(Instant::now() < deadline, "unpack-vdisk did not serve {}", image.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    (reap, image)
}
