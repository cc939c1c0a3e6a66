"""Verdict agreement: does each model predict the change that one-knob schedule edits really make?

For every pair in benchmarks/verdict_pairs.py, both sides are built and simulated by perfguard
itself (perfguard.job.run.run_job: the build, cache and QEMU-plugin statistics `perfguard
check` uses, for the x86_64 profile of perfguard.toml), and the very harness binaries are timed
natively: pinned to one core, ASLR off, empty environment (perfguard.job.native), in
interleaved rounds (before, after, after, before, ...) so that load from other processes hits
both sides alike. A round during which the other CPUs were busy (perfguard.job.native.time_quietly:
more than --max-neighbour-busy, default 25 % of one CPU, from /proc/stat) is timed again after a
pause: a busy neighbour can shift the ratio itself, through the shared cache and memory, and
interleaving does not cancel that. A pair that finds no quiet round within its budget is not
scored and named. Per pair: the native delta (median over rounds of the ratio of each side's
fastest call), a 95 % bootstrap interval of that median, and each model's predicted delta. Per model: Spearman of the
deltas, missed regressions, false alarms, and sign agreement on clear changes.

Native timings are kept in benchmarks/verdicts-native.json, keyed by the two binaries' hashes:
a pair is timed again only when one of its binaries changed, or with --retime (asking for more
--rounds than are stored times only the missing rounds). A file holds one CPU's timings (the
same binaries' deltas differ between CPUs: a pair timed on another CPU is timed anew): the
committed ones are verdicts-native.json (AMD EPYC, Zen 1, family 23 model 1) and
verdicts-native-intel-6-167.json (an Intel Xeon, family 6 model 167), chosen with --native-file.

With --reference gem5-o3,gem5-minor (on a profile gem5 decodes: --profile x86_64v1, whose
binaries and native timings are its own), gem5's O3 or Minor core runs each side through
perfguard's gem5 back end and is scored like a model by its cycle delta; gem5 results are kept
per binary in benchmarks/verdicts-gem5-PROFILE.json (--gem5-jobs 0 scores only what is stored).

    python benchmarks/verdicts.py [--profile P] [--pairs SUBSTR,..] [--rounds N] [--retime] [--stat min_s|median_s]
                                  [--max-neighbour-busy PCT] [--quiet-budget SECONDS]
                                  [--models a,b] [--reference gem5-o3,gem5-minor] [--gem5-jobs N]
                                  [--json FILE] [-j N]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import time as _time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(REPO))

from benchmarks.verdict_pairs import PAIRS, Pair  # noqa: E402
from perfguard import jsonfile, machines
from perfguard.atomic import atomic_write_text
from perfguard.compile.cache import BuildCache
from perfguard.config import Config, KernelSpec, load_config
from perfguard.errors import InfraError, InputError, PerfguardError
from perfguard.executors.local import LocalExecutor
from perfguard.job.native import (
    PROCESSES,
    ProcessRun,
    QuietBudget,
    QuietPolicy,
    add_quiet_options,
    check_native,
    pick_cpu,
    this_machine,
    time_calls,
    time_process,
    time_quietly,
)
from perfguard.job.run import Job, JobResult, run_job
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.select import (
    auto_uses,
    calibrated_model,
    kernel_dtype,
    predictor_for,
    trained_dtypes,
)
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

TARGET = "x86_64"
NATIVE_FILE = REPO / "benchmarks" / "verdicts-native.json"
NATIVE_SCHEMA = 1

# The verdict rules, as fractions.
REGRESSION = 0.10  # native at least +10 %: a regression the gate must flag
GATE = 0.05  # a predicted change above +5 % flags
NEUTRAL = 0.025  # native at most +2.5 %: flagging it is a false alarm
CLEAR = 0.10  # |native| above 10 %: the predicted sign must agree
LARGE = 0.50  # native at least +50 %: a large slowdown, whose size must be right ...
LARGE_FACTOR = 1.3  # ... within this factor of the native time ratio

BATCH_SECONDS = 0.04  # kernel time per side per round
MIN_CALLS = 10  # calls per side per round, however slow the kernel
# Per round, each side's time is its fastest call. Load from other processes only adds time, and
# it adds more to long calls (a 3 ms call is preempted far more often than a 0.1 ms one), so the
# median call inflates the slow side of a pair even in interleaved rounds; the fastest of
# MIN_CALLS or more calls is the time without interruptions. The median is stored too (--stat median_s).
STATS = ("min_s", "median_s")
BOOTSTRAP = 2000
GEM5_TIMEOUT = 6 * 3600.0  # both gem5 runs of one side: O3 runs well under 1 MIPS


# --- the pairs, built and simulated by perfguard ---


@dataclass(frozen=True)
class Side:
    """One built and simulated side of a pair."""

    spec: KernelSpec
    result: JobResult
    binary: Path

    @property
    def stats(self) -> Stats:
        return self.result.stats


def _side_key(spec: KernelSpec) -> str:
    return json.dumps([spec.family, spec.params], sort_keys=True)


def build_sides(
    pairs: list[Pair],
    config: Config,
    profile: TargetProfile,
    workers: int | None = None,
    simulator: str = "qemu",
    code_offset: int = 0,
) -> dict[str, tuple[Side, Side]]:
    """pair name -> (before, after); each distinct kernel is built and simulated once (`code_offset`:
    bytes of padding linked before the kernel's code, perfguard.job.run.Job's)."""
    unique: dict[str, KernelSpec] = {}
    for pair in pairs:
        for spec in pair.sides():
            unique.setdefault(_side_key(spec), spec)
    sim = config.simulation
    jobs = [
        Job(
            spec,
            profile,
            config.root,
            config.storage.cache_dir,
            simulator,
            sim.timeout,
            sim.reps,
            sim.warmup,
            code_offset=code_offset,
        )
        for spec in unique.values()
    ]
    results = LocalExecutor(workers).map(run_job, jobs)
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise SystemExit(f"verdicts: {len(failed)} of {len(jobs)} kernels failed; first: {failed[0]}")
    cache = BuildCache(config.storage.cache_dir)
    sides = {}
    for key, spec, result in zip(unique, unique.values(), results):
        sides[key] = Side(spec, result, cache.lookup_build(result.content_hash) / "harness")
    return {pair.name: tuple(sides[_side_key(spec)] for spec in pair.sides()) for pair in pairs}  # type: ignore[misc]


# --- native timing: interleaved rounds ---


def time_pair(
    before: Path,
    after: Path,
    rounds: int,
    cpu: int,
    where: str,
    reps: dict[str, int] | None = None,
    first: int = 0,
    timeout: float = 600.0,
    processes: int = 1,
    quiet: QuietPolicy = QuietPolicy(),
    budget: QuietBudget | None = None,
) -> dict:
    """Per round and side, the fastest and the median call; the order alternates (AB, BA, AB, ...).

    With `processes` > 1 each side runs in that many separate harness processes per round, the
    sides alternating process by process (A B A B ... in one round, B A B A ... in the next): a
    side's round time is then the median over its processes of each one's fastest (and median)
    call, and the round keeps each process's figures and involuntary context switches.
    `reps` (calls per side per process) is probed when not given; `first` continues the
    alternation of rounds timed before.

    Each round is a `perfguard.job.native.time_quietly` round: one during which the other CPUs were
    busier than `quiet` allows is timed again after a pause and lands in "rejected_rounds" with
    its load, never in the scores; a kept round records its "neighbour_load" (CPUs busy beside the
    pinned one; None where /proc/stat is unreadable). When a round finds no quiet try within the
    policy's limits (`budget`: shared by the pair's attempts), timing stops there: the record
    keeps the rounds timed so far and the reason in "not_quiet".
    """
    if reps is None:
        reps = {}
        for side, binary in (("before", before), ("after", after)):
            probe = min(time_calls(binary, 3, 1, cpu, timeout, f"{where} ({side})"))
            reps[side] = int(min(2000, max(MIN_CALLS, BATCH_SECONDS / max(probe, 1e-7))))
    budget = QuietBudget(quiet.budget_s) if budget is None else budget
    load = [os.getloadavg()[0]]

    def one_round(r: int) -> Callable[[], dict]:
        def run() -> dict:
            order = (("before", before), ("after", after))
            runs: dict[str, list[ProcessRun]] = {"before": [], "after": []}
            for k in range(processes):
                for side, binary in order if (r + k) % 2 == 0 else order[::-1]:
                    runs[side].append(time_process(binary, reps[side], 2, cpu, timeout, f"{where} ({side})"))
            out = {}
            for side, got in runs.items():
                record = {
                    "median_s": statistics.median(p.median_s for p in got),
                    "min_s": statistics.median(p.min_s for p in got),
                }
                if processes > 1:
                    record["processes"] = [[p.min_s, p.median_s, p.preempted] for p in got]
                out[side] = record
            return out

        return run

    kept: list[dict] = []
    rejected: list[dict] = []
    not_quiet = ""
    for r in range(first, first + rounds):
        got = time_quietly(one_round(r), cpu, quiet, budget)
        rejected += [{**sides, "round": r, "neighbour_load": busy} for sides, busy in got.rejected]
        if got.kept is None:
            not_quiet = got.not_quiet
            break
        kept.append({**got.kept, "neighbour_load": got.load})
    load.append(os.getloadavg()[0])
    out = {
        "reps": reps,
        "rounds": kept,
        "loadavg": load,
        "cpu": cpu,
        "neighbour_bound": quiet.bound,
        "rejected_rounds": rejected,
    }
    if processes > 1:
        out["processes"] = processes
    if not_quiet:
        out["not_quiet"] = not_quiet
    return out


MAX_SPREAD = 0.03  # a pair whose per-round ratios spread more (robust CV) is timed again
ATTEMPTS = 3  # timings of a pair at most; the steadiest is kept


def time_steadily(
    before: Path,
    after: Path,
    rounds: int,
    cpu: int,
    where: str,
    processes: int,
    max_spread: float,
    attempts: int,
    log=print,
    quiet: QuietPolicy = QuietPolicy(),
) -> dict:
    """`time_pair`, again while the per-round ratios spread more than `max_spread` (robust CV), at
    most `attempts` times; the steadiest timing is kept, with every attempt's spread and whether
    the last one was within the bound (`steady`). The attempts share one budget for rounds
    rejected because the other CPUs were busy; an attempt that runs out of it ends the timing:
    the pair is not steady, "not_quiet" says why, and the steadiest complete attempt is kept
    (else the rounds of the cut one). Every attempt's rejected rounds are kept in the record."""
    budget = QuietBudget(quiet.budget_s)
    best, spreads, rejected, not_quiet = None, [], [], ""
    for attempt in range(1, attempts + 1):
        record = time_pair(before, after, rounds, cpu, where, processes=processes, quiet=quiet, budget=budget)
        rejected += record.pop("rejected_rounds")
        not_quiet = record.pop("not_quiet", "")
        if not_quiet:
            log(
                f"{where}: {not_quiet}: "
                + (
                    "keeping the steadiest earlier attempt"
                    if best is not None
                    else f"{len(record['rounds'])} of {rounds} rounds kept, not scored"
                )
            )
            best = record if best is None else best
            break
        spread = native_delta(record).spread
        spreads.append(round(spread, 6))
        if best is None or spread < native_delta(best).spread:
            best = record
        if spread <= max_spread:
            break
        log(
            f"{where}: per-round spread {100 * spread:.1f} % > {100 * max_spread:.1f} %: "
            + ("timing it again" if attempt < attempts else "keeping the steadiest of the attempts")
        )
    assert best is not None
    best.update(
        spreads=spreads,
        max_spread=max_spread,
        steady=not not_quiet and min(spreads) <= max_spread,
        rejected_rounds=rejected,
    )
    if not_quiet:
        best["not_quiet"] = not_quiet
    return best


