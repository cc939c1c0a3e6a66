"""What a 32-byte load or store costs natively when it crosses a 64-byte cache line (x86_64).

A probe of one suspected cause of the conv2d false alarms (RESULTS.md, "Stack line splits"):
TVM's conv2d spills its accumulators to 32-byte stack slots at 16-byte boundaries, so whether a
slot crosses a line depends on where the caller left %rsp, which llvm-mca does not model. Each
loop body below runs with its slot buffer (%rsi) at each 16-byte position in a line, so that a
different number of its 32-byte slot accesses cross a line; the cost of a split is the slope of
cycles per iteration over splits per iteration (least squares over the four positions).

- loads, stores: 16 independent accesses at 32-byte steps;
- spills: 8 slots, each loaded, accumulated and stored back;
- tvm: the hottest block with spilled accumulators of a TVM conv2d that perfguard builds
  (the verdict pair conv2d 1x24x32x32x48 order FPQcrsfpq), its vector instructions as they are,
  the stack slots moved to %rsi, every other memory operand into one 64-byte-aligned array (%rdx),
  the integer loop bookkeeping left out.

Cycles come from a chain of dependent adds timed in the same process (one add, one cycle, at
whatever clock the core runs), pinned to one core, the best of --runs batches; llvm-mca's cycles
for the same body (which it schedules as if no access split) are printed beside.

    python benchmarks/line_splits.py [--runs 15] [--cpu N] [--mcpu znver4]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHAIN = 64  # dependent adds per calibration iteration
OFFSETS = (0, 16, 32, 48)
TVM_PAIR = "conv2d/1x24x32x32x48x3x3x1x1/order:FPQcrsfpq->FPQfcrspq"

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void body_fn(long n, char *slots, char *array);
%(decls)s
void chain(long n);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    long n = 1000000; int runs = atoi(argv[1]);
    body_fn *bodies[] = {%(names)s};
    int count = sizeof bodies / sizeof bodies[0];
    char *slots = aligned_alloc(4096, 1 << 16), *array = aligned_alloc(4096, 1 << 16);
    memset(slots, 0, 1 << 16); memset(array, 0, 1 << 16);
    double best_chain = 1e9, best[16][4];
    for (int k = 0; k < count; k++) for (int o = 0; o < 4; o++) best[k][o] = 1e9;
    for (int r = 0; r < runs; r++) {
        double t = now(); chain(n); t = now() - t; if (t < best_chain) best_chain = t;
        for (int k = 0; k < count; k++) for (int o = 0; o < 4; o++) {
            t = now(); bodies[k](n, slots + 8192 + 16 * o, array + 16384); t = now() - t;
            if (t < best[k][o]) best[k][o] = t;
        }
    }
    double cycle = best_chain / ((double)n * %(chain)d);
    printf("%%.4f\n", 1e-9 / cycle);
    for (int k = 0; k < count; k++) for (int o = 0; o < 4; o++) printf("%%d %%d %%.4f\n", k, o, best[k][o] / cycle / n);
    return 0;
}
"""

_MEM = re.compile(r"(-?(?:0x[0-9a-f]+|\d+))?\((%\w+)(?:,\s*%\w+(?:,\s*\d+)?)?\)")


def synthetic(kind: str) -> list[str]:
    if kind == "loads":
        return [f"vmovups {32 * i}(%rsi), %ymm{i}" for i in range(16)]
    if kind == "stores":
        return [f"vmovups %ymm{i}, {32 * i}(%rsi)" for i in range(16)]
    return [
        line
        for i in range(8)
        for line in (  # spilled accumulators
            f"vmovups {32 * i}(%rsi), %ymm{i}",
            f"vaddps %ymm15, %ymm{i}, %ymm{i}",
            f"vmovups %ymm{i}, {32 * i}(%rsi)",
        )
    ]


