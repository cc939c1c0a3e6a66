#!/usr/bin/env bash
# Installs what perfguard needs on Debian 12 (amd64): the exact package versions of
# scripts/toolchain.lock (cross compilers, QEMU user mode with TCG plugin support, valgrind,
# LLVM's tools, git), then the Python package. Safe to run again.
#
# It refuses (one line, exit 3) another distribution, another architecture, or an installed
# package whose version differs from the lock: statistics made with another toolchain do not
# match the committed baselines. To proceed anyway (installing whatever versions the system
# offers, keeping those already installed), set PERFGUARD_UNVALIDATED_TOOLCHAIN=1 or pass
# --unvalidated; `perfguard check` then says which tools differ from the baselines'.
set -euo pipefail
cd "$(dirname "$0")/.."

unvalidated="${PERFGUARD_UNVALIDATED_TOOLCHAIN:-0}"
for arg in "$@"; do
  case "$arg" in
    --unvalidated) unvalidated=1 ;;
    *) echo "setup.sh: unknown option '$arg' (the only option is --unvalidated)" >&2; exit 2 ;;
  esac
done

refuse() {
  if [ "$unvalidated" = 1 ]; then
    echo "setup.sh: warning: $1 (proceeding: PERFGUARD_UNVALIDATED_TOOLCHAIN=1)" >&2
    return 0
  fi
  echo "setup.sh: $1, not the validated toolchain (scripts/toolchain.lock): use the perfguard image (docs/toolchain.md, 'One pinned toolchain') or set PERFGUARD_UNVALIDATED_TOOLCHAIN=1 to proceed anyway" >&2
  exit 3
}

distro="unknown"
if [ -r /etc/os-release ]; then
  distro=$(. /etc/os-release && echo "${ID:-unknown} ${VERSION_ID:-}")
fi
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
[ "$distro" = "debian 12" ] || refuse "this is '$distro', not Debian 12"
[ "$arch" = "amd64" ] || refuse "this is $arch, not amd64"

wanted=()
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  pkg=${line%%=*} version=${line#*=}
  have=$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)
  case "$have" in
    "install ok installed $version") ;;
    "install ok installed "*) refuse "$pkg ${have#install ok installed } is installed, validated with $version" ;;
    *) if [ "$unvalidated" = 1 ]; then wanted+=("$pkg"); else wanted+=("$pkg=$version"); fi ;;
  esac
done < scripts/toolchain.lock
# The test extras also need a headless browser (tests/report/test_report_browser.py opens the HTML
# report); its version does not touch any statistic, so it is not pinned.
case ",${PERFGUARD_EXTRAS:-}," in
  *,test,*) dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed" || wanted+=(chromium) ;;
esac

if [ ${#wanted[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup.sh: warning: no apt-get here: install the equivalents of ${wanted[*]} yourself" >&2
  else
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    if ! DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${wanted[@]}"; then
      echo "setup.sh: apt-get could not install ${wanted[*]} (has the Debian mirror moved past a pinned version? docs/toolchain.md, 'One pinned toolchain')" >&2
      exit 3
    fi
  fi
fi

extras="${PERFGUARD_EXTRAS:-}"
python3 -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
