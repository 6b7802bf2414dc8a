//! Peak memory does not grow with the package: a 300 MB package and one of 30,000 files both
//! unpack in under 64 MiB of resident memory, as the engine's own `peak_rss_bytes` reports it
//! (checked against the kernel's count for the child, `ru_maxrss` via /usr/bin/time -f %M).

#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use std::process::Command;
use unpack_lab::bench::synthetic::Spec;

const LIMIT: u64 = 64 << 20;

fn peak_of(spec: Spec) -> (u64, u64) {
    let packages = tempfile::tempdir().unwrap();
    let deb = spec.generate(packages.path()).unwrap();
    peak_unpacking(&deb, &spec.to_string())
}

fn peak_unpacking(deb: &std::path::Path, what: &str) -> (u64, u64) {
    peak_unpacking_all(std::slice::from_ref(&deb.to_path_buf()), what)
}

fn peak_unpacking_all(debs: &[std::path::PathBuf], what: &str) -> (u64, u64) {
    let fs = scratch_sized("ext4", "defaults", 1 << 30);
    let root = fs.subdir("root");
    let kernel_peak = fs.path().join("time");
    let r = run(Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&kernel_peak)
        .arg(unpack_bin())
        .args(["--json", "-s", "syncfs"])
        .args(debs)
        .arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reported = r.json()["peak_rss_bytes"].as_u64().unwrap();
    let kernel =
        std::fs::read_to_string(&kernel_peak).unwrap().trim().parse::<u64>().unwrap() * 1024;
    println!("{what}: peak RSS reported {} KiB, kernel {} KiB", reported >> 10, kernel >> 10);
    (reported, kernel)
}

#[test]
fn peak_memory_stays_under_64_mib_for_300_mb_of_data() {
    let (reported, kernel) = peak_of(Spec { files: 3, size: 100 << 20 });
    assert!(reported < LIMIT && kernel < LIMIT, "reported {reported}, kernel {kernel}");
    // The engine's figure is the kernel's (VmHWM), give or take the exit path.
    assert!(reported.abs_diff(kernel) < 4 << 20, "reported {reported}, kernel {kernel}");
}

#[test]
fn peak_memory_stays_under_64_mib_for_30000_files() {
    let (reported, kernel) = peak_of(Spec { files: 30_000, size: 64 });
    assert!(reported < LIMIT && kernel < LIMIT, "reported {reported}, kernel {kernel}");
}

/// dpkg-deb's own layout (xz -6 in 24 MiB blocks), which the engine decodes on two threads with
/// a block and a half in flight: still under the bound, however far the decoders get ahead.
#[test]
fn peak_memory_stays_under_64_mib_for_a_multi_block_xz_package() {
    let packages = tempfile::tempdir().unwrap();
    let xz = deb_builder::xz_threaded(&deb_builder::text_tree(40, 2 << 20), 6, 24 << 20);
    let deb = deb_builder::write_deb(packages.path(), "blocks_1.0_all.deb", "data.tar.xz", &xz);
    let (reported, kernel) = peak_unpacking(&deb, "80 MiB in four xz blocks");
    assert!(reported < LIMIT && kernel < LIMIT, "reported {reported}, kernel {kernel}");
}

/// A call of several packages reads one package per lane, a lane per CPU and at most four
/// (src/pipeline.rs): memory grows with the lanes, never with the number of packages. Three
/// multi-block xz packages of 40 MiB (two 24 MiB blocks each) in one call stay under 64 MiB per
/// lane (measured on two CPUs, two lanes: 47 MiB for these three; 85 MiB for eight packages of
/// 80 MiB in four blocks each).
#[test]
fn peak_memory_of_a_call_of_several_multi_block_packages_stays_under_64_mib_per_lane() {
    let packages = tempfile::tempdir().unwrap();
    let debs: Vec<std::path::PathBuf> = (0..3)
        .map(|i| {
            let xz = deb_builder::xz_threaded(
                &deb_builder::text_tree_in(&format!("text{i}"), 20, 2 << 20),
                6,
                24 << 20,
            );
            deb_builder::write_deb(
                packages.path(),
                &format!("blocks{i}_1.0_all.deb"),
                "data.tar.xz",
                &xz,
            )
        })
        .collect();
    let lanes = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4) as u64;
    let (reported, kernel) = peak_unpacking_all(&debs, "three packages of 40 MiB in two xz blocks");
    assert!(
        reported < lanes * LIMIT && kernel < lanes * LIMIT,
        "{lanes} lanes: reported {reported}, kernel {kernel}"
    );
}

/// `--bootstrap` keeps the first stage's conffiles for the second to write again as
/// `NAME.dpkg-new`, within a bound in all: an Essential package of 300 conffiles of 1 MiB of
/// zeros (a package of a few hundred KiB) stays under the same 64 MiB (kept whole, it peaked at
/// 310 MiB); past the bound, its conffiles come from the archive again.
#[test]
fn peak_memory_of_a_bootstrap_of_many_conffiles_stays_under_64_mib() {
    let packages = tempfile::tempdir().unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut pkg = common::dpkg::Pkg::new("many-conffiles", "1.0", "all").field("Essential", "yes");
    for i in 0..300 {
        pkg = pkg.conffile(&format!("/etc/many-conffiles/{i}.conf"), &zeros);
    }
    let deb = pkg.build(packages.path());
    let fs = scratch_sized("ext4", "defaults", 1 << 30);
    let root = fs.subdir("root");
    let kernel_peak = fs.path().join("time");
    let r = run(Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&kernel_peak)
        .arg(unpack_bin())
        .args(["--json", "-s", "none", "--bootstrap", "--no-scripts"])
        .arg(&deb)
        .arg(&root));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reported = r.json()["peak_rss_bytes"].as_u64().unwrap();
    let kernel =
        std::fs::read_to_string(&kernel_peak).unwrap().trim().parse::<u64>().unwrap() * 1024;
    assert!(reported < LIMIT && kernel < LIMIT, "reported {reported}, kernel {kernel}");
    assert!(root.join("etc/many-conffiles/299.conf.dpkg-new").is_file());
}