@dataclass(frozen=True)
class NativeDelta:
    delta: float  # after / before - 1: median of the per-round ratios
    low: float  # 95 % bootstrap interval of that median
    high: float
    spread: float  # robust CV of the per-round ratios
    rounds: int

    @property
    def halfwidth(self) -> float:
        """Half the interval, relative to the ratio: the noise of a +1000 % pair in its own terms."""
        return (self.high - self.low) / 2 / (1.0 + self.delta)


def native_delta(record: dict, stat: str = "min_s", seed: int = 0) -> NativeDelta:
    """`stat` is the per-round time of a side: its fastest call ("min_s", the default) or its median call."""
    ratios = np.array([r["after"][stat] / r["before"][stat] for r in record["rounds"]])
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(ratios, size=(BOOTSTRAP, len(ratios)), replace=True), axis=1)
    med = float(np.median(ratios))
    mad = float(np.median(np.abs(ratios - med)))
    return NativeDelta(
        med - 1.0,
        float(np.percentile(boot, 2.5)) - 1.0,
        float(np.percentile(boot, 97.5)) - 1.0,
        1.4826 * mad / med,
        len(ratios),
    )


def native_key(before: Side, after: Side) -> str:
    return f"{before.result.binary_hash}:{after.result.binary_hash}"


def native_file_for(profile: str) -> Path:
    """The stored timings of a profile's binaries: each profile builds other binaries."""
    return NATIVE_FILE if profile == TARGET else NATIVE_FILE.with_name(f"verdicts-native-{profile}.json")


def load_native(path: Path) -> dict:
    if not path.is_file():
        return {"schema": NATIVE_SCHEMA, "pairs": {}}
    try:
        data = jsonfile.read(path, "corrupted native timings file", str(path))
    except InputError as exc:
        raise SystemExit(f"verdicts: {exc.message}; fix it or use --retime with another --native-file") from None
    if not isinstance(data, dict) or not isinstance(data.get("pairs"), dict):
        raise SystemExit(f"verdicts: {path}: not a native timings file (no 'pairs' object)")
    if data.get("schema") != NATIVE_SCHEMA:
        raise SystemExit(f"{path}: schema {data.get('schema')!r}, this benchmark reads {NATIVE_SCHEMA}; use --retime")
    return data


