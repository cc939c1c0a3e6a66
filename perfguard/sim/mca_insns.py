"""llvm-mca's cycles per instruction of a block, for the side-by-side disassembly of a changed block.

sim/mca.py times whole blocks (what the pipeline model adds up); a reader of a changed block also
wants to see which instructions cost what: llvm-mca's instruction-info view gives each one's
latency and reciprocal throughput in cycles on the scheduling model of the CPU (`-mcpu`) the
pipeline model used, and its micro-ops. One llvm-mca run per call (a code region per block), cached
by the blocks' text, the CPU and LLVM's version in the folder of the tools that answered
(sim/mca_tools.timing_cache_dir). A view, not a prediction: nothing is judged on it, so a block
llvm-mca cannot read gets no costs (None) rather than failing the check.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfguard.atomic import atomic_write_text
from perfguard.errors import InfraError
from perfguard.sim.mca import LLVM_MCA, McaTarget, llvm_version

RECIPE = 1  # part of every cache key: bump when how the view is read changes
_REGION = re.compile(r"^\[(\d+)\] Code Region - i(\d+)$", re.M)
# `[1] #uOps [2] Latency [3] RThroughput [4] MayLoad [5] MayStore [6] HasSideEffects`, then the text
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s")


@dataclass(frozen=True)
class InsnCost:
    uops: int
    latency: int  # cycles from issue to its result
    rthroughput: float  # cycles between two independent ones, at best


def parse_instruction_info(text: str) -> list[InsnCost]:
    """The rows of one region's "Instruction Info:" view, in order."""
    head = text.find("Instructions:")
    if head < 0:
        raise ValueError("no Instruction Info view")
    rows = []
    for line in text[head:].splitlines()[1:]:
        if not line.strip():
            break
        m = _ROW.match(line)
        if m is None:
            raise ValueError(f"not an instruction-info row: {line.strip()[:80]!r}")
        rows.append(InsnCost(int(m.group(1)), int(m.group(2)), float(m.group(3))))
    return rows


def _run(blocks: Sequence[Sequence[str]], target: McaTarget) -> list[list[InsnCost]]:
    cmd = [
        LLVM_MCA,
        f"-mtriple={target.triple}",
        f"-mcpu={target.cpu}",
        "-iterations=1",
        "-all-views=0",
        "-instruction-info",
    ]
    if target.mattr:
        cmd.append(f"-mattr={target.mattr}")
    parts = []
    for i, asm in enumerate(blocks):
        parts += [f"# LLVM-MCA-BEGIN i{i}", *asm, "# LLVM-MCA-END"]
    try:
        proc = subprocess.run(cmd, input="\n".join(parts) + "\n", capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{LLVM_MCA} -instruction-info: {' '.join(str(exc).split())[:200]}") from None
    if proc.returncode != 0:
        raise InfraError(
            f"{LLVM_MCA} -instruction-info failed (exit {proc.returncode}): "
            f"{' | '.join(proc.stderr.split(chr(10)))[:300]}"
        )
    out = proc.stdout
    found = list(_REGION.finditer(out))
    if [int(m.group(2)) for m in found] != list(range(len(blocks))):
        raise ValueError(f"expected {len(blocks)} code regions, found {len(found)}")
    costs = []
    for k, m in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(out)
        rows = parse_instruction_info(out[m.end() : end])
        if len(rows) != len(blocks[k]):
            raise ValueError(f"region {k}: {len(rows)} rows for {len(blocks[k])} instructions")
        costs.append(rows)
    return costs


def _key(asm: Sequence[str], target: McaTarget, version: str) -> str:
    text = json.dumps([RECIPE, list(asm), target.triple, target.cpu, target.mattr, version])
    return hashlib.sha256(text.encode()).hexdigest()


def instruction_costs(
    blocks: Sequence[Sequence[str]], target: McaTarget, cache_dir: Path
) -> list[list[InsnCost] | None]:
    """Each block's per-instruction costs (None: llvm-mca could not read it, or is not installed)."""
    try:
        version = llvm_version(cache_dir)
    except InfraError:
        return [None] * len(blocks)
    folder = Path(cache_dir) / "mca-insns"
    out: list[list[InsnCost] | None] = [None] * len(blocks)
    missing = []
    for i, asm in enumerate(blocks):
        if not asm:
            out[i] = []
            continue
        try:
            rows = json.loads((folder / f"{_key(asm, target, version)}.json").read_text())
            out[i] = [InsnCost(int(u), int(lat), float(rt)) for u, lat, rt in rows]
        except (OSError, ValueError, TypeError):
            missing.append(i)
    if not missing:
        return out
    found: list[list[InsnCost] | None]
    try:
        found = list(_run([blocks[i] for i in missing], target))
    except (InfraError, ValueError):  # one block llvm-mca cannot read: each alone, the rest still get costs
        found = []
        for i in missing:
            try:
                found += _run([blocks[i]], target)
            except (InfraError, ValueError):
                found.append(None)
    for i, rows in zip(missing, found):
        out[i] = rows
        if rows is not None:
            atomic_write_text(
                folder / f"{_key(blocks[i], target, version)}.json",
                json.dumps([[r.uops, r.latency, r.rthroughput] for r in rows]),
            )
    return out
