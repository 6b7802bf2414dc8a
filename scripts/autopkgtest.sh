#!/usr/bin/env bash
# The autopkgtests (debian/tests/control) of the packages scripts/self-unpack.sh built, run on
# this machine itself (`autopkgtest ... -- null`): autopkgtest installs the two packages, runs
# each test from a copy of the source tree, and must exit 0. Its other codes are failures here:
# 2 (a test was skipped: a restriction this machine does not meet), 4 (a test failed), 8 (no
# test ran), 12 and up (autopkgtest itself failed).
#
#   scripts/autopkgtest.sh      as root, after scripts/self-unpack.sh (scripts/test.sh runs both)
#
# The packages stay installed only where they were before: otherwise they are purged after.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/target/debian
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
debs=("$work/unpack_${version}_$arch.deb" "$work/unpack-lab_${version}_$arch.deb")
for deb in "${debs[@]}"; do
    [ -f "$deb" ] || { echo "autopkgtest.sh: no $deb: run scripts/self-unpack.sh first" >&2; exit 2; }
done

installed=()
for pkg in unpack unpack-lab; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && installed+=("$pkg")
done
cleanup() {
    local purge=()
    for pkg in unpack-lab unpack; do
        [[ " ${installed[*]} " == *" $pkg "* ]] || purge+=("$pkg")
    done
    [ ${#purge[@]} -eq 0 ] || dpkg --purge "${purge[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT

out=$work/autopkgtest
rm -rf "$out"
status=0
# The source tree is the copy self-unpack.sh built from: the files git would commit.
autopkgtest --output-dir "$out" "${debs[@]}" "$work/unpack/" -- null > "$work/autopkgtest.log" 2>&1 || status=$?
[ ! -f "$out/summary" ] || cat "$out/summary"
case $status in
    0) echo "autopkgtest: every test passed (exit 0)" ;;
    *)
        tail -n 60 "$work/autopkgtest.log" >&2
        echo "autopkgtest: exit $status (2: a test skipped, 4: a test failed, 8: none ran); the log is $work/autopkgtest.log" >&2
        exit 1
        ;;
esac
