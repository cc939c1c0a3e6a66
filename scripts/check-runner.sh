#!/usr/bin/env bash
# Checks, before anything is installed, that this machine can run a native recalibration leg
# (.github/workflows/recalibrate.yml) for TARGET (x86_64, aarch64 or riscv64):
#
#   bash scripts/check-runner.sh TARGET
#
# Native timing must run on TARGET hardware, so the machine's architecture must be TARGET's.
# Then: Python 3.11 or newer with venv, a git checkout git can read, and either a way to
# install packages (apt-get as root or through passwordless sudo) or the tools already there
# (the native compiler TARGET-linux-gnu-gcc and qemu-TARGET). Each missing piece is one line on
# stderr (a GitHub error annotation under Actions); exit 3 if any is missing, 2 on bad usage.
set -euo pipefail

[ $# -eq 1 ] || { echo "check-runner.sh: usage: check-runner.sh TARGET (x86_64, aarch64 or riscv64)" >&2; exit 2; }
target="$1"
case "$target" in
  x86_64|aarch64|riscv64) ;;
  *) echo "check-runner.sh: unknown target '$target' (x86_64, aarch64 or riscv64)" >&2; exit 2 ;;
esac

missing=0
need() {
  missing=1
  if [ "${GITHUB_ACTIONS:-}" = true ]; then echo "::error title=runner for $target::$1"; fi
  echo "check-runner.sh: $1" >&2
}

machine=$(uname -m)
[ "$machine" = "$target" ] || need "this machine is $machine: native timing for $target needs $target hardware"

if ! command -v python3 >/dev/null; then
  need "no python3 (3.11 or newer, with venv)"
elif ! python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  need "python3 is $(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null || echo unknown): perfguard needs 3.11 or newer, with venv"
fi

if ! command -v git >/dev/null; then
  need "no git (actions/checkout then downloads a tarball without history)"
elif ! git rev-parse --git-dir >/dev/null 2>&1; then
  need "git cannot read the checkout at $PWD: $(git rev-parse --git-dir 2>&1 | head -n 1)"
fi

can_install=0
if command -v apt-get >/dev/null; then
  if [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; then can_install=1; fi
fi
if [ "$can_install" = 0 ]; then
  for tool in "$target-linux-gnu-gcc" "qemu-$target"; do
    command -v "$tool" >/dev/null || need "no $tool, and no apt-get as root or through passwordless sudo to install it"
  done
fi

[ "$missing" = 0 ] || exit 3
echo "check-runner.sh: this machine can run the $target leg ($machine, $(python3 --version 2>&1), $(git --version))"
