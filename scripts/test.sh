#!/usr/bin/env bash
# Every test of the project, on a fresh Debian 12 machine with nothing but the Rust toolchain:
# installs the Debian packages the tests need (only those missing), checks the text (rustfmt,
# clippy, rustdoc's links), then runs `cargo test`, the crate as crates.io would get it
# (scripts/publish-check.sh), the Debian packages (scripts/self-unpack.sh: build, lintian, the
# hardening of the bundled C, the packaged unpack against dpkg-deb -x), the installer package's
# apt snippet in a minbase (scripts/apt-snippet.sh) and their autopkgtests
# (scripts/autopkgtest.sh). This is the README's test command, and .ci/run calls it, so the
# two cannot drift.
#
# The tests need root (filesystems on loop devices, FUSE disks, device nodes). Run by another
# user, it runs itself again through sudo with that user's Rust toolchain (rustup's homes), the
# user's PATH with the sbin directories added (where losetup, mkfs and modprobe are, and which a
# Debian user's PATH lacks), and the user's target directory, so that what the user built is
# not built again; whatever root made in the checkout and in CARGO_HOME is given back to the
# user when it ends, so the user's next cargo command finds nothing it cannot write.
#
# Arguments are passed to `cargo test` (e.g. `scripts/test.sh --test crashtest`); with any, the
# text checks and the package checks are skipped. UNPACK_TEST_NO_INSTALL=1 installs nothing
# (a machine that has the tools but no network): a missing tool is then listed and the tests
# that need it fail.
#
# The NFS tests run in a user-mode-linux guest where this kernel has no NFS (docs/nfs.md). When
# the system's user-mode-linux cannot run userspace on this host (Debian 12's 6.1 on a CPU with
# AMX: a quick boot into a tiny init decides), a guest kit of Debian unstable's is made with
# fixtures/fetch-uml.sh in /var/cache/unpack-test/uml (UNPACK_TEST_CACHE=DIR for another
# place; kept between runs, never in the repository) and exported as UNPACK_BENCH_UML; with
# UNPACK_TEST_NO_INSTALL=1, only a kit already there is used. UNPACK_BENCH_UML given is used as
# it is.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "test.sh: the tests need root (loop devices, mounts), and sudo is not installed: run it as root" >&2
        exit 2
    fi
    command -v cargo >/dev/null || { echo "test.sh: cargo not found in PATH: install the Rust toolchain (rustup)" >&2; exit 2; }
    path=$PATH
    for dir in /usr/local/sbin /usr/sbin /sbin; do
        case ":$path:" in *":$dir:"*) ;; *) path=$path:$dir ;; esac
    done
    # rustup's cargo finds its toolchain through these, which root's HOME would change.
    exec sudo env "PATH=$path" "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}" \
        "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" "UNPACK_TEST_NO_INSTALL=${UNPACK_TEST_NO_INSTALL:-}" \
        "UNPACK_TEST_CACHE=${UNPACK_TEST_CACHE:-}" "UNPACK_BENCH_UML=${UNPACK_BENCH_UML:-}" \
        "$repo/scripts/test.sh" "$@"
fi
if ! command -v cargo >/dev/null; then
    if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        echo "test.sh: root has no cargo: run scripts/test.sh as $SUDO_USER, without sudo (it runs itself through sudo with $SUDO_USER's toolchain)" >&2
    else
        echo "test.sh: cargo not found in PATH: install the Rust toolchain (rustup)" >&2
    fi
    exit 2
fi

# Through sudo: what root makes in the user's checkout and CARGO_HOME (the target directory, the
# Debian packages, downloaded crates) goes back to the user at the end, however it ends. Only
# trees the user owns are walked, and only what root owns in them is changed.
give_back() {
    local dir
    for dir in "$repo" "${CARGO_HOME:-}"; do
        [ -n "$dir" ] && [ -d "$dir" ] && [ "$(stat -c %u "$dir")" = "$SUDO_UID" ] || continue
        find "$dir" -xdev -user 0 -print0 | xargs -0 -r chown -h "$SUDO_UID:$SUDO_GID"
    done
}
if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ]; then
    trap give_back EXIT
fi

