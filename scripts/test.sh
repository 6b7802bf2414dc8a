#!/usr/bin/env bash
# Every test of the project, on a fresh Debian 12 machine with nothing but the Rust toolchain:
# installs the Debian packages the tests need (only those missing), checks the text (rustfmt,
# clippy, rustdoc's links), then runs `cargo test`, the crate as crates.io would get it
# (scripts/publish-check.sh), the Debian packages (scripts/self-unpack.sh: build, lintian, the
# hardening of the bundled C, the packaged unpack against dpkg-deb -x) and their autopkgtests
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
        "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" "$repo/scripts/test.sh" "$@"
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
# kernel where this one has no NFS: docs/nfs.md).
packages=(busybox-static strace valgrind xfsprogs btrfs-progs e2fsprogs util-linux mount zstd xz-utils dpkg-dev man-db groff-base debhelper lintian autopkgtest time
          user-mode-linux nfs-kernel-server nfs-common rpcbind kmod iproute2)
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
    scripts/autopkgtest.sh 2>&1
fi
