#!/usr/bin/env bash
# Two (or more) builds of `unpack`, side by side: each run unpacks PACKAGE with STRATEGY into an
# empty directory of one fresh ext4 loop mount, the builds alternating within every round, and
# the median time, the median CPU time (user + system: the work done, which other programs on
# a shared machine disturb less than the time) and the largest peak RSS (/usr/bin/time) of each
# build are printed. For
# before/after figures of a change too small for unpack-bench's matrix to separate from noise;
# a wrapper script that sets environment variables counts as a build.
#
#   scripts/ab.sh STRATEGY RUNS PACKAGE BUILD...          as root (it mounts a loop device)
#   e.g. scripts/ab.sh none 9 emacs-common_*.deb /tmp/old/unpack target/release/unpack
set -euo pipefail
export LC_ALL=C  # a decimal point in $EPOCHREALTIME, whatever the locale
[ $# -ge 4 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
strategy=$1 runs=$2 package=$3
shift 3

scratch=$(mktemp -d /tmp/unpack-ab.XXXXXX)
truncate -s 4G "$scratch/img"
mkfs.ext4 -q -F "$scratch/img"
mkdir "$scratch/mnt"
mount -o loop "$scratch/img" "$scratch/mnt"
cleanup() { umount "$scratch/mnt" 2>/dev/null || umount -l "$scratch/mnt"; rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq "$runs"); do
    for build in "$@"; do
        rm -rf "$scratch/mnt/root"
        mkdir "$scratch/mnt/root"
        sync -f "$scratch/mnt"
        # bash's clock, not time(1)'s %e, which counts in hundredths of a second
        start=$EPOCHREALTIME
        /usr/bin/time -f "%M %U %S" -o "$scratch/time" "$build" -q -s "$strategy" "$package" "$scratch/mnt/root"
        end=$EPOCHREALTIME
        echo "$build $(python3 -c "print(f'{$end - $start:.4f}')") $(cat "$scratch/time")"
    done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    build, seconds, kib, user, system = line.split()
    runs.setdefault(build, []).append((float(seconds), int(kib), float(user) + float(system)))
for build, r in runs.items():
    times = [t for t, _, _ in r]
    cpu = statistics.median(c for _, _, c in r)
    print(f"{build}: median {statistics.median(times):.4f} s of {times}, CPU {cpu:.2f} s, peak RSS {max(k for _, k, _ in r)} KiB")
'
