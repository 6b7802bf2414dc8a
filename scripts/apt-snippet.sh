#!/usr/bin/env bash
# The apt snippet the installer package ships disabled (apt/50unpack-dpkg), in a Debian minbase
# bootstrapped by the package's own unpack: enabled by its link, apt runs every unpack through
# unpack-dpkg; `apt-get remove unpack` through it succeeds although the run removes the front
# end halfway; the link goes with the package; and the next `apt-get install` works with the
# real dpkg, warning of nothing.
#
#   scripts/apt-snippet.sh      as root, after scripts/self-unpack.sh (scripts/test.sh runs both)
#
# Needs the network once for the minbase (fixtures/fetch-minbase.sh, about 32 MB). Leaves
# nothing behind: the root is a directory under /tmp, never mounted into.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
deb=$repo/target/debian/unpack_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || { echo "apt-snippet.sh: no $deb: run scripts/self-unpack.sh first" >&2; exit 2; }
fail() { echo "apt-snippet.sh: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/unpack-apt-snippet.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
"$repo/fixtures/fetch-minbase.sh" "$tmp/minbase" >/dev/null
dpkg-deb -x "$deb" "$tmp/pkg"
mkdir "$root"
"$tmp/pkg/usr/bin/unpack" -q --bootstrap -s none "$tmp"/minbase/*.deb "$root"
chroot "$root" dpkg --configure -a >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "dpkg --configure -a of the minbase failed"; }

# Two packages in a local repository, one installed through the front end, one after it is gone.
mkdir -p "$root/srv/repo"
for name in snippet-a snippet-b; do
    mkdir -p "$tmp/$name/DEBIAN" "$tmp/$name/usr/share/$name"
    echo "$name" >"$tmp/$name/usr/share/$name/file"
    printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: unpack <unpack@example.org>\nDescription: apt-snippet.sh test package\n' \
        "$name" >"$tmp/$name/DEBIAN/control"
    dpkg-deb --root-owner-group --build "$tmp/$name" "$root/srv/repo/${name}_1.0_all.deb" >/dev/null
done
(cd "$root/srv/repo" && dpkg-scanpackages . >Packages 2>/dev/null)
echo 'deb [trusted=yes] file:/srv/repo ./' >"$root/etc/apt/sources.list"
rm -f "$root"/etc/apt/sources.list.d/*

# apt-get ARGS in the root: it must succeed and print no warning or error.
apt() {
    local out=$tmp/apt.log
    if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Use-Pty=0 "$@" >"$out" 2>&1; then
        cat "$out" >&2
        fail "apt-get $* failed"
    fi
    if grep -E '^(W|E):' "$out" >&2; then fail "apt-get $* warned"; fi
}
engine_calls() { grep -c ' unpack-dpkg strategy ' "$root/var/log/dpkg.log" || true; }

cp "$deb" "$root/tmp/unpack.deb"
chroot "$root" dpkg -i /tmp/unpack.deb >/dev/null
rm "$root/tmp/unpack.deb"
[ -f "$root/usr/share/unpack/apt.conf.d/50unpack-dpkg" ] || fail "the package has no apt snippet"
[ -e "$root/etc/apt/apt.conf.d/50unpack-dpkg" ] && fail "the snippet is enabled on install"
apt update

ln -s /usr/share/unpack/apt.conf.d/50unpack-dpkg "$root/etc/apt/apt.conf.d/50unpack-dpkg"
before=$(engine_calls)
apt install snippet-a
[ "$(engine_calls)" -gt "$before" ] || fail "apt-get install with the snippet enabled did not run the engine"
[ -f "$root/usr/share/snippet-a/file" ] || fail "snippet-a was not unpacked"

apt remove unpack
[ ! -e "$root/usr/bin/unpack-dpkg" ] || fail "unpack-dpkg is still there after apt-get remove unpack"
[ ! -L "$root/etc/apt/apt.conf.d/50unpack-dpkg" ] || fail "the snippet's link is left after the removal"

before=$(engine_calls)
apt install snippet-b
[ "$(engine_calls)" -eq "$before" ] || fail "an engine call after the front end was removed"
[ -f "$root/usr/share/snippet-b/file" ] || fail "snippet-b was not installed"
chroot "$root" dpkg --audit >"$tmp/audit" 2>&1 && [ ! -s "$tmp/audit" ] || { cat "$tmp/audit" >&2; fail "dpkg --audit is not silent"; }
echo "apt-snippet.sh: the snippet ran apt's unpacks through the engine; apt-get remove unpack and the next apt-get install worked with the real dpkg"
