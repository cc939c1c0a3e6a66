#!/usr/bin/env bash
# Installs what perfguard needs on Debian 12 (amd64): the exact package versions of
# scripts/toolchain.lock (cross compilers, QEMU user mode with TCG plugin support, valgrind,
# LLVM's tools, git), then the Python package. Safe to run again.
#
# It refuses (one line, exit 3) another distribution, another architecture, or an installed
# package whose version differs from the lock: statistics made with another toolchain do not
# match the committed baselines. To proceed anyway (installing whatever versions the system
# offers, keeping those already installed), set PERFGUARD_UNVALIDATED_TOOLCHAIN=1 or pass
# --unvalidated; `perfguard check` then says which tools differ from the baselines'. On another
# architecture (the native recalibration runners) the host's own compilers stand in for the
# cross compilers to that architecture, and packages the architecture does not have are named
# and skipped.
#
# Debian's mirror keeps only the newest version of each package. When the configured mirror no
# longer has a locked version, setup.sh installs from the snapshot.debian.org archive at the
# timestamp in scripts/debian-snapshot instead (through a private apt configuration: the
# system's sources stay as they are); --snapshot does so from the start,
# PERFGUARD_DEBIAN_SNAPSHOT=0 never. --gem5 also installs what scripts/build-gem5.sh needs
# to build gem5, which includes the libraries a gem5 build needs to run (from the same source).
set -euo pipefail
cd "$(dirname "$0")/.."

unvalidated="${PERFGUARD_UNVALIDATED_TOOLCHAIN:-0}"
snapshot="${PERFGUARD_DEBIAN_SNAPSHOT:-auto}"
gem5_deps=0
for arg in "$@"; do
  case "$arg" in
    --unvalidated) unvalidated=1 ;;
    --snapshot) snapshot=1 ;;
    --gem5) gem5_deps=1 ;;
    *) echo "setup.sh: unknown option '$arg' (options: --unvalidated, --snapshot, --gem5)" >&2; exit 2 ;;
  esac
done
case "$snapshot" in
  auto|0|1) ;;
  *) echo "setup.sh: PERFGUARD_DEBIAN_SNAPSHOT='$snapshot': use 1 (always), 0 (never) or leave it unset (when needed)" >&2; exit 2 ;;
esac

refuse() {
  if [ "$unvalidated" = 1 ]; then
    echo "setup.sh: warning: $1 (proceeding: PERFGUARD_UNVALIDATED_TOOLCHAIN=1)" >&2
    return 0
  fi
  echo "setup.sh: $1, not the validated toolchain (scripts/toolchain.lock): use the perfguard image (docs/toolchain.md, 'One pinned toolchain') or set PERFGUARD_UNVALIDATED_TOOLCHAIN=1 to proceed anyway" >&2
  exit 3
}

distro="unknown" codename="bookworm"
if [ -r /etc/os-release ]; then
  distro=$(. /etc/os-release && echo "${ID:-unknown} ${VERSION_ID:-}")
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
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
# report), and curl and jq (tests/shells run the comment workflow's step, which GitHub's runners
# have them for); their versions do not touch any statistic, so they are not pinned.
case ",${PERFGUARD_EXTRAS:-}," in
  *,test,*)
    for pkg in chromium curl jq; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || wanted+=("$pkg")
    done ;;
esac
if [ "$gem5_deps" = 1 ]; then
  wanted+=(build-essential scons m4 python3-dev zlib1g-dev libpng-dev)
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
apt_opts=()
apt_get() { "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq "${apt_opts[@]}" "$@"; }
apt_cache() { apt-cache "${apt_opts[@]}" "$@"; }

# The snapshot as a private apt configuration: its own sources and package lists, so the
# system's sources and lists are left as they were.
use_snapshot() {
  local stamp
  stamp=$(grep -v '^#' scripts/debian-snapshot | head -n 1)
  if ! [[ "$stamp" =~ ^[0-9]{8}T[0-9]{6}Z$ ]]; then
    echo "setup.sh: scripts/debian-snapshot: '$stamp' is not a snapshot.debian.org timestamp (YYYYMMDDTHHMMSSZ)" >&2
    exit 2
  fi
  snapshot_dir=$(mktemp -d)
  trap 'rm -rf "$snapshot_dir"' EXIT
  local dir="$snapshot_dir"
  chmod 755 "$dir"
  mkdir -p "$dir/sources.list.d" "$dir/lists/partial"
  cat > "$dir/sources.list.d/debian-snapshot.sources" <<SOURCES
Types: deb
URIs: http://snapshot.debian.org/archive/debian/$stamp
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://snapshot.debian.org/archive/debian-security/$stamp
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/sources.list.d"
            -o "Dir::State::Lists=$dir/lists" -o Acquire::Check-Valid-Until=false -o APT::Update::Error-Mode=any)
  echo "setup.sh: installing from snapshot.debian.org at $stamp (scripts/debian-snapshot)" >&2
  if ! apt_get update; then
    echo "setup.sh: cannot read the Debian snapshot at $stamp (snapshot.debian.org unreachable?)" >&2
    exit 3
  fi
}

if [ ${#wanted[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup.sh: warning: no apt-get here: install the equivalents of ${wanted[*]} yourself" >&2
  else
    if [ "$snapshot" = 1 ] && [ "$distro" = "debian 12" ]; then
      use_snapshot
    else
      apt_get update
      # A locked version the configured mirror no longer has: the snapshot still has it.
      if [ "$snapshot" = auto ] && [ "$unvalidated" != 1 ] && ! apt_get install --simulate "${wanted[@]}" >/dev/null 2>&1; then
        use_snapshot
      fi
    fi
    if [ "$arch" != amd64 ]; then
      # The lock is amd64's. Here the host compiler (gcc, in the lock) builds for this
      # architecture itself, and the cross packages this architecture lacks are skipped.
      available=() missing=()
      for pkg in "${wanted[@]}"; do
        if apt_cache show "${pkg%%=*}" >/dev/null 2>&1; then available+=("$pkg"); else missing+=("${pkg%%=*}"); fi
      done
      [ ${#missing[@]} -eq 0 ] || echo "setup.sh: warning: $arch has no ${missing[*]}: skipped" >&2
      wanted=("${available[@]}")
    fi
    if [ ${#wanted[@]} -gt 0 ] && ! apt_get install -y --no-install-recommends "${wanted[@]}"; then
      echo "setup.sh: apt-get could not install ${wanted[*]} (docs/toolchain.md, 'One pinned toolchain')" >&2
      exit 3
    fi
  fi
fi

extras="${PERFGUARD_EXTRAS:-}"
python3 -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
