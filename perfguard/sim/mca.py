"""Cycles per executed block from LLVM's scheduling models (llvm-mc to disassemble, llvm-mca to
schedule), cached per block in the content-addressed cache.

A block is disassembled from the bytes the block profile carries (no binary needed, so a stored
baseline can be re-scored) and given to llvm-mca as a loop body: it runs back to back, so
loop-carried register dependencies count. Cycles per execution = total cycles / iterations;
the bound is what limits it: "latency" (a dependency chain: cycles well above the block's
reciprocal throughput), else the busiest resource of the scheduling model, else "dispatch".

All uncached blocks of one profile go through one llvm-mc and one llvm-mca run (llvm-mca code
regions); only when that fails is each block run alone, to name the one that fails. The cache
key is (block bytes, triple, cpu, mattr, LLVM version); the version comes from the tool's
--version once per installed binary (remembered by path, size and mtime), so a warm check runs
no LLVM tool at all. A missing tool or a block it cannot handle is an InfraError naming both.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfguard.atomic import atomic_write_text
from perfguard.errors import InfraError
from perfguard.sim.blocks import Block

LLVM_MCA = "llvm-mca-19"
LLVM_MC = "llvm-mc-19"
ITERATIONS = 40  # enough for a steady state; llvm-mca's time grows with it
RECIPE = 2  # part of every cache key: bump when how cycles are read changes
LATENCY_BOUND = 1.15  # cycles per iteration above this x the reciprocal throughput: a dependency chain
SCHEDULE_CHUNK = 256  # code regions per llvm-mca run


@dataclass(frozen=True)
class BlockTiming:
    cycles: float  # per execution, back to back
    bound: str  # "latency", a scheduling-model resource name, or "dispatch"
    asm: tuple[str, ...]  # the disassembly, one instruction per entry


@dataclass(frozen=True)
class McaTarget:
    triple: str
    cpu: str
    mattr: str  # comma-separated, may be empty

    def describe(self) -> str:
        return f"-mtriple={self.triple} -mcpu={self.cpu}" + (f" -mattr={self.mattr}" if self.mattr else "")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise InfraError(f"{name} (LLVM, needed by the pipeline timing model) not found on PATH: install the "
                         f"Debian package llvm-19 (apt-get install llvm-19), or choose model = \"analytical\"")
    return path


_VERSIONS: dict[tuple, str] = {}


def llvm_version(cache_dir: Path) -> str:
    """The LLVM version of llvm-mca, asked once per installed binary and remembered on disk."""
    path = os.path.realpath(_tool(LLVM_MCA))
    st = os.stat(path)
    ident = (path, st.st_size, st.st_mtime_ns, str(cache_dir))
    if ident in _VERSIONS:
        return _VERSIONS[ident]

    memo = Path(cache_dir) / "mca" / f"version-{hashlib.sha256(repr(ident[:3]).encode()).hexdigest()[:20]}.txt"
    try:
        version = memo.read_text().strip()
    except OSError:
        version = ""
    if not version:
        proc = _run([path, "--version"], "", f"{LLVM_MCA} --version")
        found = re.search(r"LLVM version (\S+)", proc)
        if not found:
            raise InfraError(f"{LLVM_MCA} --version printed no LLVM version: {' '.join(proc.split())[:200]}")
        version = found.group(1)
        atomic_write_text(memo, version + "\n")
    _VERSIONS[ident] = version
    return version


def _run(cmd: list[str], stdin: str, what: str) -> str:
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{what}: cannot run {cmd[0]}: {' '.join(str(exc).split())[:300]}") from None
    if proc.returncode != 0:
        err = " | ".join(ln.strip() for ln in proc.stderr.splitlines() if ln.strip())
        raise InfraError(f"{what}: {Path(cmd[0]).name} failed (exit {proc.returncode}): {err[:400]}")
    return proc.stdout


def _block_name(block: Block) -> str:
    return f"block 0x{block.addr:x}-0x{block.end:x} ({block.insns} instructions, bytes {block.code[:32]}" + \
        ("..." if len(block.code) > 32 else "") + ")"


def _disassemble(blocks: list[Block], target: McaTarget, what: str) -> list[list[str]]:
    """Each block's instructions as llvm-mc prints them."""
    cmd = [_tool(LLVM_MC), "--disassemble", f"-triple={target.triple}", f"-mcpu={target.cpu}"]
    if target.mattr:
        cmd.append(f"-mattr={target.mattr}")

    def run(group: list[Block]) -> tuple[list[str], str]:
        text = "\n".join(" ".join("0x" + b.code[i:i + 2] for i in range(0, len(b.code), 2)) for b in group)
        try:
            proc = subprocess.run(cmd, input=text + "\n", capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InfraError(f"{what}: cannot run {LLVM_MC}: {' '.join(str(exc).split())[:300]}") from None
        lines = [ln.strip() for ln in proc.stdout.splitlines()]
        insns = [ln for ln in lines if ln and not ln.startswith((".", "#"))]
        problem = "" if proc.returncode == 0 and "warning" not in proc.stderr and "error" not in proc.stderr \
            else " | ".join(ln.strip() for ln in proc.stderr.splitlines() if ln.strip())[:300] or f"exit {proc.returncode}"
        return insns, problem

    def alone(b: Block) -> list[str]:
        insns, problem = run([b])
        if _page_tail(b, target) and len(insns) == b.insns - 1:
            return insns  # its last instruction's bytes were cut at the page end: time the rest
        if problem or len(insns) != b.insns:
            why = problem or f"{len(insns)} instructions decoded, the simulator executed {b.insns}"
            raise InfraError(f"{what}: {LLVM_MC} cannot disassemble {_block_name(b)} for {target.describe()}: {why}")
        return insns

    # A block cut at a page end may not decode as a whole: it goes alone, so that it does not
    # send the whole batch down the one-block-at-a-time path.
    batch = [b for b in blocks if not _page_tail(b, target)]
    found: dict[int, list[str]] = {}
    if batch:
        insns, problem = run(batch)
        if not problem and len(insns) == sum(b.insns for b in batch):
            at = 0
            for b in batch:
                found[id(b)] = insns[at:at + b.insns]
                at += b.insns
    # What the batch did not give (a page-tail block, or a batch that failed and must name its
    # culprit) is disassembled block by block.
    return [found[id(b)] if id(b) in found else alone(b) for b in blocks]


# x86 `rep movs/stos/...`: QEMU executes the block once per element, and llvm-mca has no model of
# the microcoded loop (it charges a flat ~100 cycles per instruction). Fast-string hardware
# moves about 16 bytes per cycle (32 on recent cores; memory limits aside), so each execution costs
# its element size over that.
_REP_STRING = re.compile(r"^(?:rep|repe|repz|repne|repnz)\s+(?:movs|stos|lods|cmps|scas)([bwlq])\b")
_REP_BYTES_PER_CYCLE = 16.0
_ELEMENT_BYTES = {"b": 1, "w": 2, "l": 4, "q": 8}


def _rep_string(asm: list[str]) -> BlockTiming | None:
    if len(asm) != 1:
        return None
    found = _REP_STRING.match(" ".join(asm[0].split()))
    if not found:
        return None
    return BlockTiming(_ELEMENT_BYTES[found.group(1)] / _REP_BYTES_PER_CYCLE, "rep string", (" ".join(asm[0].split()),))


def _page_tail(block: Block, target: McaTarget) -> bool:
    """QEMU 7.2 gives an x86 instruction that runs over a page end with only some of its bytes
    (the block then ends a few bytes short of the page boundary, its last instruction
    undecodable): such a block is timed without that one instruction."""
    return target.triple.startswith("x86_64") and -block.end % 4096 < 16


_REGION = re.compile(r"^\[(\d+)\] Code Region - b(\d+)$", re.M)


def _parse_region(text: str) -> tuple[float, str]:
    iters = re.search(r"^Iterations:\s+(\d+)$", text, re.M)
    cycles = re.search(r"^Total Cycles:\s+(\d+)$", text, re.M)
    rthru = re.search(r"^Block RThroughput:\s+([\d.]+)$", text, re.M)
    if not (iters and cycles and rthru):
        raise ValueError("no summary (Iterations / Total Cycles / Block RThroughput)")
    per_iter = int(cycles.group(1)) / int(iters.group(1))
    names = dict(re.findall(r"^\[([\d.]+)\]\s+- (\S+)$", text, re.M))
    pressure = re.search(r"^Resource pressure per iteration:\n(.*)\n(.*)$", text, re.M)
    busiest, most = "dispatch", 0.0
    if pressure:
        heads = re.findall(r"\[([\d.]+)\]", pressure.group(1))
        values = pressure.group(2).split()
        for head, value in zip(heads, values):
            if value != "-" and float(value) > most:
                busiest, most = names.get(head, head), float(value)
    if per_iter > LATENCY_BOUND * float(rthru.group(1)):
        bound = "latency"
    elif most >= 0.9 * float(rthru.group(1)):
        bound = busiest
    else:
        bound = "dispatch"
    return per_iter, bound


def _schedule(blocks: list[Block], asm: list[list[str]], target: McaTarget, what: str) -> list[tuple[float, str]]:
    cmd = [_tool(LLVM_MCA), f"-mtriple={target.triple}", f"-mcpu={target.cpu}", f"-iterations={ITERATIONS}",
           "-all-views=0", "-summary-view", "-resource-pressure"]
    if target.mattr:
        cmd.append(f"-mattr={target.mattr}")

    def run(indices: list[int]) -> list[tuple[float, str]]:
        parts = []
        for i in indices:
            parts += [f"# LLVM-MCA-BEGIN b{i}", *asm[i], "# LLVM-MCA-END"]
        out = _run(cmd, "\n".join(parts) + "\n", what)
        found = list(_REGION.finditer(out))
        if [int(m.group(2)) for m in found] != indices:
            raise ValueError(f"expected {len(indices)} code regions in the output, found {len(found)}")
        results = []
        for k, m in enumerate(found):
            end = found[k + 1].start() if k + 1 < len(found) else len(out)
            results.append(_parse_region(out[m.end():end]))
        return results

    # In chunks: one llvm-mca run per chunk keeps each run well inside the tool timeout (a dataset
    # has thousands of blocks, and a loaded machine once ran one whole batch past it, which sent
    # every block down the one-at-a-time path below).
    try:
        return [r for start in range(0, len(blocks), SCHEDULE_CHUNK)
                for r in run(list(range(start, min(start + SCHEDULE_CHUNK, len(blocks)))))]
    except (InfraError, ValueError):
        pass
    results = []
    for i, b in enumerate(blocks):  # name the block llvm-mca cannot handle
        try:
            results.append(run([i])[0])
        except (InfraError, ValueError) as exc:
            why = exc.message if isinstance(exc, InfraError) else str(exc)
            raise InfraError(f"{what}: {LLVM_MCA} cannot schedule {_block_name(b)} for {target.describe()}: "
                             f"{why}") from None
    return results


def _key(block: Block, target: McaTarget, version: str) -> str:
    text = json.dumps([RECIPE, block.code, target.triple, target.cpu, target.mattr, version, _page_tail(block, target)])
    return hashlib.sha256(text.encode()).hexdigest()


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "mca" / key[:2] / f"{key}.json"


# What this process already read or computed, by cache key: a check scores each block several
# times (the result, its baseline, the attribution, the report), and the key (bytes, CPU, LLVM
# version) fixes the answer whatever the cache folder.
_KNOWN: dict[str, BlockTiming | float] = {}


def _read(path: Path) -> BlockTiming | None:
    try:
        data = json.loads(path.read_text())
        return BlockTiming(float(data["cycles"]), str(data["bound"]), tuple(str(s) for s in data["asm"]))
    except (OSError, ValueError, TypeError, KeyError):  # missing or damaged: compute again
        return None


def _loop_key(body: list[Block], target: McaTarget, version: str) -> str:
    text = json.dumps([RECIPE, "loop", [b.code for b in body], target.triple, target.cpu, target.mattr, version])
    return hashlib.sha256(text.encode()).hexdigest()


def loop_cycles(bodies: list[list[tuple[Block, BlockTiming]]], target: McaTarget, cache_dir: Path,
                what: str = "pipeline model") -> list[float]:
    """Cycles per iteration of loops whose body spans several blocks, each body's instructions
    given to llvm-mca as one loop (so dependencies from one block into the next iteration's
    blocks count); cached like block timings, by the body's bytes."""
    version = llvm_version(cache_dir)
    keys = [_loop_key([b for b, _ in body], target, version) for body in bodies]
    found: dict[str, float] = {}
    for key in set(keys):
        if key in _KNOWN:
            found[key] = _KNOWN[key]
            continue
        try:
            found[key] = _KNOWN[key] = float(json.loads(_path(cache_dir, key).read_text())["cycles"])
        except (OSError, ValueError, TypeError, KeyError):  # missing or damaged: compute again
            pass
    todo = {key: body for key, body in zip(keys, bodies) if key not in found}
    if todo:
        heads = [body[0][0] for body in todo.values()]
        asm = [[line for _, timing in body for line in timing.asm] for body in todo.values()]
        where = what + ", the loop body starting at its first block"
        for key, (cycles, _) in zip(todo, _schedule(heads, asm, target, where)):
            atomic_write_text(_path(cache_dir, key), json.dumps({"cycles": cycles}, sort_keys=True))
            found[key] = _KNOWN[key] = cycles
    return [found[key] for key in keys]


def block_timings(blocks: tuple[Block, ...] | list[Block], target: McaTarget, cache_dir: Path,
                  what: str = "pipeline model") -> list[BlockTiming]:
    """A timing per block, in order; from the cache where it has them."""
    version = llvm_version(cache_dir)
    keys = [_key(b, target, version) for b in blocks]
    found: dict[str, BlockTiming] = {}
    for key in set(keys):
        timing = _KNOWN.get(key) or _read(_path(cache_dir, key))
        if timing is not None:
            found[key] = _KNOWN[key] = timing
    todo: dict[str, Block] = {}
    for b, key in zip(blocks, keys):
        if key not in found:
            todo.setdefault(key, b)
    if todo:
        pending = list(todo.values())
        asm = _disassemble(pending, target, what)
        timings = {i: _rep_string(lines) for i, lines in enumerate(asm)}
        scheduled = [i for i, t in timings.items() if t is None]
        results = _schedule([pending[i] for i in scheduled], [asm[i] for i in scheduled], target, what) \
            if scheduled else []
        for i, (cycles, bound) in zip(scheduled, results):
            timings[i] = BlockTiming(cycles, bound, tuple(" ".join(ln.split()) for ln in asm[i]))
        for key, timing in zip(todo, (timings[i] for i in range(len(pending)))):
            atomic_write_text(_path(cache_dir, key), json.dumps(
                {"cycles": timing.cycles, "bound": timing.bound, "asm": list(timing.asm)}, sort_keys=True))
            found[key] = _KNOWN[key] = timing
    return [found[key] for key in keys]