def tvm_block() -> list[str]:
    """The hottest block of the pair's base side that has vector stack slots, rewritten (see the doc)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from verdict_pairs import PAIRS
    from verdicts import build_sides

    from perfguard.config import load_config
    from perfguard.predict.pipeline import PipelineModel

    config = load_config(REPO / "perfguard.toml")
    profile = config.profile("x86_64", "--profile")
    pair = next(p for p in PAIRS if p.name == TVM_PAIR)
    before = build_sides([pair], config, profile, 1)[pair.name][0]
    costs = PipelineModel(profile, config.storage.cache_dir).block_costs(before.stats)
    spills = [c for c in costs if any("(%rsp)" in a and "%ymm" in a for a in c.timing.asm)]
    hot = max(spills, key=lambda c: c.cycles)
    body = []
    for line in hot.timing.asm:
        line = line.split("#", 1)[0].strip()
        if "%ymm" not in line and "%xmm" not in line:
            continue  # integer bookkeeping: counters, compares, the branch

        def move(m: re.Match) -> str:
            disp = int(m.group(1) or "0", 0)
            return f"{disp}(%rsi)" if m.group(2) == "%rsp" else f"{disp + 8192}(%rdx)"

        body.append(_MEM.sub(move, line))
    return body


def splits(body: list[str], offset: int) -> int:
    """32-byte slot accesses in one iteration that cross a line with the slots at `offset`."""
    count = 0
    for line in body:
        found = _MEM.search(line)
        if found and found.group(2) == "%rsi" and "%ymm" in line and "broadcast" not in line:
            count += (offset + int(found.group(1) or "0")) % 64 + 32 > 64
    return count


def assembly(bodies: dict[str, list[str]]) -> str:
    lines = [".text"]
    for k, body in enumerate(bodies.values()):
        lines += [
            f".globl body{k}",
            f"body{k}:",
            ".p2align 6",
            f".Lbody{k}:",
            *body,
            "dec %rdi",
            f"jnz .Lbody{k}",
            "vzeroupper",
            "ret",
        ]
    lines += [
        ".globl chain",
        "chain:",
        ".p2align 6",
        ".Lchain:",
        *["add $1, %rax"] * CHAIN,
        "dec %rdi",
        "jnz .Lchain",
        "ret",
        '.section .note.GNU-stack,"",@progbits',
    ]
    return "\n".join(lines) + "\n"


def mca_cycles(body: list[str], cpu: str) -> float:
    text = "\n".join(body) + "\ndec %rdi\njnz .Lx\n"
    out = subprocess.run(
        ["llvm-mca-19", "-mtriple=x86_64-linux-gnu", f"-mcpu={cpu}", "-iterations=1000"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = next(line for line in out.splitlines() if line.startswith("Total Cycles:"))
    return int(total.split()[-1]) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cpu", type=int, default=os.cpu_count() - 1, help="core to pin to (default: the last)")
    parser.add_argument("--mcpu", default="znver4", help="llvm-mca CPU to compare with")
    args = parser.parse_args()
    bodies = {kind: synthetic(kind) for kind in ("loads", "stores", "spills")}
    bodies["tvm conv2d block"] = tvm_block()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        names = [f"body{k}" for k in range(len(bodies))]
        (work / "main.c").write_text(
            HARNESS % {"chain": CHAIN, "names": ", ".join(names), "decls": "\n".join(f"body_fn {n};" for n in names)}
        )
        (work / "loops.s").write_text(assembly(bodies))
        subprocess.run(
            ["cc", "-O2", "-o", str(work / "bench"), str(work / "main.c"), str(work / "loops.s")], check=True
        )
        out = subprocess.run(
            ["taskset", "-c", str(args.cpu), str(work / "bench"), str(args.runs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    ghz = float(out[0])
    cycles: dict[tuple[int, int], float] = {}
    for line in out[1:]:
        if line:
            k, o, value = line.split()
            cycles[(int(k), int(o))] = float(value)
    print(
        f"best of {args.runs} batches, core {args.cpu} at {ghz:.2f} GHz (dependent-add chain); cycles per "
        f"iteration with the slots at +0/+16/+32/+48 bytes in a line (split accesses)\n"
    )
    print(f"| body | accesses to slots | +0 | +16 | +32 | +48 | cycles per split | llvm-mca {args.mcpu} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k, (kind, body) in enumerate(bodies.items()):
        counts = [splits(body, o) for o in OFFSETS]
        values = [cycles[(k, i)] for i in range(len(OFFSETS))]
        slope = float(np.polyfit(counts, values, 1)[0])
        accesses = sum(1 for line in body if "(%rsi)" in line)
        cells = " | ".join(f"{v:.2f} ({c})" for v, c in zip(values, counts))
        print(f"| {kind} | {accesses} | {cells} | {slope:.2f} | {mca_cycles(body, args.mcpu):.2f} |")


if __name__ == "__main__":
    main()
