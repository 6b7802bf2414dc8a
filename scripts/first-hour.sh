#!/usr/bin/env bash
# A newcomer's first hour, as the README has it, checked on this machine. As root, it makes a
# fresh user account (unpack-newcomer, sudo without a password: Debian's defaults otherwise, so
# a PATH without sbin), gives it a copy of root's Rust toolchain (the rustup homes, as rustup
# would have installed them) and a clone of this checkout's HEAD in ~/unpack; then, as that
# user in a login shell, it runs the README's commands from the top, in order:
#
#   1. "Start here": the build and the first command; then the suite the README names
#      (scripts/test.sh --test recovery), which runs itself through sudo;
#   2. "Install it as a Debian package": dpkg-buildpackage, and apt-get/apt through sudo,
#      then `man unpack`;
#   3. "From Rust": a project of its own beside the checkout with the README's snippet as its
#      main, run on a fixture.
#
# Every command must exit 0, and each block of output the README shows after a command must be
# what the command printed, with paths, times, devices, the filesystem and mount options
# masked (the README's lines, in order, among the command's; the unpack reports exactly). At
# the end nothing in the user's home may be root's, the clone must be clean (`git status`: the
# builds' outputs are ignored), and the user's own `cargo build` must find everything built.
#
#   sudo scripts/first-hour.sh [--keep]
#
# It costs three builds (the user's debug build, the Debian package's release build and the
# example's), plus the test packages' installation on a machine that lacks them: 34 minutes on
# 2 cores shared at load 7 to 12 (16.5 min of CPU), the debug build 13 of them, the recovery
# suite 10, dpkg-buildpackage 9, the example 1.5. Neither scripts/test.sh nor CI runs it. However it ends, it
# removes what it made: the account and its home, what the account left in /tmp, its sudoers
# line, and the packages unpack and unpack-lab unless they were installed before (with --keep
# the account stays, for a look, until the next run removes it). The outputs of its steps stay
# in /tmp/unpack-first-hour.* when a step fails, and are removed when all pass.
set -euo pipefail
export LC_ALL=C.UTF-8
repo=$(cd "$(dirname "$0")/.." && pwd)
user=unpack-newcomer
keep=${1:-}
fail() { echo "first-hour: $*${out:+ (the outputs of the steps: $out)}" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run it as root: it makes a user account (sudo scripts/first-hour.sh)"
command -v cargo >/dev/null || fail "root has no cargo: its Rust toolchain is what the user gets a copy of"

rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
[ -d "$rustup_home/toolchains/$toolchain" ] || fail "no toolchain $toolchain in $rustup_home"

# The account, made afresh: only one this script made (its comment says so) is removed, with
# its processes, its home and what it left in /tmp (the README's `mktemp -d` roots).
remove_account() {
    pkill -KILL -u "$user" 2>/dev/null || true
    find /tmp -xdev -mindepth 1 -maxdepth 1 -user "$user" -exec rm -rf {} + 2>/dev/null || true
    userdel -r "$user" 2>/dev/null || true
}
if id "$user" >/dev/null 2>&1; then
    [ "$(getent passwd "$user" | cut -d: -f5)" = "unpack first-hour check" ] ||
        fail "a user $user exists that this script did not make: not touching it"
    remove_account
fi
command -v sudo >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null; }
useradd --create-home --shell /bin/bash --comment "unpack first-hour check" "$user"
home=$(getent passwd "$user" | cut -d: -f6)
echo "$user ALL=(ALL) NOPASSWD: ALL" > "/etc/sudoers.d/$user"
chmod 0440 "/etc/sudoers.d/$user"
installed_before=()
for pkg in unpack unpack-lab debhelper; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && installed_before+=("$pkg")
done
cleanup() {
    rm -f "/etc/sudoers.d/$user"
    local purge=()
    for pkg in unpack-lab unpack; do
        [[ " ${installed_before[*]} " == *" $pkg "* ]] || purge+=("$pkg")
    done
    [ ${#purge[@]} -eq 0 ] || dpkg --purge "${purge[@]}" >/dev/null 2>&1 || true
    if [ "$keep" != --keep ]; then
        remove_account
    fi
}
trap cleanup EXIT

# The toolchain as rustup installs it: the homes, its proxies on PATH through ~/.cargo/env,
# which rustup's installer sources from ~/.profile. The toolchain's documentation stays out.
mkdir -p "$home/.rustup/toolchains" "$home/.cargo/bin"
cp "$rustup_home/settings.toml" "$home/.rustup/"
tar -C "$rustup_home/toolchains" --exclude="$toolchain/share/doc" -c "$toolchain" |
    tar -C "$home/.rustup/toolchains" -x
cp -a "$cargo_home/bin/." "$home/.cargo/bin/"
printf '%s\n' 'export PATH="$HOME/.cargo/bin:$PATH"' > "$home/.cargo/env"
printf '%s\n' '. "$HOME/.cargo/env"' >> "$home/.profile"
git clone --quiet --no-hardlinks "$repo" "$home/unpack"
chown -R "$user:$user" "$home"
echo "first-hour: $user has $toolchain and a clone of $(git -C "$repo" rev-parse --short HEAD) in $home/unpack"

out=$(mktemp -d /tmp/unpack-first-hour.XXXXXX)
chmod 0755 "$out"
# Runs one README line as the user, in a login shell, in DIR; its stdout in $out/N.out, both
# streams in $out/N.log.
step=0
as_user() {
    local dir=$1 line=$2 start=$SECONDS
    step=$((step + 1))
    echo "first-hour: [$step] ~${dir#"$home"}\$ $line"
    if ! su - "$user" -c "cd '$dir' && { $line; }" > "$out/$step.out" 2> "$out/$step.err"; then
        tail -n 40 "$out/$step.out" "$out/$step.err" >&2
        fail "[$step] $line: exit status not 0"
    fi
    cat "$out/$step.out" "$out/$step.err" > "$out/$step.log"
    echo "first-hour: [$step] done in $((SECONDS - start)) s"
}

# The README's blocks: `sh` under HEADING (its commands, comments dropped), the `text` block
# that follows a command block (what it prints), the `rust` block.
readme=$home/unpack/README.md
block() { python3 "$repo/scripts/readme-blocks.py" "$readme" "$@"; }
# What each output must show: the README's lines, masked, in order among the output's, or
# (exact) the output's lines themselves.
expect() { python3 "$repo/scripts/readme-blocks.py" "$readme" --compare "$@"; }

# 1. Start here: the build and the first command, then one suite of the tests through sudo.
mapfile -t start < <(block --commands "Start here" 1)
[ ${#start[@]} -eq 2 ] || fail "Start here's first block is not the build and the first command: ${start[*]}"
as_user "$home/unpack" "${start[0]}"
as_user "$home/unpack" "${start[1]}"
expect --exact "$out/$step.out" "Start here" 1
mapfile -t tests < <(block --commands "Start here" 2)
[ "${tests[*]}" = "scripts/test.sh --test recovery" ] || fail "Start here's second block is not the recovery suite: ${tests[*]}"
as_user "$home/unpack" "${tests[0]}"
expect "$out/$step.log" "Start here" 2
# Root ran the tests in the user's target directory: what the user had built was not built
# again (liblzma-sys is the slowest of the dependencies they share).
! grep -q 'Compiling liblzma-sys' "$out/$step.log" || fail "the tests through sudo built liblzma-sys again"

# 2. The Debian package: apt-get and apt through sudo, as the README says.
mapfile -t debian < <(block --commands "Install it as a Debian package" 1)
for line in "${debian[@]}"; do
    case $line in apt*) line="sudo DEBIAN_FRONTEND=noninteractive $line -y -q" ;; esac
    case $line in man*) line="MANPAGER=cat $line" ;; esac
    as_user "$home/unpack" "$line"
done
for deb in $(block --commented "Install it as a Debian package" 1 | grep -o '\.\./[^ ]*\.deb'); do
    [ -f "$home/unpack/$deb" ] || fail "the README says dpkg-buildpackage writes $deb: it is not there"
done
grep -q '^NAME' "$out/$step.out" || fail "man unpack printed no page"
[ "$(command -v unpack)" = /usr/bin/unpack ] || fail "the package did not install /usr/bin/unpack"

# 3. From Rust: a project of its own beside the checkout, the snippet as its main (pasted
# before it runs), the block's `cd` taken as the directory of the lines after it.
mapfile -t rust < <(block --commands "From Rust" 1)
block --rust "From Rust" > "$out/main.rs"
chmod 0644 "$out/main.rs"
dir=$home
for line in "${rust[@]}"; do
    case $line in
        "cd "*) dir=$dir/${line#cd }; continue ;;
        "cargo run"*) su - "$user" -c "cp '$out/main.rs' '$dir/src/main.rs'" ;;
    esac
    as_user "$dir" "$line"
done
expect --exact "$out/$step.out" "From Rust" 1

# What the hour left: nothing of root's in the home, a clean clone, a build with nothing to do.
root_owned=$(find "$home" -xdev -user 0 | head -n 5)
[ -z "$root_owned" ] || fail "root-owned files in $home: $root_owned"
dirty=$(su - "$user" -c "cd unpack && git status --porcelain")
[ -z "$dirty" ] || fail "the clone is not clean after the README's builds: $dirty"
as_user "$home/unpack" "cargo build --locked"
! grep -q Compiling "$out/$step.log" || fail "the user's cargo build built again: $(grep Compiling "$out/$step.log" | head -n 3)"
rm -rf "$out"
echo "first-hour: the README from the top, as $user: every command exited 0 and printed what the README shows ($((SECONDS / 60)) min)"
