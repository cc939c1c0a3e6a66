# One pinned toolchain for perfguard: the same statistics on a laptop, on the CI runner and on a
# developer's Debian 12 machine. The base is Debian 12 pinned by digest; scripts/setup.sh then
# installs the exact package versions of scripts/toolchain.lock (and refuses others), and
# perfguard with its pinned Python dependencies (TVM, its FFI).
#
#   docker build -t perfguard .
#   docker run --rm -v "$PWD":/work -w /work perfguard perfguard check
#
# The image is linux/amd64 only: the lock holds amd64 packages (on an arm64 laptop Docker runs it
# emulated, which changes speed, not statistics).
#
# Debian's mirror keeps only the newest version of each package, so the packages come from
# snapshot.debian.org at the timestamp of scripts/debian-snapshot, which still serves the locked
# versions (the same snapshot the CI containers use). Another snapshot, or the configured mirror:
#   docker build --build-arg DEBIAN_SNAPSHOT=20270101T000000Z -t perfguard .
#   docker build --build-arg DEBIAN_SNAPSHOT=none -t perfguard .
FROM debian:12@sha256:8a8cd02c5912770b4980228a54d4aff9e4f986f1eb2525d2d371dec5232cefcc

ARG DEBIAN_SNAPSHOT=""
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/perfguard-venv/bin:$PATH

COPY . /opt/perfguard
# setup.sh refuses a package version that differs from the lock: the image cannot be built
# with another toolchain by accident; doctor then says whether it matches the committed baselines'.
RUN stamp="${DEBIAN_SNAPSHOT:-$(grep -v '^#' /opt/perfguard/scripts/debian-snapshot | head -n 1)}" \
 && if [ "$stamp" != none ]; then \
      sed -i -E "s#^URIs: http://deb\.debian\.org/(debian(-security)?)\$#URIs: http://snapshot.debian.org/archive/\1/$stamp#" /etc/apt/sources.list.d/debian.sources; \
      echo 'Acquire::Check-Valid-Until "false";' > /etc/apt/apt.conf.d/80debian-snapshot; \
    fi \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates \
 && python3 -m venv /opt/perfguard-venv \
 && PERFGUARD_DEBIAN_SNAPSHOT=0 bash /opt/perfguard/scripts/setup.sh \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory '*' \
 && cd /opt/perfguard && perfguard doctor

WORKDIR /work
CMD ["perfguard", "check"]
