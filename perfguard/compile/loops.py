"""The kernel's loop nest as LLVM receives it, recorded beside the build (loops.json), and the
loops a block's execution count fits.

Why counts: the object's line table holds line 0 only, and its DWARF describes a loop variable
only where LLVM kept a value for it (location lists; an induction variable LLVM rewrote has
none), so an address alone does not always say its loop. Counts do: a block that runs once per
iteration of loop L runs trips(L) times per kernel call, the product of the iterations of L and
every loop around it. Vectorized loops became SIMD lanes and unrolled ones copies, so neither
iterates; a serial or parallel loop of one iteration does not either. The nest is taken from
the module lowered by the very passes `tvm.tirx.build` runs (TVM decides unrolling and
vectorisation there), after the object is built and outside its build key: recording it changes
no byte of any build and no statistic. A loop TVM vectorised is no loop of the lowered module (its
iterations are lanes of vector instructions); it is read from the scheduled module and recorded
as a `vectorized` loop first inside the loop around it that lowering kept, so a block of that loop
can say whose lanes it holds. The location lists are kept too (`ranges`, as harness
addresses): where several loops fit a count, they tell them apart (judge.attribution), and
benchmarks/loop_names.py checks the names against them.

Matching (`LoopLayout`, from one run's block counts): LLVM transforms loops on its own. A loop
it unrolled completely (or vectorised away) leaves no block that runs once per its iteration; its
body then exists in copies, and the loops inside are fitted per copy. It may peel an iteration
off a loop (the body block runs extent - 1 times per entry) or unroll it by a factor f (trips /
f). A count names the loops it fits in the plainest way; copies of one loop (TVM unrolled a loop
around it: the copies keep its variable object) are one loop. More than one loop left is
ambiguous: the caller shows the candidates, never one of them as the answer.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError, newer_format

LOOPS_FILE = "loops.json"
# 2: each loop's "stores" and the "code" ranges; 3: the loops TVM vectorised, inside the loop around
# them (older versions, e.g. in baselines, still read: they name no such loop)
LOOPS_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")  # tvm.tirx.ForKind order
_ITERATING = ("serial", "parallel")


@dataclass(frozen=True)
class Loop:
    var: str
    extent: int | None  # iterations (a stepped loop's too); None: not a constant
    kind: str  # one of KINDS
    parent: int | None  # index of the enclosing loop in LoopNest.loops
    copy_of: int | None = None  # the loop this is a copy of (the same TIR loop: TVM unrolled a loop around it)
    stores: tuple[
        str, ...
    ] = ()  # an outermost loop: the buffers its nest writes (the nest's name; () before version 2)


@dataclass(frozen=True)
class LoopMatch:
    loop: int  # index into LoopNest.loops
    executions: int  # how often the block runs per call when it is this loop's (one copy of its) body
    per_execution: int = 1  # loop iterations per block execution (> 1: LLVM unrolled or vectorised it by this)
    peeled: int = 0  # iterations LLVM peeled off the loop (they run elsewhere)
    approximate: bool = False  # no plain way fits: per_execution is the count's average (LoopLayout.rewritten)
    outer_peeled: int = 0  # iterations LLVM peeled off the loop around it: this copy runs in the others
    copy: bool = False  # a loop LLVM unrolled completely: the block is its copies' own code (once per iteration)


@dataclass(frozen=True)
class LoopNest:
    loops: tuple[Loop, ...]  # pre-order: a parent before its children
    functions: tuple[str, ...] = ()  # the kernel object's function symbols (other blocks are the harness's)
    error: str | None = None  # why no nest was recorded
    # loop variable -> [start, end) harness addresses where the object's DWARF locates its value
    ranges: dict[str, list[list[int]]] = field(default_factory=dict)
    # [start, end) harness addresses of the kernel object's functions (version 2; [] before): a
    # block QEMU knows no symbol for is the kernel's only there (elsewhere: a C library stub)
    code: list[list[int]] = field(default_factory=list)

    def located(self, var: str, start: int, end: int) -> bool:
        """Whether the debug information places variable `var` somewhere in [start, end)."""
        return any(lo < end and start < hi for lo, hi in self.ranges.get(var, ()))

    # -- the nest -------------------------------------------------------------------------------

    def iterations(self, i: int) -> int | None:
        loop = self.loops[i]
        return loop.extent if loop.kind in _ITERATING else 1

    def trips(self, i: int) -> int | None:
        """How often loop i's body runs per kernel call (None: an extent on its path is not constant)."""
        product = 1
        for j in self.path(i):
            n = self.iterations(j)
            if n is None:
                return None
            product *= n
        return product

    def path(self, i: int) -> list[int]:
        """The loops from the outermost down to loop i."""
        out = []
        at: int | None = i
        while at is not None:
            out.append(at)
            at = self.loops[at].parent
        return out[::-1]

    def iterating(self) -> list[int]:
        """Loops that are loops in the machine code (unless LLVM unrolls them): serial or parallel,
        two or more iterations, a constant trip product."""
        return [
            i
            for i, loop in enumerate(self.loops)
            if loop.kind in _ITERATING and (loop.extent or 0) >= 2 and self.trips(i) is not None
        ]

    def origin(self, i: int) -> int:
        """The loop that loop i is a copy of (itself if none)."""
        first = self.loops[i].copy_of
        return i if first is None else first

    def subtree_end(self, i: int) -> int:
        """One past the last loop inside loop i (pre-order: its subtree is [i, subtree_end(i)))."""
        return self._ends[i]

    def span(self, i: int) -> tuple[int, int]:
        """[first, last] pre-order index of the code of loop i's origin: every copy of it and what
        is inside them."""
        return self._spans[self.origin(i)]

    @functools.cached_property
    def _ends(self) -> list[int]:
        ends = list(range(1, len(self.loops) + 1))
        for i in reversed(range(len(self.loops))):  # children after parents: fold each end upward
            parent = self.loops[i].parent
            if parent is not None:
                ends[parent] = max(ends[parent], ends[i])
        return ends

    @functools.cached_property
    def _spans(self) -> dict[int, tuple[int, int]]:
        spans: dict[int, tuple[int, int]] = {}
        for j in range(len(self.loops)):
            first, last = spans.get(self.origin(j), (j, j))
            spans[self.origin(j)] = (min(first, j), max(last, self._ends[j] - 1))
        return spans

    def before(self, a: int, b: int) -> bool:
        """Whether all of loop a's code comes before all of loop b's in the nest's order (neither
        inside the other). LLVM lays a function's loops out in that order, so a block of a lies
        at a lower address than a block of b in the same function (judge.attribution)."""
        return self.span(a)[1] < self.span(b)[0]

    def nest_index(self, i: int) -> int:
        """Which nest of the kernel loop i is in: 1 for the first outermost loop, and so on."""
        root = self.path(i)[0]
        return sum(1 for j in range(root + 1) if self.loops[j].parent is None)

    def nest_name(self, i: int) -> str:
        """The buffers the nest around loop i stores to, in order (`scores`, `e, row_sum`): what
        identifies the nest across builds; "" where the nest recorded no stores (version 1)."""
        root = self.path(i)[0]
        names: list[str] = []
        for j in range(root, self.subtree_end(root)):
            names.extend(b for b in self.loops[j].stores if b not in names)
        return ", ".join(names)

    # -- the file -------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        data: dict = {
            "version": LOOPS_VERSION,
            "functions": list(self.functions),
            "loops": [
                {
                    "var": x.var,
                    "extent": x.extent,
                    "kind": x.kind,
                    "parent": x.parent,
                    "copy_of": x.copy_of,
                    "stores": list(x.stores),
                }
                for x in self.loops
            ],
            "ranges": self.ranges,
            "code": self.code,
        }
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: object, source: str) -> LoopNest:
        where = f"{source}: loop nest"
        if (
            not isinstance(data, dict)
            or not {"version", "functions", "loops"} <= set(data)
            or not set(data) <= {"version", "functions", "loops", "error", "ranges", "code"}
        ):
            raise InputError(f"{where} must be an object with 'version', 'functions' and 'loops'")
        if type(data["version"]) is int and data["version"] > LOOPS_VERSION:
            raise newer_format(source, "loop nest version", data["version"], LOOPS_VERSION)
        if data["version"] not in READABLE_VERSIONS:
            raise InputError(f"{where} version {data['version']!r} is not one of {list(READABLE_VERSIONS)}")
        names = ["var", "extent", "kind", "parent", "copy_of"] + (["stores"] if data["version"] >= 2 else [])
        keys = set(names)
        functions, rows, error = data["functions"], data["loops"], data.get("error")
        if not isinstance(functions, list) or not all(isinstance(f, str) for f in functions):
            raise InputError(f"{where}: 'functions' must be a list of strings")
        if error is not None and not isinstance(error, str):
            raise InputError(f"{where}: 'error' must be a string")
        if not isinstance(rows, list):
            raise InputError(f"{where}: 'loops' must be a list")
        loops = []
        for i, row in enumerate(rows):
            ok = (
                isinstance(row, dict)
                and set(row) == keys
                and isinstance(row["var"], str)
                and row["kind"] in KINDS
                and isinstance(row.get("stores", []), list)
                and all(isinstance(b, str) for b in row.get("stores", []))
                and (row["extent"] is None or _count(row["extent"]))
                and all(row[k] is None or (_count(row[k]) and row[k] < i) for k in ("parent", "copy_of"))
            )
            if not ok:
                raise InputError(
                    f"{where}: loop {i} must be {{{', '.join(names)}}} with a known kind, "
                    "earlier loops (or null) as parent and copy_of"
                    + (" and buffer names as stores" if "stores" in keys else "")
                )
            loops.append(
                Loop(
                    row["var"], row["extent"], row["kind"], row["parent"], row["copy_of"], tuple(row.get("stores", ()))
                )
            )
        ranges = data.get("ranges", {})
        if not isinstance(ranges, dict) or not all(
            isinstance(spans, list)
            and all(isinstance(r, list) and len(r) == 2 and all(_count(v) for v in r) for r in spans)
            for spans in ranges.values()
        ):
            raise InputError(f"{where}: 'ranges' must map variables to lists of [start, end] addresses")
        code = data.get("code", [])
        if not isinstance(code, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(_count(v) for v in r) for r in code
        ):
            raise InputError(f"{where}: 'code' must be a list of [start, end] addresses")
        return cls(tuple(loops), tuple(functions), error, ranges, code)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