def save_native(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def time_pairs(
    pairs: list[Pair],
    sides: dict[str, tuple[Side, Side]],
    path: Path,
    rounds: int,
    retime: bool,
    cpu: int,
    profile: TargetProfile,
    log=print,
    timing: bool = True,
    processes: int = PROCESSES,
    max_spread: float = MAX_SPREAD,
    attempts: int = ATTEMPTS,
    quiet: QuietPolicy = QuietPolicy(),
) -> dict[str, dict]:
    """pair name -> its timing record: from the file when both binaries are unchanged (topped up to
    `rounds` rounds if it has fewer), else timed now. With `timing` False nothing is timed: a pair
    with no stored record for its binaries is left out (and named), one with fewer rounds is
    scored on the rounds it has. A stored record that was not quiet ("not_quiet": a busy
    neighbour cut it short) is timed anew."""
    data = load_native(path)
    if not timing:
        out = {}
        for pair in pairs:
            stored = data["pairs"].get(native_key(*sides[pair.name]))
            if stored is None:
                log(f"{pair.name}: no stored timing for these binaries (--no-timing): left out")
            else:
                out[pair.name] = stored
        return out
    check_native(profile)
    machine = this_machine().to_dict()
    out = {}
    for i, pair in enumerate(pairs, 1):
        before, after = sides[pair.name]
        key = native_key(before, after)
        stored = None if retime else data["pairs"].get(key)
        stored_cpu = (stored or {}).get("machine", {}).get("cpu_id")
        if stored is not None and stored_cpu and stored_cpu != machine["cpu_id"] and len(stored["rounds"]) < rounds:
            log(
                f"[{i}/{len(pairs)}] {pair.name} was timed on {stored_cpu}, this is {machine['cpu_id']}: timing it anew"
            )
            stored = None  # rounds from two CPUs are not one measurement
        if stored is not None and stored.get("not_quiet"):
            log(f"[{i}/{len(pairs)}] {pair.name} was cut short by busy neighbours last time: timing it anew")
            stored = None
        have = 0 if stored is None else len(stored["rounds"])
        if have < rounds:
            log(f"[{i}/{len(pairs)}] timing {pair.name} ({rounds - have} rounds)")
            now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
            if stored is None:
                stored = time_steadily(
                    before.binary, after.binary, rounds, cpu, pair.name, processes, max_spread, attempts, log, quiet
                )
                stored.update(pair=pair.name, machine=machine, timed=[now])
            else:  # more rounds of the same binaries, same calls per round, alternation continued
                more = time_pair(
                    before.binary,
                    after.binary,
                    rounds - have,
                    cpu,
                    pair.name,
                    stored["reps"],
                    have,
                    processes=stored.get("processes", 1),
                    quiet=quiet,
                )
                stored["rounds"] += more["rounds"]
                stored["loadavg"] += more["loadavg"]
                stored["timed"].append(now)
                stored["neighbour_bound"] = quiet.bound
                stored["rejected_rounds"] = stored.get("rejected_rounds", []) + more["rejected_rounds"]
                if more.get("not_quiet"):
                    log(f"{pair.name}: {more['not_quiet']}: not scored")
                    stored.update(steady=False, not_quiet=more["not_quiet"])
            data["pairs"][key] = stored
            save_native(path, data)  # after each pair: an interrupted run keeps what it measured
        out[pair.name] = data["pairs"][key]
    return out


# --- gem5 timing CPUs as references ---

# reference name -> gem5 CPU type. A reference's delta is that of the simulated core cycles of
# one call, not a model of perfguard's statistics, so it lives beside MODELS, not in it.
GEM5_REFERENCES = {"gem5-o3": "o3", "gem5-minor": "minor"}
GEM5_SCHEMA = 1


def gem5_file_for(profile: str) -> Path:
    return NATIVE_FILE.with_name(f"verdicts-gem5-{profile}.json")


def cycles_of(dump: dict) -> int:
    """Core cycles of a gem5 dump: `<cpu>.numCycles` of its one CPU."""
    found = [value for name, value in dump.items() if name.endswith(".numCycles") and ".cpu" in name]
    if len(found) != 1:
        raise InfraError(f"gem5 statistics: expected one CPU numCycles, found {len(found)}")
    return int(found[0])


@dataclass(frozen=True)
class Gem5Run:
    """One side simulated by a gem5 timing CPU: the two runs of perfguard's gem5 back end, whose
    difference in cycles is the cycles of `reps` warm calls."""

    binary: Path
    profile: TargetProfile
    cpu_type: str
    cache_dir: Path
    reps: int
    warmup: int
    timeout: float


def gem5_cycles(run: Gem5Run) -> dict:
    """Cycles per call, the kernel's instructions per call, and what the two runs cost."""
    from perfguard.sim.gem5 import Gem5Simulator, parse_stats

    sim = Gem5Simulator(run.cache_dir, cpu_type=run.cpu_type, keep_outputs=True)
    start = _time.monotonic()
    result = sim.run(run.binary, run.profile, [str(run.reps), str(run.warmup)], run.timeout)
    wall = _time.monotonic() - start
    work = sim.last_run_dir
    assert work is not None
    try:
        cycles = [cycles_of(parse_stats(work / f"reps{r}" / "m5out" / "stats.txt")[-1]) for r in (run.reps, 0)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "cycles": (cycles[0] - cycles[1]) / run.reps,
        "insts": result.stats.insts / run.reps,
        "cycles_runs": cycles,
        "sim_insts": result.total_insts,
        "wall_s": round(wall, 1),
    }


def gem5_key(cpu_type: str, binary_hash: str, fingerprint: str) -> str:
    return f"{cpu_type}:{binary_hash}:{hashlib.sha256(fingerprint.encode()).hexdigest()[:16]}"


def load_gem5(path: Path) -> dict:
    if not path.is_file():
        return {"schema": GEM5_SCHEMA, "runs": {}}
    data = jsonfile.read(path, "corrupted gem5 results file", str(path))
    if not isinstance(data, dict) or data.get("schema") != GEM5_SCHEMA or not isinstance(data.get("runs"), dict):
        raise SystemExit(f"verdicts: {path}: not a gem5 results file of schema {GEM5_SCHEMA}")
    return data


def gem5_references(
    pairs: list[Pair],
    sides: dict[str, tuple[Side, Side]],
    profile: TargetProfile,
    config: Config,
    references: list[str],
    path: Path,
    jobs: int,
    log=print,
) -> dict[str, dict[str, dict]]:
    """reference -> pair name -> {"before": run, "after": run}; simulates what `path` lacks (none with
    jobs 0), pair by pair (both sides at once with jobs >= 2), saving after every side so an
    interrupted run keeps what it has."""
    from perfguard.sim.gem5 import Gem5Simulator

    data = load_gem5(path)
    todo: list[tuple[str, Side, Gem5Run]] = []
    keys: dict[tuple[str, str], str] = {}
    fingerprints = {
        ref: Gem5Simulator(config.storage.cache_dir, cpu_type=GEM5_REFERENCES[ref]).fingerprint(profile)
        for ref in references
    }
    for pair in pairs:  # pair by pair, every reference: a run cut short still compares them on the same pairs
        for ref in references:
            cpu_type, fingerprint = GEM5_REFERENCES[ref], fingerprints[ref]
            for side in sides[pair.name]:
                key = gem5_key(cpu_type, side.result.binary_hash, fingerprint)
                keys[(ref, side.result.binary_hash)] = key
                if key not in data["runs"] and all(k != key for k, _, _ in todo):
                    todo.append(
                        (
                            key,
                            side,
                            Gem5Run(
                                side.binary,
                                profile,
                                cpu_type,
                                config.storage.cache_dir / "gem5ref",
                                config.simulation.reps,
                                config.simulation.warmup,
                                GEM5_TIMEOUT,
                            ),
                        )
                    )
    if todo and jobs < 1:  # score what is stored: a long run in the background fills the file
        log(f"gem5: {len(todo)} simulations missing, not run (--gem5-jobs 0); their pairs are unscored")
        todo = []
    elif todo:
        log(f"gem5: {len(todo)} simulations to run ({jobs} at a time)")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # gem5 is a child process: threads suffice
        futures = {pool.submit(gem5_cycles, run): (key, side, run) for key, side, run in todo}
        for done, future in enumerate(as_completed(futures), 1):
            key, side, run = futures[future]
            try:
                record = future.result()
            except PerfguardError as exc:  # that side stays unsimulated, its pair unscored; the rest go on
                log(f"[{done}/{len(todo)}] gem5 {run.cpu_type} {side.spec.name} failed: {exc.message}")
                continue
            record.update(kernel=side.spec.name, cpu_type=run.cpu_type, qemu_insts=side.stats.insts)
            data["runs"][key] = record
            atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
            log(
                f"[{done}/{len(todo)}] gem5 {run.cpu_type} {side.spec.name}: {record['cycles']:.0f} cycles, "
                f"{record['wall_s']:.0f} s"
            )
    out: dict[str, dict[str, dict]] = {}
    for ref in references:
        out[ref] = {}
        for pair in pairs:
            got = [data["runs"].get(keys[(ref, s.result.binary_hash)]) for s in sides[pair.name]]
            if all(got):
                out[ref][pair.name] = {"before": got[0], "after": got[1]}
    return out


def reference_deltas(pairs: list[Pair], runs: dict[str, dict[str, dict]]) -> dict[str, dict[str, float | None]]:
    """reference -> pair name -> cycles after / before - 1 (None: not simulated)."""
    return {
        ref: {
            p.name: (got[p.name]["after"]["cycles"] / got[p.name]["before"]["cycles"] - 1.0 if p.name in got else None)
            for p in pairs
        }
        for ref, got in runs.items()
    }


# --- the models, by name ---


def _insts(profile: TargetProfile, family: str, sides: list[Side], config: Config) -> np.ndarray:
    """Not a model: the instruction count alone, the yardstick every model should beat."""
    return np.array([float(s.stats.insts) for s in sides])


def _analytical(profile: TargetProfile, family: str, sides: list[Side], config: Config) -> np.ndarray:
    return AnalyticalModel(profile).predict_stats([s.stats for s in sides])


def _machine(config: Config, profile: TargetProfile):
    """The machine profile the config's target chose (None: none)."""
    name = config.machines.get(profile.name)
    return None if name is None else machines.load(name)


def _stored_calibrated(profile: TargetProfile, family: str, config: Config, dtype: str):
    """The family's committed calibrated model (the project's, else its machine profile's), whether
    or not `auto` uses it (None: there is none, or it was not trained on this dtype, which perfguard
    would not score with it either)."""
    from perfguard.predict.calibrated import CalibratedModel

    stored, _ = calibrated_model(config.storage.baseline_dir, profile, family, None, _machine(config, profile))
    if stored is None or dtype not in trained_dtypes(stored.meta):
        return None
    return CalibratedModel(stored.predictor, profile, config.storage.cache_dir)


def _calibrated(profile: TargetProfile, family: str, sides: list[Side], config: Config) -> np.ndarray | None:
    model = _stored_calibrated(profile, family, config, kernel_dtype(sides[0].spec.params))
    if model is None:
        return None  # n/a: no calibrated model for this family and dtype
    return model.predict_stats([s.stats for s in sides])


def _pipeline(profile: TargetProfile, family: str, sides: list[Side], config: Config) -> np.ndarray:
    from perfguard.predict.pipeline import PipelineModel

    return PipelineModel(profile, config.storage.cache_dir).predict_stats([s.stats for s in sides])


def _check(profile: TargetProfile, family: str, sides: list[Side], config: Config) -> np.ndarray:
    """What `perfguard check` scores with under the config's `model` setting (auto: the committed
    calibrated model of the family where there is one, else the pipeline model): the verdicts users get."""
    # with the kernel's params, as check passes them: a model scores only the dtypes it was trained on
    predictor = predictor_for(
        profile,
        family,
        "qemu",
        config.storage.baseline_dir,
        None,
        config.storage.cache_dir,
        config.judging.model,
        params=sides[0].spec.params,
        machine=_machine(config, profile),
    )
    return predictor.predict_stats([s.stats for s in sides])


# name -> predict(profile, family, sides, config) -> seconds per side, or None when it cannot score the family
MODELS: dict[str, Callable[..., np.ndarray | None]] = {
    "insts": _insts,
    "analytical": _analytical,
    "calibrated": _calibrated,
}
if importlib.util.find_spec("perfguard.predict.pipeline") is not None:  # the pipeline model, where this tree has it
    MODELS["pipeline"] = _pipeline
    MODELS["check"] = _check


def predicted_deltas(
    pairs: list[Pair],
    sides: dict[str, tuple[Side, Side]],
    profile: TargetProfile,
    config: Config,
    models: list[str],
    errors: dict[str, dict[str, str]] | None = None,
) -> dict[str, dict[str, float | None]]:
    """model -> pair name -> predicted after / before - 1 (None: the model cannot score it).

    With `errors`, a model that fails on a pair (llvm-mca on a block, an unusable model file)
    leaves that pair unscored and its message lands in errors[model][pair]; without, it raises.
    """
    out: dict[str, dict[str, float | None]] = {}
    for model in models:
        out[model] = {}
        for pair in pairs:
            try:
                times = MODELS[model](profile, pair.family, list(sides[pair.name]), config)
            except PerfguardError as exc:
                if errors is None:
                    raise
                errors.setdefault(model, {})[pair.name] = exc.message
                times = None
            out[model][pair.name] = None if times is None else float(times[1] / times[0] - 1.0)
    return out


# --- calibrated intervals (perfguard.predict.intervals) from the pairs' residuals ---

# Which column calibrates which kind of model: the pipeline and analytical models on every pair,
# each calibrated model on the pairs of its family (the `calibrated` column).
INTERVAL_COLUMNS = ("pipeline", "analytical", "calibrated")


def scoring_model(
    model: str, profile: TargetProfile, family: str, config: Config, dtype: str = "float32"
) -> tuple[str, bool] | None:
    """(model_id, calibrated) of the model a column scores a family with; None where it has none."""
    if model == "analytical":
        return AnalyticalModel(profile).model_id, False
    if model == "pipeline":
        from perfguard.predict.pipeline import PipelineModel

        return PipelineModel(profile, config.storage.cache_dir).model_id, False
    if model == "calibrated":
        predictor = _stored_calibrated(profile, family, config, dtype)
        return None if predictor is None else (predictor.model_id, True)
    return None


@dataclass(frozen=True)
class Residual:
    pair: str
    family: str
    index: int  # the pair's position in verdict_pairs.PAIRS: even and odd halves
    predicted: float  # ratio after / before
    native: float


def interval_residuals(
    pairs: list[Pair],
    profile: TargetProfile,
    config: Config,
    native: dict[str, float],
    predicted: dict[str, dict[str, float | None]],
) -> dict[tuple[str, str, str], list[Residual]]:
    """(target, model_id, kind) -> the residuals of that model on the pairs it scored."""
    from perfguard.predict.intervals import model_kind

    index = {p.name: i for i, p in enumerate(PAIRS)}
    out: dict[tuple[str, str, str], list[Residual]] = {}
    for model in INTERVAL_COLUMNS:
        if model not in predicted:
            continue
        for pair in pairs:
            value = predicted[model].get(pair.name)
            dtype = kernel_dtype(pair.sides()[0].params)
            who = scoring_model(model, profile, pair.family, config, dtype) if value is not None else None
            if who is None or not value > -1.0:
                continue
            key = (profile.name, who[0], model_kind(*who))
            out.setdefault(key, []).append(
                Residual(pair.name, pair.family, index.get(pair.name, -1), 1.0 + value, 1.0 + native[pair.name])
            )
    return out


def coverage_table(residuals: dict[tuple[str, str, str], list[Residual]], level: float) -> dict[str, dict]:
    """Held-out coverage of each model's intervals, by three procedures (none scores a pair with a
    quantile that pair helped set):
    - leave one pair out: each pair against the quantile of the model's other pairs;
    - halves: pairs at even positions of verdict_pairs.PAIRS calibrate and the odd ones are
      scored, then the other way round;
    - leave one family out: each family's pairs against the quantile of the other families'
      (models that score every family: the pipeline and analytical models).
    Also the median interval width (high / low ratio) on the pairs, with the quantile of all pairs."""
    from perfguard.predict.intervals import conformal_quantile, coverage, ratio_bounds, score

    def covered(calib: list[Residual], test: list[Residual]) -> tuple[int, int]:
        q = conformal_quantile([score(r.predicted, r.native) for r in calib], level)
        return coverage([(r.predicted, r.native) for r in test], q)

    def add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return a[0] + b[0], a[1] + b[1]

    out = {}
    for (target, model_id, kind), rows in residuals.items():
        loo = (0, 0)
        for i, r in enumerate(rows):
            loo = add(loo, covered(rows[:i] + rows[i + 1 :], [r]))
        even = [r for r in rows if r.index % 2 == 0]
        odd = [r for r in rows if r.index % 2 == 1]
        halves = add(covered(even, odd), covered(odd, even))
        families = sorted({r.family for r in rows})
        lofo = (0, 0)
        if len(families) > 1:
            for f in families:
                lofo = add(lofo, covered([r for r in rows if r.family != f], [r for r in rows if r.family == f]))
        q = conformal_quantile([score(r.predicted, r.native) for r in rows], level)
        widths = (
            sorted(ratio_bounds(r.predicted, q)[1] / ratio_bounds(r.predicted, q)[0] for r in rows)
            if q != float("inf")
            else []
        )
        out[f"{kind} {model_id} ({target})"] = {
            "pairs": len(rows),
            "quantile": q,
            "leave_one_pair_out": loo,
            "halves": halves,
            "leave_one_family_out": lofo if len(families) > 1 else None,
            "median_width_ratio": statistics.median(widths) if widths else None,
            "misses": [r.pair for r in rows if not covered([x for x in rows if x is not r], [r])[0]],
        }
    return out


def coverage_markdown(table: dict[str, dict], level: float) -> str:
    def share(got: tuple[int, int] | None) -> str:
        return "n/a" if not got else f"{got[0]} / {got[1]} ({100 * got[0] / got[1]:.1f} %)"

    lines = [
        f"| model | pairs | q ({100 * level:.0f} %) | leave one pair out | halves (even <-> odd) | "
        "leave one family out | median high/low ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in table.items():
        width = "n/a" if row["median_width_ratio"] is None else f"{row['median_width_ratio']:.3f}"
        lines.append(
            f"| {name} | {row['pairs']} | {row['quantile']:.3f} | {share(row['leave_one_pair_out'])} | "
            f"{share(row['halves'])} | {share(row['leave_one_family_out'])} | {width} |"
        )
    for name, row in table.items():
        if row["misses"]:
            lines.append(f"\n{name}, not covered (leave one pair out): " + ", ".join(f"`{m}`" for m in row["misses"]))
    return "\n".join(lines)


# A machine's model may lose to the pipeline model on its family's pairs by this much Spearman.
CARRY_SPEARMAN_SLACK = 0.02


def carried(meta: dict, calibrated: set[str], family: dict[str, Summary]) -> str:
    """Why a trained model is not carried by its machine's profile ("": it is). It is carried when
    `model = "auto"` would use it (its nested leave-one-shape-out decision), its family's pairs on
    this CPU are enough to calibrate its interval, and on them it misses no more regressions and
    raises no more false alarms than the pipeline model, at a Spearman at most 0.02 lower: pairs
    whose shapes it was never trained on decide, since better rankings of schedules within a
    shape need not mean better deltas of one-knob edits on another."""
    if not auto_uses(meta):
        return "`auto` does not use it (it did not beat the pipeline model on held-out shapes)"
    if meta["model_id"] not in calibrated:
        return "too few pairs of its family to calibrate its interval"
    own, pipe = family.get("calibrated"), family.get("pipeline")
    if own is None or pipe is None or own.spearman is None or pipe.spearman is None:
        return "its family's pairs were not scored"
    errors, pipe_errors = len(own.missed) + len(own.false_alarms), len(pipe.missed) + len(pipe.false_alarms)
    if errors > pipe_errors or own.spearman < pipe.spearman - CARRY_SPEARMAN_SLACK:
        return (
            f"on its family's {own.n} pairs it loses to the pipeline model: Spearman {own.spearman:.2f} against "
            f"{pipe.spearman:.2f}, {errors} missed or false alarms against {pipe_errors}"
        )
    return ""


def write_machine_profile(
    path: Path,
    isa: str,
    calibration,
    timed_on: list[dict],
    models_dir: Path | None = None,
    families: dict[str, dict[str, Summary]] | None = None,
) -> None:
    """The machine profile (perfguard.machines) of the one CPU the pairs were timed on: this ISA's
    section from `calibration`, the file's other ISAs kept. Timings from two CPUs make no profile.
    `models_dir`: the calibrated models (FAMILY.json, trained on this CPU's runs) offered to the
    profile; those `carried` are copied to PROFILE/ISA/ beside it (`families`: the pair summaries
    per family and model that decide)."""
    from perfguard import machines as profiles

    ids = {profiles.CpuIdentity.parse(m.get("cpu_id", ""), m.get("cpu", "")) for m in timed_on}
    if len(ids) != 1:
        raise SystemExit(
            f"verdicts: --machine-profile: the pairs were timed on {len(ids)} CPUs "
            f"({'; '.join(sorted(c.describe() for c in ids))}); a profile is one CPU's"
        )
    cpu = ids.pop()
    isas = {}
    if path.exists():
        old = profiles.load(path.stem, path.parent)
        if old.cpu != cpu:
            raise SystemExit(
                f"verdicts: --machine-profile: {path} is {old.cpu.describe()}, these timings {cpu.describe()}"
            )
        isas = dict(old.isas)
    source = {k: v for k, v in calibration.source.items() if k != "machines"}
    models = isas[isa].models if isa in isas else {}
    if models_dir is not None:
        models = {}
        calibrated = {e.model_id for e in calibration.entries if e.kind == "calibrated"}
        for file in sorted(models_dir.glob("*.json")):
            meta = json.loads(file.read_text())
            why = carried(meta, calibrated, (families or {}).get(file.stem, {}))
            print(f"{file.stem}: {meta['model_id']} " + (f"left out: {why}" if why else "carried by the profile"))
            if why:
                continue
            copy = path.parent / path.stem / isa / file.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(copy, file.read_text())
            models[file.stem] = profiles.model_entry(path.parent, copy, meta["model_id"])
    isas[isa] = profiles.IsaCalibration(
        isa, source["pairs"], tuple(e.to_dict() for e in calibration.entries), source, models
    )
    date = max(m.get("date", "") for m in timed_on)
    profiles.save(path, profiles.to_json(cpu, date, calibration.level, calibration.scale, isas))


# --- the summary ---


@dataclass
class Summary:
    n: int
    spearman: float | None
    missed: list[str] = field(default_factory=list)  # native >= +10 %, predicted <= +5 %
    false_alarms: list[str] = field(default_factory=list)  # native <= +2.5 %, predicted > +5 %
    sign_agree: int = 0  # on |native| > 10 %
    sign_total: int = 0
    # large slowdowns (native >= +50 %): pair -> predicted time ratio over native time ratio
    large: dict[str, float] = field(default_factory=dict)

    @property
    def large_within(self) -> int:
        return sum(1 / LARGE_FACTOR <= f <= LARGE_FACTOR for f in self.large.values())

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "spearman": self.spearman,
            "missed": self.missed,
            "false_alarms": self.false_alarms,
            "sign_agree": self.sign_agree,
            "sign_total": self.sign_total,
            "large": self.large,
            "large_within": self.large_within,
        }


def summarize(native: dict[str, float], predicted: dict[str, float | None]) -> Summary:
    """The issue's measures over the pairs the model scored."""
    from scipy.stats import spearmanr

    names = [n for n in native if predicted.get(n) is not None]
    x = [native[n] for n in names]
    y = [predicted[n] for n in names]
    rho = float(spearmanr(x, y).statistic) if len(names) > 2 else None
    s = Summary(len(names), rho)
    for name, nat, pred in zip(names, x, y):
        if nat >= REGRESSION and pred <= GATE:
            s.missed.append(name)
        if nat <= NEUTRAL and pred > GATE:
            s.false_alarms.append(name)
        if abs(nat) > CLEAR:
            s.sign_total += 1
            s.sign_agree += int(np.sign(nat) == np.sign(pred))
        if nat >= LARGE:
            s.large[name] = (1.0 + pred) / (1.0 + nat)
    return s


def tracking_error(native: dict[str, float], predicted: dict[str, float | None]) -> float:
    """Median over the scored pairs of |ln((1 + predicted) / (1 + native))|: 0.1 is about 10 % off."""
    errors = [abs(np.log((1.0 + predicted[n]) / (1.0 + d))) for n, d in native.items() if predicted.get(n) is not None]
    return float(np.median(errors)) if errors else float("nan")


# --- output ---


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} %"


