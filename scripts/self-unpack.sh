#!/usr/bin/env bash
# The project's own Debian packages, built and checked as a packager would. Builds unpack's two
# binary packages (unpack, the installer; unpack-lab, the lab) with `dpkg-buildpackage -b -us
# -uc`, then checks:
#   - the build leaves nothing in the tree that .gitignore does not ignore (a tree a build made
#     dirty is one `cargo publish` refuses);
#   - the hardening flags reached the C that the compression crates bundle (the CFLAGS cc logged
#     in the crates' build script output carry -D_FORTIFY_SOURCE=2 and the stack protector);
#   - lintian -I -E --pedantic says nothing (debian/*.lintian-overrides say why for each tag
#     overridden);
#   - the packaged `unpack` unpacks both packages into fresh roots exactly as `dpkg-deb -x` does
#     (contents, modes, owners, times, links; `packaged_unpack_unpacks_its_own_packages_as_
#     dpkg_deb_does` in lab/tests/ship.rs).
# Run as root on Debian with debhelper and lintian installed (scripts/test.sh installs them);
# prints where the packages are, for scripts/autopkgtest.sh.
#
# The packages are built in a copy of the tree under target/debian/, because dpkg-buildpackage
# writes its products into the parent directory of the tree it builds: they stay in
# target/debian/ instead of landing beside the checkout. The copy keeps the files' times and
# its cargo target directory stays, so a second run only rebuilds what changed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/target/debian
fail() { echo "self-unpack: $*" >&2; exit 1; }
rm -rf "$work/unpack" "$work"/unpack_* "$work"/unpack-*_*
mkdir -p "$work/unpack"
# The files git would commit (tracked or not ignored), as they are in the working tree.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -c) | tar -C "$work/unpack" -x
(cd "$work/unpack" && find . -type f | sort) > "$work/before.list"

if ! (cd "$work/unpack" && CARGO_TARGET_DIR="$work/cargo" dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log" >&2
    fail "dpkg-buildpackage failed; the whole log is $work/build.log"
fi
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb=$work/unpack_${version}_$arch.deb
lab=$work/unpack-lab_${version}_$arch.deb
echo "self-unpack: built $deb and $lab"

# What the build left in the tree must be ignored, as it is in a checkout the README's
# dpkg-buildpackage runs in.
(cd "$work/unpack" && find . -type f | sort) > "$work/after.list"
comm -13 "$work/before.list" "$work/after.list" | sed 's|^\./||' > "$work/left.list"
git -C "$repo" check-ignore --no-index --stdin < "$work/left.list" > "$work/ignored.list" || true
if ! cmp -s "$work/left.list" "$work/ignored.list"; then
    fail "the build leaves files .gitignore does not ignore: $(comm -23 "$work/left.list" "$work/ignored.list" | tr '\n' ' ')"
fi

# cc logs in the build script's output the CFLAGS it compiles with (`CFLAGS = Some(...)`).
for crate in liblzma-sys zstd-sys; do
    outputs=("$work"/cargo/release/build/"$crate"-*/output)
    [ -e "${outputs[0]}" ] || fail "no build script output of $crate in $work/cargo"
    for flag in -D_FORTIFY_SOURCE=2 -fstack-protector-strong -Werror=format-security; do
        grep -q -e "^CFLAGS = Some(.* $flag\b" "${outputs[@]}" || fail "$crate's C was compiled without $flag"
    done
done
echo "self-unpack: the bundled C (liblzma-sys, zstd-sys) was compiled with dpkg-buildflags' hardening"

# Every tag shown fails, whatever its level; overridden tags are not shown. As root lintian also
# says that root is not recommended, which is no tag.
changes=$work/unpack_${version}_$arch.changes
lintian -I -E --pedantic --fail-on error,warning,info,pedantic,experimental "$changes" \
    > "$work/lintian.log" 2> "$work/lintian.err" ||
    { cat "$work/lintian.log" "$work/lintian.err" >&2; fail "lintian failed"; }
grep -v '^running with root privileges is not recommended!$' "$work/lintian.err" >> "$work/lintian.log" || true
[ ! -s "$work/lintian.log" ] || { cat "$work/lintian.log" >&2; fail "lintian -I -E --pedantic has tags"; }
echo "self-unpack: lintian -I -E --pedantic: no tag"

cd "$repo"
UNPACK_DEB=$deb UNPACK_LAB_DEB=$lab cargo test --locked --test ship -- --ignored --exact \
    packaged_unpack_unpacks_its_own_packages_as_dpkg_deb_does