# -- recording (TVM) ------------------------------------------------------------------------------


def record_loops(mod: object, tvm_target: dict, obj: Path, harness: Path | None = None) -> LoopNest:
    """The nest of `mod` (a scheduled IRModule) lowered as `tvm.tirx.build` lowers it for
    `tvm_target`, the function symbols of its object file `obj`, and (given the `harness` it is
    linked into) where the loop variables' debug locations lie there. Never raises: a nest that
    cannot be recorded is one with no loops and the reason (attribution then names no loop)."""
    try:
        import tvm
        import tvm.s_tir

        target = tvm.target.Target(tvm_target)
        target = target.with_host(target)  # as tvm.tirx.build binds a CPU target
        lowered = tvm.tirx.transform.BindTarget(target)(mod)
        pipeline, finalize_host, _ = tvm.tirx.get_tir_pipeline("default")  # what tvm.tirx.build runs
        lowered = finalize_host()(pipeline(lowered))
        functions = [f for _, f in sorted(lowered.functions.items(), key=lambda item: item[0].name_hint)]
        kept: list = []  # the lowered loops' variables (lowering keeps the scheduled module's objects)
        for func in functions:
            if isinstance(func, tvm.tirx.PrimFunc):
                _walk(tvm, func.body, [], kept)
        lanes = _lanes(tvm, mod, kept)
        loops: list[Loop] = []
        seen: list = []  # each loop's variable: copies made by unrolling keep the variable object
        for func in functions:
            if isinstance(func, tvm.tirx.PrimFunc):
                _walk(tvm, func.body, loops, seen, lanes)
        loops = _name_nests(loops, scheduled_nests(mod))
        ranges = harness_ranges(obj, harness, {x.var for x in loops}) if harness is not None else {}
        return LoopNest(
            tuple(loops),
            object_functions(obj),
            ranges=ranges,
            code=placed_code(obj, harness) if harness is not None else [],
        )
    except Exception as exc:  # TVM raises many types; the build itself already succeeded
        lines = str(exc).strip().splitlines()
        return LoopNest((), (), f"{type(exc).__name__}: {lines[-1] if lines else ''}")


