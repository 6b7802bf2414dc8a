#!/usr/bin/env bash
# The engine crate as crates.io would get it. `cargo publish --dry-run` packages the crate
# (Cargo.toml's `include` list), builds the packaged copy on its own as `cargo install` from the
# registry would, and stops before the upload; it must say no warning. Then the packaged crate's
# own tests (unit and doc tests: the integration tests are the lab's, not published) run from
# the .crate unpacked outside the checkout, where neither the workspace nor .cargo/config.toml
# reaches, as a user of the published crate would run them.
#
#   scripts/publish-check.sh        (scripts/test.sh runs it; no root needed)
#
# A tree with uncommitted changes is packaged as it is (--allow-dirty, said on stderr); a clean
# one, as CI's, is packaged as cargo publish would (which refuses a dirty tree).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
crate=unpack-engine

allow=()
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    echo "publish-check: the tree has uncommitted changes: packaging it as it is (--allow-dirty)" >&2
    allow=(--allow-dirty)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cargo publish --dry-run --locked -p "$crate" "${allow[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "publish-check: cargo publish --dry-run failed" >&2
    exit 1
fi
# Cargo's own last line is a warning by design.
if grep -v '^warning: aborting upload due to dry run$' "$log" | grep -q '^warning'; then
    cat "$log" >&2
    echo "publish-check: cargo publish --dry-run warns" >&2
    exit 1
fi
grep -E '^ *(Packaged|Verifying|Uploading)' "$log"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
unpacked=$repo/target/publish-check
rm -rf "$unpacked/$crate-$version"
mkdir -p "$unpacked"
# What the dry run uploaded would have been (cargo keeps it under tmp-crate/).
tar -xzf "$repo/target/package/tmp-crate/$crate-$version.crate" -C "$unpacked"
# Outside the checkout: cargo finds neither this workspace nor its .cargo/config.toml from
# there. The copy's target directory stays between runs, so only the first builds everything;
# the copy is made at the same place each time (named after the checkout), because the test
# binaries hold their crate's directory (env!("CARGO_MANIFEST_DIR"), where the unit tests find
# the fixtures) and cargo does not build them again when only that directory changes: from a
# new random directory each run, the kept binaries looked for the fixtures in the last run's,
# since removed. A target directory built from another place is removed first.
work=${TMPDIR:-/tmp}/unpack-publish-check-$(printf '%s' "$repo" | md5sum | cut -c1-12)
[ "$(cat "$unpacked/built-in" 2>/dev/null)" = "$work" ] || rm -rf "$unpacked/target"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -f "$log"; rm -rf "$work"' EXIT
cp -a "$unpacked/$crate-$version" "$work/"
printf '%s\n' "$work" > "$unpacked/built-in"
if ! (cd "$work/$crate-$version" && CARGO_TARGET_DIR=$unpacked/target cargo test --locked) >"$log" 2>&1; then
    cat "$log" >&2
    echo "publish-check: the packaged crate's tests fail" >&2
    exit 1
fi
grep -E '^test result' "$log"
echo "publish-check: $crate $version packages without a warning, and its packaged tests pass"
