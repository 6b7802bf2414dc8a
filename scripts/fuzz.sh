#!/usr/bin/env bash
# Fuzzes each parser of unpack for SECONDS (default 600) seconds, one target after another:
#
#   deb_container  any bytes as a .deb: ar container, decompressors, the whole unpack
#   control        any bytes as a control file and as a control.tar
#   tar_entries    any bytes as the data.tar of a valid .deb: tar headers, entry
#                  validation, path resolution in a root full of hostile symlinks
#   xz_blocks      any bytes as an xz stream: the multi-block reader against the
#                  one-thread decoder, byte for byte and failure for failure
#   dpkg_db        any bytes as each of dpkg's database files (status, control, info
#                  lists, conffiles, md5sums, diversions, statoverride, arch, triggers),
#                  versions and relations: round trips and version order; the real dpkg-query
#                  reads a sample of the status stanzas and lists it builds
#   journal_recover  any bytes as the recovery journal of a trapped root (with an intent),
#                  recovered; the tree beside the root must not change. An odd first byte
#                  seals the rest with a valid checksum, `@H` stands for that tree's path
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]        as root (it mounts a tmpfs)
#
# Exits non-zero if any target crashed, hung (-timeout=10) or outgrew -rss_limit_mb=512; the
# input that did it is in fuzz/artifacts/TARGET/, and `cargo fuzz run TARGET FILE` replays it.
# The seed corpus is made from fixtures/ on every run (the fixtures are the source of truth,
# so nothing derived from them is committed); what the fuzzer finds accumulates in the
# git-ignored fuzz/corpus/TARGET/. Logs go to fuzz/logs/TARGET.log.
#
# cargo fuzz needs nightly's -Z flags; this machine has the stable toolchain only, so
# RUSTC_BOOTSTRAP=1 lets stable accept them (ASan's runtime ships with stable's rust-std).
# Only one fuzzer process runs at a time: the machine's two cores are shared.
set -euo pipefail
cd "$(dirname "$0")/.."

# In a mount namespace of its own: the scratch tmpfs below, where every root and the tree the
# journal_recover target watches live, is seen by nothing else on the machine, and goes with
# the namespace whatever happens to this script.
if [ -z "${UNPACK_FUZZ_NAMESPACE:-}" ]; then
    exec env UNPACK_FUZZ_NAMESPACE=1 unshare --mount --propagation private "$0" "$@"
fi

seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(deb_container control tar_entries xz_blocks journal_recover dpkg_db)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
command -v dpkg-deb >/dev/null || { echo "fuzz.sh: dpkg-deb is needed to make the seed corpus" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1

# The roots live on a small tmpfs of their own: a decompression bomb fills it (the engine must
# then fail cleanly with ENOSPC) instead of the machine's memory, and nothing is left behind.
scratch=$(mktemp -d /tmp/unpack-fuzz.XXXXXX)
mount -t tmpfs -o size=256m,mode=0700 unpack-fuzz "$scratch"
cleanup() { umount "$scratch" 2>/dev/null || umount -l "$scratch"; rmdir "$scratch"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
export UNPACK_FUZZ_DIR=$scratch

# Seeds: the fixtures as packages, their data.tar streams, their control.tar streams and
# control files. Broken fixtures that dpkg-deb cannot read give no stream, which is fine.
for t in "${targets[@]}"; do mkdir -p "fuzz/corpus/$t"; done
mkdir -p fuzz/logs
for deb in fixtures/*.deb; do
    name=$(basename "$deb" .deb)
    if [ -d fuzz/corpus/deb_container ]; then
        cp "$deb" "fuzz/corpus/deb_container/seed-$name"
    fi
    if [ -d fuzz/corpus/tar_entries ]; then
        dpkg-deb --fsys-tarfile "$deb" > "fuzz/corpus/tar_entries/seed-$name" 2>/dev/null || true
    fi
    if [ -d fuzz/corpus/xz_blocks ]; then
        # Many small blocks, sizes in their headers as dpkg-deb writes them.
        dpkg-deb --fsys-tarfile "$deb" 2>/dev/null | head -c 60000 | xz -T2 -1 --block-size=4000 > "fuzz/corpus/xz_blocks/seed-$name" || true
    fi
    if [ -d fuzz/corpus/control ]; then
        dpkg-deb --ctrl-tarfile "$deb" > "fuzz/corpus/control/seed-$name.tar" 2>/dev/null || true
        dpkg-deb -I "$deb" control > "fuzz/corpus/control/seed-$name" 2>/dev/null || true
    fi
done
# Journals: records as the engine writes them, and as an attacker would, aimed at the tree
# beside the root (`host`, `@H`) by absolute and relative names and through the root's symlinks.
if [ -d fuzz/corpus/journal_recover ]; then
    seed() { printf '1%b' "$2" > "fuzz/corpus/journal_recover/seed-$1"; }
    seed forward 'P pkg%201.0\nR usr/bin tool.unpack-new tool 0\nR . new.unpack-new new 0\n'
    seed empty-dir 'R . new.unpack-new empty 1\n'
    seed absolute-temp 'R . @H/secret.unpack-new stolen 0\n'
    seed absolute-name 'R usr/bin tool.unpack-new @H/secret 0\n'
    seed dotdot 'R usr/bin ../../../host/secret.unpack-new x 0\nR . ../host/sub/x.unpack-new ../host/sub/x 0\n'
    seed symlink-dir 'R host secret.unpack-new secret 0\nR hostabs/sub x.unpack-new x 1\nR up/host/sub empty.unpack-new empty 1\n'
    seed absolute-dir 'R @H/sub x.unpack-new x 0\n'
    seed meta-v1 'M @H 4777 1000 1000 0 0\nM host 777 0 0 0 0\n'
    seed rollback 'E garbage\n'
    printf '0unpack-journal 1\nM host 777 0 0 0 0\nE 1 0000000000000000\n' > fuzz/corpus/journal_recover/seed-raw-v1
fi
# dpkg's database: this machine's own, each file cut to the fuzzer's -max_len.
if [ -d fuzz/corpus/dpkg_db ]; then
    for f in /var/lib/dpkg/status /var/lib/dpkg/diversions /var/lib/dpkg/statoverride \
             $(ls /var/lib/dpkg/info/*.list /var/lib/dpkg/info/*.md5sums /var/lib/dpkg/info/*.conffiles 2>/dev/null | head -30); do
        [ -f "$f" ] && head -c 60000 "$f" > "fuzz/corpus/dpkg_db/seed-$(basename "$f")"
    done
    for f in /var/lib/dpkg/triggers/File $(ls /var/lib/dpkg/info/*.triggers 2>/dev/null | head -10); do
        [ -f "$f" ] && head -c 60000 "$f" > "fuzz/corpus/dpkg_db/seed-triggers-$(basename "$f")"
    done
    printf 'interest-noawait /usr/lib/x86_64-linux-gnu\nactivate-await ldconfig\n' > fuzz/corpus/dpkg_db/seed-triggers-member
    printf 'man-db\nlibc-bin/noawait\nlibfoo:amd64\n' > fuzz/corpus/dpkg_db/seed-triggers-explicit
    printf '1.0~rc1-1\n1:1.0+dfsg-2~bpo1\n' > fuzz/corpus/dpkg_db/seed-versions
    printf 'libc6 (>= 2.3) | foo:any, bar (<< 1:2-3)\n' > fuzz/corpus/dpkg_db/seed-relations
    printf 'amd64\ni386\n' > fuzz/corpus/dpkg_db/seed-arch
    # Control files, as dpkg --unpack checks them.
    for deb in fixtures/*.deb; do
        dpkg-deb -I "$deb" control > "fuzz/corpus/dpkg_db/seed-control-$(basename "$deb" .deb)" 2>/dev/null || true
    done
    printf 'Package: seed\nVersion: 1:2.0-1\nArchitecture: amd64\nMaintainer: m <m@example.org>\nMulti-Arch: same\nEssential: yes\nPriority: optional\nDepends: a (>= 1) | b, c:any (<< 2)\nProvides: v (= 1)\nRecommended: r\nClass: extra\nRevision: 3\nConffiles:\n /etc/x 0123\nFilename: a\nSize: 1\nDescription: d\n long\n' > fuzz/corpus/dpkg_db/seed-control-fields
fi
find fuzz/corpus -name 'seed-*' -empty -delete

# -a: debug assertions, so that an integer overflow is a crash and not a silent wrap.
cargo fuzz build -a --fuzz-dir fuzz

failed=()
for t in "${targets[@]}"; do
    echo "== $t for ${seconds}s (log: fuzz/logs/$t.log)"
    if cargo fuzz run -a --fuzz-dir fuzz "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=512 -timeout=10 -max_len=65536 \
        -dict=fuzz/unpack.dict -print_final_stats=1 > "fuzz/logs/$t.log" 2>&1; then
        grep -E '^(#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)' "fuzz/logs/$t.log" || true
    else
        echo "!! $t failed: see fuzz/logs/$t.log and fuzz/artifacts/$t/"
        grep -E '^(==[0-9]+==ERROR|thread .* panicked|SUMMARY|artifact_prefix|Test unit written)' "fuzz/logs/$t.log" | head -5 || true
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: ${targets[*]}: no crash, hang or memory blow-up in ${seconds}s each"