def _walk(tvm, stmt, out: list[Loop], seen: list, lanes: tuple[tuple[Any, Any, int | None], ...] = ()) -> None:
    """Append the loops of `stmt` to `out` in pre-order, and each of `lanes` (parent variable,
    variable, extent: a loop TVM vectorised) as a vectorized loop first inside its parent."""

    def add(var, extent: int | None, kind: str, up: int | None) -> int:
        first = next((i for i, known in enumerate(seen) if known.same_as(var)), None)
        origin = None if first is None else out[first].copy_of if out[first].copy_of is not None else first
        out.append(Loop(str(var.name), extent, kind, up, origin))
        seen.append(var)
        return len(out) - 1

    stack: list = [(stmt, None)]
    while stack:  # depth first, children in order: the nest comes out in pre-order
        node, up = stack.pop()
        if isinstance(node, tvm.tirx.For):
            at = add(node.loop_var, _iterations(tvm, node), KINDS[int(node.kind)], up)
            for parent, var, extent in lanes:
                if parent.same_as(node.loop_var):
                    add(var, extent, "vectorized", at)
            stack.append((node.body, at))
        elif isinstance(node, tvm.tirx.SeqStmt):
            stack.extend((s, up) for s in reversed(list(node.seq)))
        elif isinstance(node, tvm.tirx.IfThenElse):
            stack.extend((s, up) for s in (node.else_case, node.then_case) if s is not None)
        elif isinstance(getattr(node, "body", None), tvm.tirx.Stmt):  # AttrStmt, While, ...
            stack.append((node.body, up))


