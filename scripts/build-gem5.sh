#!/usr/bin/env bash
# Builds gem5 (the pinned release) for one ISA, for perfguard's gem5 back end:
#
#   bash scripts/build-gem5.sh ISA [SRC] [OUT]
#
# ISA: X86, RISCV or ARM. SRC: a gem5 source folder of the pinned release; without it (or with
# ""), the release tag is cloned from GitHub. OUT (default ./gem5-build): the binary lands in
# OUT/ISA/gem5.fast, with OUT/ISA/VERSION. Point perfguard at it with
# PERFGUARD_GEM5_<ISA>=OUT/ISA/gem5.fast.
#
# Cost: about an hour per ISA on 2 cores (81 min for X86, 90 min for RISCV with g++ 12), a few
# GB of disk for the build tree. Needs g++, scons, m4, Python 3 headers, zlib (and libpng);
# on Debian/Ubuntu: apt-get install build-essential scons m4 python3-dev zlib1g-dev libpng-dev.
set -euo pipefail

GEM5_VERSION="v24.0.0.1"
GEM5_REPO="https://github.com/gem5/gem5.git"

die() { echo "build-gem5.sh: $1" >&2; exit "${2:-2}"; }

[ $# -ge 1 ] && [ $# -le 3 ] || die "usage: build-gem5.sh ISA [SRC] [OUT] (ISA: X86, RISCV or ARM)"
isa="$1"
src="${2:-}"
out="${3:-gem5-build}"
case "$isa" in
    X86|RISCV|ARM) ;;
    *) die "unknown ISA '$isa' (X86, RISCV or ARM)" ;;
esac
check_source() {
    [ -f "$1/SConstruct" ] && [ -f "$1/src/base/version.cc" ] || die "$1: not a gem5 source folder (no SConstruct)"
    local version
    version="$(sed -n 's/.*gem5Version *= *"\([^"]*\)".*/\1/p' "$1/src/base/version.cc")"
    [ "v$version" = "$GEM5_VERSION" ] || die "$1: gem5 ${version:-of unknown version}, this script builds $GEM5_VERSION"
}
[ -z "$src" ] || check_source "$src"
for tool in scons g++ m4 python3; do
    command -v "$tool" >/dev/null || die "'$tool' not found (apt-get install build-essential scons m4 python3-dev zlib1g-dev libpng-dev)" 3
done

work=""
cleanup() { [ -z "$work" ] || rm -rf "$work"; }
trap cleanup EXIT
if [ -z "$src" ]; then
    command -v git >/dev/null || die "'git' not found: give a gem5 $GEM5_VERSION source folder as SRC" 3
    work="$(mktemp -d)"
    src="$work/gem5"
    git clone --quiet --depth 1 --branch "$GEM5_VERSION" "$GEM5_REPO" "$src" \
        || die "cannot clone $GEM5_REPO at $GEM5_VERSION (no network?): give a source folder as SRC" 3
    check_source "$src"
fi

(cd "$src" && scons "build/$isa/gem5.fast" -j"$(nproc)" --ignore-style --without-tcmalloc) \
    || die "scons failed for build/$isa/gem5.fast" 3
mkdir -p "$out/$isa"
tmp="$out/$isa/gem5.fast.partial"
cp "$src/build/$isa/gem5.fast" "$tmp"
strip "$tmp" 2>/dev/null || true
mv "$tmp" "$out/$isa/gem5.fast"  # never a half-written binary under the final name
echo "$GEM5_VERSION" > "$out/$isa/VERSION"
echo "built $out/$isa/gem5.fast (gem5 $GEM5_VERSION, $isa)"
