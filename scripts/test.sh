#!/usr/bin/env bash
# Sets up (Debian packages, perfguard with its test and docs extras) and runs the test suite (which
# also builds the documentation site with `mkdocs build --strict`).
set -euo pipefail
cd "$(dirname "$0")/.."
PERFGUARD_EXTRAS=test,docs bash scripts/setup.sh
export PERFGUARD_CACHE_DIR="${PERFGUARD_CACHE_DIR:-$(mktemp -d)}"
# Real gem5 builds (../shared beside the clone in CI): the gem5 tests run on them, else skip.
for isa in X86 RISCV ARM; do
    gem5="../shared/gem5/$isa/gem5.fast"
    var="PERFGUARD_GEM5_$isa"
    if [ -z "${!var:-}" ] && [ -x "$gem5" ]; then
        export "$var=$(realpath "$gem5")"
    fi
done
python3 -m pytest -n 2 -q "$@"
