#!/usr/bin/env bash
# The project eats its own food: build unpack's Debian package with
# `dpkg-buildpackage -b -us -uc`, then check that the packaged `unpack` unpacks that package into
# a fresh root exactly as `dpkg-deb -x` does (contents, modes, owners, times, links; the test is
# `packaged_unpack_unpacks_its_own_package_as_dpkg_deb_does` in lab/tests/ship.rs). Run as root on
# Debian with debhelper installed; prints where the package is.
#
# The package is built in a copy of the tree under target/debian/, because dpkg-buildpackage
# writes its products into the parent directory of the tree it builds: they stay in
# target/debian/ instead of landing beside the checkout. The copy keeps the files' times and
# its cargo target directory stays, so a second run only rebuilds what changed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/target/debian
rm -rf "$work/unpack" "$work"/unpack_* "$work"/unpack-dbgsym_*
mkdir -p "$work/unpack"
# The files git would commit (tracked or not ignored), as they are in the working tree.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -c) | tar -C "$work/unpack" -x

if ! (cd "$work/unpack" && CARGO_TARGET_DIR="$work/cargo" dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log" >&2
    echo "self-unpack: dpkg-buildpackage failed; the whole log is $work/build.log" >&2
    exit 1
fi
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
deb=$work/unpack_${version}_$(dpkg --print-architecture).deb
echo "self-unpack: built $deb"

cd "$repo"
UNPACK_DEB=$deb cargo test --locked --test ship -- --ignored --exact packaged_unpack_unpacks_its_own_package_as_dpkg_deb_does