def _lanes(tvm, mod, kept: list) -> tuple[tuple[Any, Any, int | None], ...]:
    """The loops of the scheduled module `mod` that TVM vectorised (lowering turns them into
    vector instructions, so the lowered nest has no loop of theirs): (the variable of the nearest
    loop around it that lowering kept, its variable, its lanes). One TVM kept as a loop (it
    could not vectorise it) or with no kept loop around it is left out."""
    out = []
    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        stack: list = [(func.body, ())]
        while stack:
            node, around = stack.pop()
            if isinstance(node, tvm.tirx.For):
                if KINDS[int(node.kind)] == "vectorized" and not any(v.same_as(node.loop_var) for v in kept):
                    parent = next((a for a in reversed(around) if any(v.same_as(a) for v in kept)), None)
                    if parent is not None:
                        extent = node.extent
                        out.append(
                            (parent, node.loop_var, int(extent) if isinstance(extent, tvm.tirx.IntImm) else None)
                        )
                stack.append((node.body, (*around, node.loop_var)))
            elif isinstance(node, tvm.tirx.SeqStmt):
                stack.extend((s, around) for s in reversed(list(node.seq)))
            elif isinstance(node, tvm.s_tir.SBlockRealize):
                stack.extend((s, around) for s in (node.block.body, node.block.init) if s is not None)
            elif isinstance(node, tvm.tirx.IfThenElse):
                stack.extend((s, around) for s in (node.else_case, node.then_case) if s is not None)
            elif isinstance(getattr(node, "body", None), tvm.tirx.Stmt):
                stack.append((node.body, around))
    return tuple(out)