def markdown(
    pairs: list[Pair],
    native: dict[str, NativeDelta],
    predicted: dict[str, dict[str, float | None]],
    summaries: dict[str, Summary],
) -> str:
    models = list(predicted)
    head = ["pair", "kind", "native", "95 % interval", "± (of the ratio)"] + models
    lines = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    for pair in pairs:
        n = native[pair.name]
        cells = [
            f"`{pair.name}`",
            pair.kind,
            _pct(n.delta),
            f"{100 * n.low:+.1f} .. {100 * n.high:+.1f}",
            f"{100 * n.halfwidth:.1f} %",
        ]
        cells += [_pct(predicted[m][pair.name]) for m in models]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| model | pairs scored | Spearman of deltas | missed regressions | false alarms | "
        f"sign agreement (native change > 10 %) | large slowdowns (native >= +{100 * LARGE:.0f} %) "
        f"within x{LARGE_FACTOR} | their predicted / native time ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, s in summaries.items():
        rho = "n/a" if s.spearman is None else f"{s.spearman:.3f}"
        factors = sorted(s.large.values())
        span = f"{factors[0]:.2f} .. {factors[-1]:.2f}" if factors else "n/a"
        lines.append(
            f"| {model} | {s.n} | {rho} | {len(s.missed)} | {len(s.false_alarms)} | "
            f"{s.sign_agree} / {s.sign_total} | {s.large_within} / {len(s.large)} | {span} |"
        )
    for model, s in summaries.items():
        for label, names in (("missed", s.missed), ("false alarms", s.false_alarms)):
            if names:
                lines.append(f"\n{model}, {label}: " + ", ".join(f"`{n}`" for n in names))
    return "\n".join(lines)


