"""Checking the configuration a gem5 run used against the target profile perfguard asked for."""

from __future__ import annotations

from perfguard.sim.gem5.config_ini import Gem5Config
from perfguard.sim.gem5.se_config import clock_string
from perfguard.targets import TargetProfile


def verify_config(config: Gem5Config, target: TargetProfile, cpu_type: str) -> list[str]:
    """What differs between the configuration gem5 ran and what perfguard asked for."""
    problems: list[str] = []
    if len(config.cpus) != 1:
        return [f"{len(config.cpus)} CPUs, expected 1"]
    cpu = config.cpus[0]
    if cpu.model != cpu_type:
        problems.append(f"CPU model is {cpu.type or 'missing'} ({cpu.model}), expected {cpu_type}")
    for level, have in (("l1i", cpu.l1i), ("l1d", cpu.l1d), ("l2", cpu.l2[0] if len(cpu.l2) == 1 else None)):
        want = getattr(target, level)
        if have is None:
            problems.append(f"no {level} cache found")
        elif (have.size, have.assoc, have.line) != (want.size, want.assoc, want.line):
            problems.append(
                f"{level} ({have.path}) is {have.size} B {have.assoc}-way {have.line} B lines, "
                f"expected {want.size} B {want.assoc}-way {want.line} B lines"
            )
    want_period = round(1e12 / target.clock_hz)
    if cpu.clock_period is None or abs(cpu.clock_period - want_period) > 1:
        problems.append(
            f"CPU clock period is {cpu.clock_period} ticks, expected {want_period} ({clock_string(target.clock_hz)})"
        )
    return problems