def scheduled_nests(mod) -> list[tuple[set[str], list[str]]]:
    """Each outermost loop of the scheduled module (before lowering): the variables of the loops
    in it and the buffers its blocks write, in order. Lowering merges the storage of buffers whose
    lives do not overlap under one name (an attention's exponentials reuse its scores), so what a
    nest stores is read here, where every buffer still has its own name."""
    import tvm
    import tvm.s_tir

    nests: list[tuple[set[str], list[str]]] = []
    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        stack: list = [(func.body, None)]
        while stack:
            node, nest = stack.pop()
            if isinstance(node, tvm.tirx.For):
                if nest is None:
                    nests.append((set(), []))
                    nest = len(nests) - 1
                nests[nest][0].add(str(node.loop_var.name))
                stack.append((node.body, nest))
            elif isinstance(node, tvm.tirx.SeqStmt):
                stack.extend((s, nest) for s in reversed(list(node.seq)))
            elif isinstance(node, tvm.s_tir.SBlockRealize):
                block = node.block
                if nest is not None:
                    for written in block.writes:  # TensorRegion: the written tensor is its source
                        source: Any = getattr(written, "source", getattr(written, "buffer", None))
                        name = str(source.name)
                        if name not in nests[nest][1]:
                            nests[nest][1].append(name)
                stack.extend((s, nest) for s in (block.body, block.init) if s is not None)
            elif isinstance(node, tvm.tirx.IfThenElse):
                stack.extend((s, nest) for s in (node.else_case, node.then_case) if s is not None)
            elif isinstance(getattr(node, "body", None), tvm.tirx.Stmt):
                stack.append((node.body, nest))
    return nests


def _name_nests(loops: list[Loop], scheduled: list[tuple[set[str], list[str]]]) -> list[Loop]:
    """`loops` with each outermost loop storing what the scheduled nest it came from writes. The
    scheduled nests are taken in order: an outermost loop is the previous one's nest again when
    its variable is there and not in the next (lowering drops loops of one iteration, so one nest
    may come out as several), else the next nest that has its variable."""
    out, previous = list(loops), None
    for i, loop in enumerate(loops):
        if loop.parent is not None:
            continue
        start = 0 if previous is None else previous + 1
        if (
            previous is not None
            and loop.var in scheduled[previous][0]
            and not (start < len(scheduled) and loop.var in scheduled[start][0])
        ):
            match: int | None = previous
        else:
            match = next((k for k in range(start, len(scheduled)) if loop.var in scheduled[k][0]), None)
        if match is None:
            continue
        out[i] = replace(loop, stores=tuple(scheduled[match][1]))
        previous = match
    return out