def by_family(
    pairs: list[Pair], native: dict[str, float], predicted: dict[str, dict[str, float | None]]
) -> dict[str, dict[str, Summary]]:
    """family -> model -> the summary over that family's pairs."""
    out: dict[str, dict[str, Summary]] = {}
    for family in dict.fromkeys(p.family for p in pairs):
        names = [p.name for p in pairs if p.family == family]
        out[family] = {m: summarize({n: native[n] for n in names}, predicted[m]) for m in predicted}
    return out


def family_markdown(families: dict[str, dict[str, Summary]]) -> str:
    """Spearman (missed, false alarms) per family and model."""
    models = list(next(iter(families.values())))
    lines = [
        "| family | pairs | " + " | ".join(f"{m}: Spearman (missed, false alarms)" for m in models) + " |",
        "| --- | ---: |" + " ---: |" * len(models),
    ]
    for family, per_model in families.items():
        cells = []
        for s in per_model.values():
            rho = "n/a" if s.spearman is None else f"{s.spearman:.2f}"
            cells.append("n/a" if s.n == 0 else f"{rho} ({len(s.missed)}, {len(s.false_alarms)})")
        n = max(s.n for s in per_model.values())
        lines.append(f"| {family} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def noise_summary(native: dict[str, NativeDelta], records: dict[str, dict]) -> dict:
    half = sorted(n.halfwidth for n in native.values())
    loads = [x for r in records.values() for x in r.get("loadavg", [])]
    return {
        "pairs": len(half),
        "median_halfwidth": statistics.median(half),
        "max_halfwidth": half[-1],
        "within_2pct": sum(h <= 0.02 for h in half),
        "median_spread": statistics.median(n.spread for n in native.values()),
        "max_spread": max(n.spread for n in native.values()),
        "retimed": sum(len(r.get("spreads", ())) > 1 for r in records.values()),
        "unsteady": sum(r.get("steady") is False for r in records.values()),
        "loadavg_min": min(loads) if loads else None,
        "loadavg_max": max(loads) if loads else None,
    }


def neighbour_summary(records: dict[str, dict]) -> dict:
    """Rounds kept and rejected for busy neighbours over the pairs' records, the neighbour load of
    the kept rounds (CPUs busy beside the pinned one), and the pairs cut short (not scored)."""
    loads = sorted(
        r["neighbour_load"] for rec in records.values() for r in rec["rounds"] if r.get("neighbour_load") is not None
    )
    kept = sum(len(rec["rounds"]) for rec in records.values())
    rejected = sum(len(rec.get("rejected_rounds", ())) for rec in records.values())
    return {
        "rounds_kept": kept,
        "rounds_rejected": rejected,
        "rejected_share": rejected / (kept + rejected) if kept + rejected else None,
        "kept_load_median": statistics.median(loads) if loads else None,
        "kept_load_max": loads[-1] if loads else None,
        # timed before the check was made, or where /proc/stat could not be read
        "kept_without_load": kept - len(loads),
        "bounds": sorted(
            {rec["neighbour_bound"] for rec in records.values() if "neighbour_bound" in rec},
            key=lambda b: float("inf") if b is None else b,
        ),
        "not_quiet": {name: rec["not_quiet"] for name, rec in records.items() if rec.get("not_quiet")},
    }


def neighbour_line(summary: dict) -> str:
    def cpus(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    bounds = ", ".join("off" if b is None else f"{b:.2f}" for b in summary["bounds"]) or "none recorded"
    share = "" if summary["rejected_share"] is None else f" ({100 * summary['rejected_share']:.0f} % of the tries)"
    line = (
        f"busy neighbours (bound in CPUs: {bounds}): {summary['rounds_rejected']} rounds rejected{share}, "
        f"{summary['rounds_kept']} kept; their neighbour load median {cpus(summary['kept_load_median'])}, "
        f"max {cpus(summary['kept_load_max'])} CPUs"
    )
    if summary["kept_without_load"]:
        line += (
            f"; {summary['kept_without_load']} kept rounds without a figure (timed before the check, or no /proc/stat)"
        )
    if summary["not_quiet"]:
        line += f"; {len(summary['not_quiet'])} pairs not quiet, left out of the scores: " + "; ".join(
            f"`{name}`: {why}" for name, why in summary["not_quiet"].items()
        )
    return line


def select_pairs(names: str | None) -> list[Pair]:
    if not names:
        return list(PAIRS)
    wanted = [n for n in names.split(",") if n]
    chosen = [p for p in PAIRS if any(w in p.name for w in wanted)]
    if not chosen:
        raise SystemExit(f"verdicts: no pair matches {names!r}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--pairs", help="comma-separated substrings of pair names (default: every pair)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds per pair (default 20)")
    parser.add_argument(
        "--retime", action="store_true", help="time every pair again, even if its binaries are unchanged"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"separate harness processes per side and round (default {PROCESSES})",
    )
    parser.add_argument(
        "--max-spread",
        type=float,
        default=100 * MAX_SPREAD,
        metavar="PCT",
        help=f"time a pair again while its per-round ratios spread more than PCT %% (robust CV; "
        f"default {100 * MAX_SPREAD:g})",
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=ATTEMPTS,
        help=f"timings of a pair at most, the steadiest kept (default {ATTEMPTS})",
    )
    add_quiet_options(parser, "a round", "a pair", "it is given up as not quiet")
    parser.add_argument(
        "--no-timing",
        action="store_true",
        help="time nothing: score the stored timings only (pairs without one for their binaries "
        "are left out and named)",
    )
    parser.add_argument(
        "--profile",
        default=TARGET,
        help=f"target profile to build, simulate and time (default {TARGET}; x86_64v1 for gem5)",
    )
    parser.add_argument(
        "--native-file",
        type=Path,
        help=f"stored native timings (default {NATIVE_FILE.name}, or verdicts-native-PROFILE.json)",
    )
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    parser.add_argument(
        "--stat",
        choices=STATS,
        default="min_s",
        help="per-round time of a side: its fastest call (default) or its median call",
    )
    parser.add_argument("--cpu", type=int, help="core to pin native runs to (default: the last one)")
    parser.add_argument(
        "--reference",
        default="",
        help=f"comma-separated gem5 timing CPUs to score like the models ({', '.join(GEM5_REFERENCES)}); "
        "needs a profile gem5 decodes (x86_64v1)",
    )
    parser.add_argument("--gem5-file", type=Path, help="stored gem5 results (default verdicts-gem5-PROFILE.json)")
    parser.add_argument(
        "--gem5-jobs",
        type=int,
        default=1,
        help="gem5 simulations at a time (default 1; 0: run none, score the stored results)",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--intervals",
        type=Path,
        metavar="FILE",
        help="write the interval calibration of the pipeline, analytical and calibrated models from "
        "every pair's residuals here (perfguard/predict/intervals.json is the one perfguard reads)",
    )
    parser.add_argument(
        "--machine-profile",
        type=Path,
        metavar="FILE",
        help="write (or update, for this profile's ISA) the machine profile of the CPU the native "
        "timings came from: the interval calibration keyed by that CPU's identity "
        '(perfguard/machine_profiles/NAME.json is where `[target.X] machine = "NAME"` reads)',
    )
    parser.add_argument(
        "--models-root",
        type=Path,
        metavar="DIR",
        help="score the calibrated and check columns with the models in DIR/models/TARGET/ (a machine's "
        "calibration, `perfguard calibrate train --root DIR`) instead of the config's baselines; with "
        "--machine-profile, those models are copied into the profile",
    )
    parser.add_argument("--level", type=float, default=0.9, help="nominal coverage of the intervals (default 0.9)")
    parser.add_argument("-j", "--jobs", type=int, help="parallel build/simulation jobs")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"verdicts: unknown model '{unknown[0]}' (one of {', '.join(MODELS)})")
    references = [r for r in args.reference.split(",") if r]
    unknown = [r for r in references if r not in GEM5_REFERENCES]
    if unknown:
        raise SystemExit(f"verdicts: unknown reference '{unknown[0]}' (one of {', '.join(GEM5_REFERENCES)})")

    try:
        quiet = QuietPolicy.from_args(args)
    except InputError as exc:
        raise SystemExit(f"verdicts: {exc.message}") from None
    config = load_config(args.config)
    if args.models_root is not None:  # models are read from the baseline folder: point it at the machine's
        config = dataclasses.replace(config, storage=dataclasses.replace(config.storage, baseline_dir=args.models_root))
    profile = config.profile(args.profile, "--profile")
    native_file = args.native_file or native_file_for(profile.name)
    pairs = select_pairs(args.pairs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    log(f"building and simulating {len(pairs)} pairs")
    sides = build_sides(pairs, config, profile, args.jobs)
    if args.no_timing and args.retime:
        raise SystemExit("verdicts: --no-timing and --retime contradict each other")
    records = time_pairs(
        pairs,
        sides,
        native_file,
        args.rounds,
        args.retime,
        pick_cpu() if args.cpu is None else args.cpu,
        profile,
        log,
        timing=not args.no_timing,
        processes=args.processes,
        max_spread=args.max_spread / 100,
        attempts=args.attempts,
        quiet=quiet,
    )
    neighbours = neighbour_summary(records)
    pairs = [p for p in pairs if p.name in records and p.name not in neighbours["not_quiet"]]
    if not pairs:
        print(neighbour_line(neighbours))
        raise SystemExit("verdicts: no pair has a quiet timing to score")
    native = {p.name: native_delta(records[p.name], args.stat) for p in pairs}
    errors: dict[str, dict[str, str]] = {}
    predicted = predicted_deltas(pairs, sides, profile, config, models, errors)
    gem5_runs: dict[str, dict[str, dict]] = {}
    if references:
        from perfguard.sim.gem5.se_config import check_decodable

        try:
            check_decodable(profile)
        except InputError as exc:
            raise SystemExit(f"verdicts: --reference: {exc.message}") from None
        gem5_runs = gem5_references(
            pairs,
            sides,
            profile,
            config,
            references,
            args.gem5_file or gem5_file_for(profile.name),
            args.gem5_jobs,
            log,
        )
        predicted.update(reference_deltas(pairs, gem5_runs))
    deltas = {name: n.delta for name, n in native.items()}
    residuals = interval_residuals(pairs, profile, config, deltas, predicted)
    coverage = coverage_table(residuals, args.level)
    summaries = {m: summarize(deltas, predicted[m]) for m in predicted}
    families = by_family(pairs, deltas, predicted)
    noise = noise_summary(native, records)
    print(markdown(pairs, native, predicted, summaries))
    print("\n" + family_markdown(families))
    for ref in references:  # a reference may cover fewer pairs: every column again on its pairs alone
        common = [n for n in deltas if predicted[ref][n] is not None]
        subset = {m: summarize({n: deltas[n] for n in common}, predicted[m]) for m in predicted}
        print(f"\non the {len(common)} pairs {ref} simulated:\n")
        print(markdown([p for p in pairs if p.name in common], native, predicted, subset).split("\n\n", 1)[1])
        # how far off the size of each change is, beyond its rank
        print(
            "\nmedian |ln(predicted ratio / native ratio)| on those pairs: "
            + ", ".join(f"{m} {tracking_error({n: deltas[n] for n in common}, predicted[m]):.3f}" for m in predicted)
        )
    print(
        f"\ninterval coverage at {100 * args.level:.0f} % (split-conformal, perfguard.predict.intervals; held-out "
        f"pairs only):\n\n" + coverage_markdown(coverage, args.level)
    )
    if args.intervals or args.machine_profile:
        from perfguard.predict.intervals import calibrate

        timed_on = sorted(
            {json.dumps(r.get("machine", {}), sort_keys=True) for name, r in records.items() if name in deltas}
        )
        source = {
            "command": " ".join(["python", "benchmarks/verdicts.py", *(argv or sys.argv[1:])]),
            "native_file": os.path.relpath(native_file, REPO) if native_file.is_relative_to(REPO) else str(native_file),
            "pairs": len(pairs),
            "stat": args.stat,
            "machines": [json.loads(m) for m in timed_on],
        }
        calibration = calibrate(
            {k: [(r.predicted, r.native) for r in rows] for k, rows in residuals.items()}, source, args.level
        )
        if args.intervals:
            calibration.save(args.intervals)
            print(f"\nwrote {args.intervals}: {len(calibration.entries)} models")
        if args.machine_profile:
            write_machine_profile(
                args.machine_profile,
                profile.isa,
                calibration,
                [json.loads(m) for m in timed_on],
                None if args.models_root is None else args.models_root / "models" / profile.name,
                families,
            )
            print(
                f"\nwrote {args.machine_profile}: {profile.isa}, {len(calibration.entries)} models, {len(pairs)} pairs"
            )
    for model, failed in errors.items():
        print(
            f"\n{model} could not score {len(failed)} pairs; first: `{next(iter(failed))}`: {next(iter(failed.values()))}"
        )
    print(
        f"\nnative noise: 95 % interval half-width median {100 * noise['median_halfwidth']:.1f} %, "
        f"max {100 * noise['max_halfwidth']:.1f} %, within 2 % on {noise['within_2pct']} of {noise['pairs']} pairs; "
        f"per-round ratio spread (robust CV) median {100 * noise['median_spread']:.1f} %, "
        f"max {100 * noise['max_spread']:.1f} %; timed again for spread: {noise['retimed']} pairs, "
        f"still above the bound: {noise['unsteady']}; "
        f"1-min load average while timing {noise['loadavg_min']:.2f} .. {noise['loadavg_max']:.2f}"
    )
    print(neighbour_line(neighbours))
    if args.json:
        doc = {
            "target": profile.name,
            "command": " ".join(["python", "benchmarks/verdicts.py", *(argv or sys.argv[1:])]),
            "pairs": [
                {
                    "name": p.name,
                    "family": p.family,
                    "knob": p.knob,
                    "kind": p.kind,
                    "before": p.before,
                    "after": p.after,
                    "native": {**native[p.name].__dict__, "halfwidth": native[p.name].halfwidth},
                    "binaries": [s.result.binary_hash for s in sides[p.name]],
                    "insts": [s.stats.insts for s in sides[p.name]],
                    "predicted": {m: predicted[m][p.name] for m in predicted},
                    "gem5": {r: runs.get(p.name) for r, runs in gem5_runs.items()},
                }
                for p in pairs
            ],
            "summary": {m: s.to_dict() for m, s in summaries.items()},
            "noise": noise,
            "neighbours": neighbours,
            "stat": args.stat,
            "errors": errors,
            "by_family": {f: {m: s.to_dict() for m, s in per.items()} for f, per in families.items()},
            "interval_coverage": coverage,
            "level": args.level,
        }
        atomic_write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
