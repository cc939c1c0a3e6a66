"""perfguard init: set up a repository to guard its kernels (a commented perfguard.toml, one
scheduled example kernel with its numpy reference, the .gitignore lines and a GitHub workflow
that calls the action), then say the next two commands.

It never overwrites a file unless --force says so (exit 2 naming the first one that exists):
every refusal is decided before anything is written, and each file is written whole (temp file,
then rename). .gitignore only ever gets lines appended that it does not have yet.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from rich.markup import escape

from perfguard.atomic import atomic_write_text
from perfguard.errors import EXIT_OK, InputError
from perfguard.report.terminal import console

PACKAGE = "perfguard_kernels"
PLACEHOLDER_ACTION = "OWNER/perfguard@SHA"
# scripts/debian-snapshot's timestamp: the Debian archive that serves scripts/toolchain.lock's
# versions (tests/shells/test_ci_rules.py keeps every copy equal).
DEBIAN_SNAPSHOT = "20261130T000000Z"

CONFIG = """\
# perfguard: guards this repository's compute kernels against performance regressions.
# Each kernel below is built with TVM for every target, run in an instruction-accurate simulator
# and scored; `perfguard check` compares that with the baselines committed in baseline_dir.
# Every key is listed in the documentation's configuration reference.

[perfguard]
# Target ISAs: each is cross-compiled and simulated, whatever machine runs the check.
targets = ["x86_64", "aarch64", "riscv64"]
# A kernel whose predicted time grows by more than this percentage is a regression (exit 1).
threshold = 2.0
# Committed: the statistics every check compares with (`perfguard baseline update` writes them).
baseline_dir = "baselines"
# Not committed (.gitignore): perfguard.json, index.html and summary.md of the last check.
report_dir = "reports"
# Builds and simulations are cached (unchanged inputs cost a hash, not a rebuild), by default in
# ~/.cache/perfguard or $PERFGUARD_CACHE_DIR (the GitHub action caches it); to keep the cache in
# the repository instead (.gitignore has it):
# cache_dir = ".perfguard-cache"

# One [[kernel]] table per kernel to guard.
[[kernel]]
name = "matmul"
# module:function, called with `params`: returns a scheduled TVM IRModule whose function "main"
# takes the inputs, then the outputs.
entry = "{package}.matmul:matmul"
params = {{ M = 64, N = 64, K = 64, tile = 16, vector = 8 }}
# module:function(inputs, **params) -> outputs, in numpy: an output that differs is the verdict
# `wrong result` (exit 4).
reference = "{package}.matmul:reference"
# Floating-point operations per call, over params: GFLOP/s, roofline and bound class in reports.
flops = "2 * M * N * K"
# threshold = 1.0    # this kernel's own threshold, in percent
# targets = ["x86_64"]    # only some of the targets
"""

KERNEL = '''\
"""An example kernel for perfguard: C = A @ B in float32, scheduled with TVM's TensorIR.