# What the tests run, by Debian package: strace (syscall counts), valgrind (unpack-bench
# --counts' instruction counts, where there is no hardware counter), xfsprogs and btrfs-progs (the
# lab's filesystems, fsck of crash states), e2fsprogs (ext4, chattr), util-linux and mount
# (losetup, setpriv, flock, prlimit, fallocate), zstd and xz-utils (compressed members),
# dpkg-dev (dpkg-buildpackage), man-db and groff-base (the man page tests), debhelper, lintian
# and autopkgtest (the Debian packages and their checks), time (/usr/bin/time: peak memory), valgrind (unpack-bench --counts'
# instructions where the CPU offers no counter); user-mode-linux, nfs-kernel-server,
# nfs-common, rpcbind, kmod and iproute2 (the NFS rows of unpack-bench and tests, in a guest
# kernel where this one has no NFS: docs/nfs.md; busybox-static powers the guest off), and
# patchelf and debian-archive-keyring (fixtures/fetch-uml.sh: a guest kit of a newer
# user-mode-linux where the system's cannot run userspace on this host).
packages=(busybox-static strace valgrind xfsprogs btrfs-progs e2fsprogs util-linux mount zstd xz-utils dpkg-dev man-db groff-base debhelper lintian autopkgtest time
          user-mode-linux nfs-kernel-server nfs-common rpcbind kmod iproute2 patchelf debian-archive-keyring)
need=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    if [ "${UNPACK_TEST_NO_INSTALL:-}" = 1 ]; then
        echo "test.sh: not installed (UNPACK_TEST_NO_INSTALL=1): ${need[*]}" >&2
    else
        echo "test.sh: installing ${need[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
modprobe loop 2>/dev/null || true
modprobe fuse 2>/dev/null || true

# The NFS tests' guest kernel (see the top): nothing to do where this kernel has NFS, where
# UNPACK_BENCH_UML is given, or where the system's user-mode-linux boots userspace here.
has_fs() { awk -v fs="$1" '$NF == fs { found = 1 } END { exit !found }' /proc/filesystems; }
if ! { has_fs nfs && has_fs nfsd; } && [ -z "${UNPACK_BENCH_UML:-}" ] && command -v linux >/dev/null; then
    probe_log=$(mktemp)
    if ! fixtures/fetch-uml.sh --probe linux >/dev/null 2>"$probe_log"; then
        kit=${UNPACK_TEST_CACHE:-/var/cache/unpack-test}/uml
        echo "test.sh: the system's user-mode-linux cannot run userspace here, for the NFS tests' guest:" >&2
        sed 's/^/    /' "$probe_log" >&2
        started=$SECONDS
        if [ "${UNPACK_TEST_NO_INSTALL:-}" = 1 ]; then
            if [ -x "$kit/usr/bin/linux.uml" ] && fixtures/fetch-uml.sh --probe "$kit/usr/bin/linux.uml" >/dev/null 2>&1; then
                export UNPACK_BENCH_UML=$kit
            else
                echo "test.sh: no guest kit in $kit (UNPACK_TEST_NO_INSTALL=1): the NFS tests will fail; make one with fixtures/fetch-uml.sh $kit" >&2
            fi
        elif fixtures/fetch-uml.sh "$kit"; then
            export UNPACK_BENCH_UML=$kit
        else
            echo "test.sh: fixtures/fetch-uml.sh $kit failed: the NFS tests will fail" >&2
        fi
        if [ -n "${UNPACK_BENCH_UML:-}" ]; then
            echo "test.sh: NFS tests' guest kernel: UNPACK_BENCH_UML=$UNPACK_BENCH_UML ($((SECONDS - started)) s)" >&2
        fi
    fi
    rm -f "$probe_log"
fi

# The text is uniform and lint-clean before anything runs: rustfmt (rustfmt.toml), clippy with
# the lints Cargo.toml's [workspace.lints] denies, and rustdoc's broken links.
if [ $# -eq 0 ]; then
    cargo fmt --all --check
    cargo clippy --workspace --all-targets --locked -- -D warnings 2>&1
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet 2>&1
fi
cargo test --locked "$@" 2>&1
if [ $# -eq 0 ]; then
    scripts/publish-check.sh 2>&1
    scripts/self-unpack.sh 2>&1
    scripts/apt-snippet.sh 2>&1
    scripts/autopkgtest.sh 2>&1
fi
