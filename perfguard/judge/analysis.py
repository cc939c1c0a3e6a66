"""What a result means on its target: time split, throughput, DRAM traffic, roofline class, energy.

Everything here is derived from the simulator's statistics, the kernel's flop count and the
target profile, and lands in the report (document.report: `Analysis` per result, `TargetSummary`
per target), so every renderer shows the same numbers.

Definitions (also in docs/report.schema.json and on the HTML pages):

- DRAM traffic = (L2 misses + L2 write-backs) x L2 line: every L2 miss reads one line from
  memory and every dirty eviction writes one back.
- Arithmetic intensity = flops / DRAM traffic (flop per byte); none when there is no traffic.
- Roofline: attainable GFLOP/s = min(peak GFLOP/s, intensity x peak GB/s). Equivalently the
  roofline's lower bound on run time is max(flops / peak flops, DRAM bytes / peak bandwidth),
  and `roof_pct` is that bound over the predicted time: the share of the roof the kernel reaches.
- Bound class:
  * compute-bound: roof_pct >= ROOF_FRACTION x 100 and the compute bound is the larger one
    (intensity at or right of the ridge point, peak flops / peak bandwidth);
  * memory-bound: roof_pct >= ROOF_FRACTION x 100 and the bandwidth bound is the larger one;
  * latency-bound: the kernel reaches less than ROOF_FRACTION of its roof, so neither peak is
    what limits it: its time goes to instruction issue, loop overhead and cache-miss latency
    (the compute/memory phase split says which).
- Flops per FP instruction = flops / (scalar + vector FP instructions): the lanes (x2 for an
  FMA) each FP instruction does on average; a fall means lost vectorisation, whatever the ISA.
- Energy (an estimate, not a measurement) = insts x E_inst + (L1I + L1D accesses) x E_L1
  + L2 accesses x E_L2 + DRAM lines x E_DRAM, with the per-event energies of the target profile.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfguard.document.report import EnergyCosts, TargetSummary
from perfguard.document.result import ROOF_FRACTION, Analysis, Driver, Energy, Metrics, Result
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.predict.features import raw_matrix
from perfguard.sim.stats import STAT_FIELDS, Stats
from perfguard.targets import TargetProfile

BOUNDS = ("compute", "memory", "latency")
_PJ = 1e-12


def target_summary(profile: TargetProfile) -> TargetSummary:
    """The profile fields the reports need, so re-rendering never needs the config."""
    return TargetSummary(
        isa=profile.isa,
        clock_hz=profile.clock_hz,
        peak_gflops=profile.peak_gflops,
        peak_bandwidth_gbs=profile.peak_bandwidth_gbs,
        ridge_intensity=profile.peak_gflops / profile.peak_bandwidth_gbs,
        dram_line_bytes=profile.l2.line,
        energy_pj=EnergyCosts(
            profile.energy.inst, profile.energy.l1_access, profile.energy.l2_access, profile.energy.dram_access
        ),
    )


def _count(stats: Stats, *names: str) -> int | None:
    """The sum of some counters, or None when the simulator measured none of them."""
    values = [getattr(stats, n) for n in names]
    if all(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def dram_bytes(stats: Stats, line: int) -> int | None:
    lines = _count(stats, "l2_misses", "l2_writebacks") if stats.l2_misses is not None else None
    return None if lines is None else lines * line


def energy(stats: Stats, target: TargetSummary) -> Energy | None:
    e = target.energy_pj
    parts = {
        "core_j": (_count(stats, "insts"), e.inst),
        "l1_j": (_count(stats, "l1i_accesses", "l1d_accesses"), e.l1_access),
        "l2_j": (_count(stats, "l2_accesses"), e.l2_access),
        "dram_j": (_count(stats, "l2_misses", "l2_writebacks"), e.dram_access),
    }
    if any(count is None for count, _ in parts.values()):
        return None
    out = {name: (count or 0) * pj * _PJ for name, (count, pj) in parts.items()}  # none is None (above)
    return Energy(**out, total_j=sum(out.values()))


def bound_class(
    flops: float, traffic: float, time_s: float, peak_gflops: float, peak_bandwidth_gbs: float
) -> tuple[str, float]:
    """(bound, roof_pct) for a kernel of `flops` moving `traffic` DRAM bytes in `time_s`."""
    compute_floor = flops / (peak_gflops * 1e9)
    memory_floor = traffic / (peak_bandwidth_gbs * 1e9)
    roof_pct = 100.0 * max(compute_floor, memory_floor) / time_s
    if roof_pct < 100.0 * ROOF_FRACTION:
        return "latency", roof_pct
    return ("compute" if compute_floor >= memory_floor else "memory"), roof_pct


def metrics(
    stats: Stats, flops: float | None, time_s: float | None, profile: TargetProfile, target: TargetSummary
) -> Metrics:
    """One side (baseline or current) of a result: every derived number, None where unknown."""
    compute, memory = AnalyticalModel(profile).phases(raw_matrix([stats]))
    traffic = dram_bytes(stats, target.dram_line_bytes)
    out = Metrics(
        time_s=time_s,
        compute_s=float(compute[0]),
        memory_s=float(memory[0]),
        dram_bytes=traffic,
        energy=energy(stats, target),
    )
    fp = _count(stats, "fp_insts", "vec_fp_insts")
    if fp:
        out.vector_fp_share_pct = 100.0 * (stats.vec_fp_insts or 0) / fp
        if flops:
            out.flops_per_fp_inst = flops / fp
    if time_s and time_s > 0:
        if traffic is not None:
            out.bandwidth_gbs = traffic / time_s / 1e9
            out.bandwidth_pct = 100.0 * out.bandwidth_gbs / target.peak_bandwidth_gbs
        if flops:
            out.gflops = flops / time_s / 1e9
            out.peak_pct = 100.0 * out.gflops / target.peak_gflops
            if traffic is not None:
                out.bound, out.roof_pct = bound_class(
                    flops, traffic, time_s, target.peak_gflops, target.peak_bandwidth_gbs
                )
    if flops and traffic:
        out.intensity = flops / traffic
    return out


def drivers(predictor: Predictor, baseline: Stats, current: Stats) -> list[Driver]:
    """Each counter's share of the change in predicted time, largest first.

    One counter at a time is moved from its baseline value to its current one and re-scored
    with the model that scored the run; for the (linear) analytical model the impacts add up
    to the whole change exactly, for a calibrated model they are a first-order attribution.
    """
    before: dict[str, Any] = baseline.to_dict()  # the changed counters are ints (both present)
    after: dict[str, Any] = current.to_dict()
    changed = [n for n in STAT_FIELDS if before[n] is not None and after[n] is not None and before[n] != after[n]]
    if not changed:
        return []
    variants = [baseline, *(replace(baseline, **{n: after[n]}) for n in changed), current]
    try:
        predicted = [float(v) for v in predictor.predict_stats(variants)]
    except Exception:  # a predictor that cannot score a mixed row: no attribution, still a report
        return []
    base, total = predicted[0], predicted[-1] - predicted[0]
    out = []
    for name, score in zip(changed, predicted[1:-1]):
        impact = score - base
        out.append(
            Driver(
                stat=name,
                baseline=before[name],
                current=after[name],
                delta_pct=100.0 * (after[name] - before[name]) / before[name] if before[name] else None,
                time_s=impact,
                share_pct=100.0 * impact / total if total else None,
            )
        )
    out.sort(key=lambda d: (-abs(d.time_s), -abs(d.current - d.baseline), d.stat))
    return out


def analyse(
    result: Result,
    current: Stats | None,
    before: Stats | None,
    profile: TargetProfile,
    predictor: Predictor,
    target: TargetSummary,
) -> Analysis | None:
    """The analysis of one result from its statistics and the baseline's (None: nothing compared),
    as counts: drivers move one count at a time, which a block profile would hide from a model
    that scores blocks. None for a result without statistics."""
    if current is None:
        return None
    current, before = replace(current, blocks=None), None if before is None else replace(before, blocks=None)
    return Analysis(
        phase_model="analytical",
        current=metrics(current, result.flops, result.current_time_s, profile, target),
        baseline=None if before is None else metrics(before, result.flops, result.baseline_time_s, profile, target),
        drivers=[] if before is None else drivers(predictor, before, current),
    )
