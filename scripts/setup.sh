#!/usr/bin/env bash
# Installs what perfguard needs on Debian 12: cross compilers, QEMU user mode (with TCG
# plugin support), valgrind, LLVM 19 (llvm-mca / llvm-mc for the pipeline timing model), and
# the Python package. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(qemu-user gcc gcc-x86-64-linux-gnu libc6-dev
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross
      gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
      valgrind llvm-19 git)
# The test extras also need a headless browser: tests/test_report_browser.py opens the HTML report.
case ",${PERFGUARD_EXTRAS:-}," in *,test,*) debs+=(chromium) ;; esac
missing=()
for pkg in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

extras="${PERFGUARD_EXTRAS:-}"
python3 -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