def _iterations(tvm, loop) -> int | None:
    if not isinstance(loop.extent, tvm.tirx.IntImm):
        return None
    extent, step = int(loop.extent), getattr(loop, "step", None)
    if step is None:
        return extent
    if not isinstance(step, tvm.tirx.IntImm) or int(step) < 1:
        return None
    return -(-extent // int(step))


def elf_functions(path: Path) -> dict[str, tuple[int, int]]:
    """{function symbol: (value, size)} of what an ELF64 little-endian file defines (every target
    here is one); {} for anything else."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = {}
    for section in sections:
        if section[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[section[6]][4]
        for at in range(section[4], section[4] + section[5], 24):
            st_name, st_info, _, st_shndx, value, size = struct.unpack_from("<IBBHQQ", data, at)
            if st_info & 0xF == 2 and st_shndx != 0:  # STT_FUNC, defined here
                end = data.index(b"\0", strtab + st_name)
                out[data[strtab + st_name : end].decode("utf-8", "replace")] = (value, size)
    return out


def object_functions(path: Path) -> tuple[str, ...]:
    """The function symbols an object defines, sorted."""
    return tuple(sorted(elf_functions(path)))


LLVM_DWARFDUMP = "llvm-dwarfdump-19"  # Debian's llvm-19, which the pipeline model needs anyway
_RANGE = re.compile(r"\[0x([0-9a-f]+), 0x([0-9a-f]+)\)")
_NAME = re.compile(r'DW_AT_name\s+\("([^"]*)"\)')


def variable_ranges(obj: Path) -> dict[str, list[tuple[int, int]]]:
    """{variable: [(start, end) offsets in the object's code]} from the location lists of its
    DWARF ({} without llvm-dwarfdump-19 or when it fails: the ranges only ever tell loops apart)."""
    tool = shutil.which(LLVM_DWARFDUMP)
    if tool is None:
        return {}
    proc = subprocess.run([tool, "--debug-info", str(obj)], capture_output=True, text=True, check=False)
    out: dict[str, list[tuple[int, int]]] = {}
    for entry in proc.stdout.split("DW_TAG_")[1:] if proc.returncode == 0 else ():
        name = _NAME.search(entry)
        if entry.startswith("variable") and name:
            out.setdefault(name.group(1), []).extend((int(a, 16), int(b, 16)) for a, b in _RANGE.findall(entry))
    return out


def placed_code(obj: Path, harness: Path) -> list[list[int]]:
    """[start, end) of each function of the object where the harness placed it, sorted (a
    function the harness took from elsewhere, e.g. a C library's copy of a helper, left out)."""
    if not harness.is_file():
        return []
    inside, placed = elf_functions(obj), elf_functions(harness)
    return sorted(
        [placed[f][0], placed[f][0] + size]
        for f, (_, size) in inside.items()
        if size and f in placed and placed[f][1] == size
    )


def harness_ranges(obj: Path, harness: Path, names: set[str]) -> dict[str, list[list[int]]]:
    """The location ranges of the variables `names`, as addresses in the linked harness: each
    range placed by the kernel function it lies in (one the harness took from elsewhere, e.g. a
    C library's copy of a helper, is left out)."""
    if not harness.is_file():
        return {}
    inside, placed = elf_functions(obj), elf_functions(harness)
    out: dict[str, list[list[int]]] = {}
    for var, spans in variable_ranges(obj).items():
        if var not in names:
            continue
        for lo, hi in spans:
            owner = next((f for f, (at, size) in inside.items() if at <= lo < at + size), None)
            if owner in placed and placed[owner][1] == inside[owner][1]:
                shift = placed[owner][0] - inside[owner][0]
                out.setdefault(var, []).append([lo + shift, hi + shift])
    return {var: sorted(spans) for var, spans in sorted(out.items())}


def ensure_loops(build_dir: Path, mod: object, tvm_target: dict) -> dict | None:
    """The build's recorded nest (plain JSON), recorded on first use: once per build, so a warm
    check only reads it (a build cached before nests were recorded, or recorded by an older
    version, gets one then). None when the file is damaged: that build names no loop. `mod` may
    be a function making the module (called only to record the nest)."""
    path = Path(build_dir) / LOOPS_FILE
    try:
        data = json.loads(path.read_text())
        nest = LoopNest.from_dict(data, str(path)).to_dict()
        if data["version"] == LOOPS_VERSION:
            return nest
    except FileNotFoundError:
        pass
    except (OSError, ValueError, InputError):
        return None
    if callable(mod):
        mod = mod()
    nest = record_loops(mod, tvm_target, Path(build_dir) / "kernel.o", Path(build_dir) / "harness").to_dict()
    atomic_write_text(path, json.dumps(nest, sort_keys=True) + "\n")
    return nest


PEELED = (1,)  # iterations LLVM peels off a loop (the first: seen on x86_64 and aarch64 gemm)
FACTORS = (2, 4, 8, 16)  # factors LLVM unrolls (or vectorises) a loop by
# Peeling and partial unrolling are looked for only in loops this long: LLVM unrolls shorter
# constant loops completely, and on short ones extent - 1 or extent / f fits some other loop's
# count too often (benchmarks/loop_names.py: conv2d's 3-tap loops, read as peeled, were not)
REWRITTEN_MIN_EXTENT = 8
# (peeled, factor), the plainest first: as it is, peeled, unrolled, both
_WAYS = [(0, 1), *((p, 1) for p in PEELED), *((p, f) for f in FACTORS for p in (0, *PEELED))]


class LoopLayout:
    """The nest as LLVM left it, read from one run's block counts, and the loops a count fits.

    Walking the iterating loops outermost first, a loop no block count fits (not exactly, not
    with PEELED iterations peeled off, not unrolled by a factor) has no block of its own: LLVM
    unrolled it completely (or vectorised it away), so its body exists in copies, each running
    once per iteration of the loops around it. Inner loops are then fitted per copy: such an
    ancestor counts one iteration instead of its extent.
    """

    def __init__(self, nest: LoopNest, counts: set[int]):
        self.nest = nest
        self.outer: dict[int, int] = {}  # loop -> how often one copy of it is entered per call
        self.flat: set[int] = set()  # loops LLVM unrolled completely
        for i in nest.iterating():
            entered = 1
            for j in nest.path(i)[:-1]:
                entered *= 1 if j in self.flat else nest.iterations(j) or 1
            self.outer[i] = entered
            if not any(self.fit(i, c) for c in counts):
                self.flat.add(i)

    def fit(self, i: int, count: int) -> LoopMatch | None:
        """How a block run `count` times per call is loop i's body, the plainest way: exactly, with
        PEELED iterations peeled off, unrolled by one of FACTORS (a remainder iteration runs
        elsewhere), or both; None when it is not. The body must still loop (2 or more iterations
        per entry): one that runs once per entry belongs to the loop around it."""
        outer, extent = self.outer[i], self.nest.loops[i].extent or 0
        for p, f in _WAYS if extent >= REWRITTEN_MIN_EXTENT else _WAYS[:1]:
            body = (extent - p) // f
            if f < extent and body >= 2 and count == outer * body:
                return LoopMatch(i, count, per_execution=f, peeled=p)
        # the loop around it peeled (its first iteration a copy of its own, with its own copy of
        # this loop): this copy, as it is, runs in the parent's other iterations (riscv64's
        # rfactor nests); not also rewritten itself, which would fit too many counts
        parent = self.nest.loops[i].parent
        if parent is None or parent in self.flat or (self.nest.loops[parent].extent or 0) < REWRITTEN_MIN_EXTENT:
            return None
        around = self.nest.iterations(parent) or 1
        for q in PEELED:
            if extent >= 2 and count == outer // around * (around - q) * extent:
                return LoopMatch(i, count, outer_peeled=q)
        return None

    def rewritten(self, i: int, count: int) -> LoopMatch | None:
        """Loop i's body rewritten some way no plain fit describes (a vector loop with an extra
        trip, a remainder of another size): the count is a whole number of runs per entry of the
        loop, 2 up to its extent. Only for a block the debug information places in loop i
        (judge.attribution): the count alone says too little."""
        outer, extent = self.outer.get(i), self.nest.loops[i].extent or 0
        if outer is None or count % outer:  # a loop read as unrolled completely too: no plain count fit it
            return None
        runs = count // outer
        if not 2 <= runs <= extent:
            return None
        return LoopMatch(i, count, per_execution=max(1, round(extent / runs)), approximate=True)

    def fits(self, count: int) -> list[LoopMatch]:
        """Every loop (LLVM kept) that a block run `count` times per call fits, each the plainest
        way it fits, one per distinct loop (copies merged); empty when the count is 1 (outside
        every loop)."""
        if count < 2:
            return []
        distinct: dict[int, LoopMatch] = {}
        for i in self.outer:
            if i not in self.flat and (m := self.fit(i, count)) is not None:
                distinct.setdefault(self.nest.origin(i), m)
        return list(distinct.values())

    @staticmethod
    def plainness(match: LoopMatch) -> int:
        """0: the count as it is, 1: with iterations peeled off (of it, or of the loop around it),
        2: unrolled by a factor."""
        if match.per_execution > 1:
            return 2
        return 1 if match.peeled or match.outer_peeled else 0

    def matches(self, count: int) -> list[LoopMatch]:
        """The loops a block run `count` times per call fits (fits), those of the plainest kind
        only (exact, else peeled, else unrolled by a factor); empty when none fits."""
        found = self.fits(count)
        plainest = min((self.plainness(m) for m in found), default=0)
        return [m for m in found if self.plainness(m) == plainest]

    def vectorised_inside(self, i: int) -> list[int]:
        """The loops TVM vectorised whose lanes are in loop i's blocks: those directly inside it
        and those inside a loop LLVM unrolled into it (unrolled_inside), outermost first."""
        holders = {i, *self.unrolled_inside(i)}
        return [j for j, loop in enumerate(self.nest.loops) if loop.kind == "vectorized" and loop.parent in holders]

    def unrolled_inside(self, i: int) -> list[int]:
        """The loops inside loop i that LLVM unrolled completely into its blocks: those directly
        inside it, and those inside them in turn (a vectorised column loop inside an unrolled row
        loop is as much in the blocks of i), outermost first."""
        out: list[int] = []
        for j in sorted(self.flat):
            parent = self.nest.loops[j].parent
            if parent == i or parent in out:
                out.append(j)
        return out
