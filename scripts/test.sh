#!/usr/bin/env bash
# Sets up (Debian packages, perfguard with its test extras) and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PERFGUARD_EXTRAS=test bash scripts/setup.sh
export PERFGUARD_CACHE_DIR="${PERFGUARD_CACHE_DIR:-$(mktemp -d)}"
python3 -m pytest -n 2 -q "$@"