perfguard calls matmul(**params) (the [[kernel]]'s `entry` and `params` in perfguard.toml) for a
TVM IRModule whose function "main" takes the inputs, then the outputs; builds it for every
target; runs it in a simulator; checks its output against reference(); and compares its
predicted time with the committed baseline. Add your own kernels beside it, one function each.
"""

import numpy as np


def matmul(M=64, N=64, K=64, tile=16, vector=8):
    import tvm
    import tvm.s_tir
    from tvm import te

    if M % tile or N % tile or tile % vector:
        raise ValueError(f"tile {{tile}} must divide M {{M}} and N {{N}}, and vector {{vector}} must divide tile")
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    mod = tvm.IRModule({{"main": te.create_prim_func([A, B, C])}})

    # The schedule, with TVM 0.27's TensorIR API: tvm.s_tir.Schedule, blocks found by get_sblock.
    sch = tvm.s_tir.Schedule(mod)
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, tile])  # a tile x tile block of C at a time ...
    j_outer, j_inner = sch.split(j, [None, tile])
    j_lanes_outer, j_lanes = sch.split(j_inner, [None, vector])
    sch.reorder(i_outer, j_outer, kk, i_inner, j_lanes_outer, j_lanes)  # ... while one row of B is reused
    sch.vectorize(j_lanes)  # SIMD across `vector` columns of C
    sch.decompose_reduction(block, kk)  # C = 0 once per tile, before the reduction loop
    return sch.mod


def reference(inputs, **params):
    """The same product in numpy (float64), for the output check."""
    A, B = inputs
    return [A.astype(np.float64) @ B.astype(np.float64)]
'''

WORKFLOW = """\
# perfguard on every pull request (written by `perfguard init`): builds and simulates the kernels
# of perfguard.toml and compares them with the baselines committed at the pull request's
# merge-base, so a change cannot re-baseline its own regression. Replace {action} with the
# perfguard repository and a commit SHA you trust.
name: perfguard

on:
  pull_request:
  push:
    branches: [{branch}]

permissions: {{}}

jobs:
  check:
    runs-on: ubuntu-24.04
    # The pinned toolchain the baselines are made with: Debian 12 by digest, packages from the
    # snapshot.debian.org archive that serves perfguard's toolchain lock; the action's
    # scripts/setup.sh installs the locked cross compilers, QEMU and LLVM tools into it.
    container:
      image: debian:12@sha256:8a8cd02c5912770b4980228a54d4aff9e4f986f1eb2525d2d371dec5232cefcc
    timeout-minutes: 60
    permissions:
      contents: read
    env:
      DEBIAN_SNAPSHOT: "{snapshot}"
    defaults:
      run:
        shell: bash # -eo pipefail
    steps:
      - name: Debian packages from the pinned snapshot, then what the checkout and the action need
        run: |
          sed -i -E "s#^URIs: http://deb\\.debian\\.org/(debian(-security)?)\\$#URIs: http://snapshot.debian.org/archive/\\1/$DEBIAN_SNAPSHOT#" /etc/apt/sources.list.d/debian.sources
          echo 'Acquire::Check-Valid-Until "false";' > /etc/apt/apt.conf.d/80debian-snapshot
          apt-get update -qq
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git python3 python3-venv ca-certificates
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8 # v5.0.0
        with:
          fetch-depth: 0 # the merge-base holds the baselines to compare with
          persist-credentials: false
      - name: Trust the checkout (the container runs as another user than the runner)
        run: git config --global --add safe.directory "$GITHUB_WORKSPACE"
      - uses: {action}
        with:
          python-version: system # the container's python3
"""

IGNORED = ("reports/", ".perfguard-cache/")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("init", help="set up this git repository to guard its kernels")
    p.add_argument("--dir", type=Path, default=Path("."), help="the repository's folder (default: this one)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.add_argument(
        "--action",
        default=PLACEHOLDER_ACTION,
        metavar="OWNER/REPO@SHA",
        help="the perfguard action the workflow uses (default: a placeholder to replace)",
    )
    p.set_defaults(run=run)


def _git(folder: Path, *args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def files(branch: str, action: str) -> dict[str, str]:
    """What init writes, by path relative to the repository's folder."""
    return {
        "perfguard.toml": CONFIG.format(package=PACKAGE),
        f"{PACKAGE}/__init__.py": "",
        f"{PACKAGE}/matmul.py": KERNEL.format(),
        ".github/workflows/perfguard.yml": WORKFLOW.format(branch=branch, action=action, snapshot=DEBIAN_SNAPSHOT),
    }


def run(args: argparse.Namespace) -> int:
    out = console()
    folder = args.dir.resolve()
    if not folder.is_dir():
        raise InputError(f"init --dir {args.dir}: not a folder")
    if _git(folder, "rev-parse", "--show-toplevel") is None:
        raise InputError(f"{folder}: not in a git repository (run 'git init' first: baselines are committed)")
    branch = _git(folder, "symbolic-ref", "--short", "HEAD") or "main"
    wanted = files(branch, args.action)
    if not args.force:
        for name in wanted:
            if (folder / name).exists() and not (name.endswith("__init__.py")):
                raise InputError(f"{folder / name} exists already: not overwritten (--force replaces it)")
    written = []
    for name, text in wanted.items():
        path = folder / name
        if name.endswith("__init__.py") and path.exists():
            continue  # a package that exists stays as it is
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        written.append(name)
    ignore = folder / ".gitignore"
    have = ignore.read_text().splitlines() if ignore.exists() else []
    missing = [line for line in IGNORED if line not in have]
    if missing:
        lead = "\n" if have and ignore.read_text() and not ignore.read_text().endswith("\n") else ""
        atomic_write_text(
            ignore,
            (ignore.read_text() if ignore.exists() else "")
            + lead
            + "# perfguard: the last check's reports, and the cache when cache_dir is set to it\n"
            + "".join(line + "\n" for line in missing),
        )
        written.append(".gitignore")
    out.print(escape(f"wrote {', '.join(written)}"))
    if args.action == PLACEHOLDER_ACTION:
        out.print(
            escape(
                f"edit .github/workflows/perfguard.yml: replace {PLACEHOLDER_ACTION} with the perfguard "
                f"action's repository and a commit SHA you trust"
            )
        )
    out.print("next:")
    out.print("  perfguard baseline update")
    out.print(
        escape(
            f"  git add perfguard.toml {PACKAGE} baselines .gitignore .github/workflows/perfguard.yml && "
            f'git commit -m "Guard the kernels with perfguard"'
        )
    )
    out.print("then run perfguard check after a change (the workflow runs it on every pull request)")
    return EXIT_OK
