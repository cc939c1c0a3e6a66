"""[perfguard] keys of a simulation: which simulator, how long it may run, how often the kernel is
called. Read by every run that builds jobs (runs/check.py, runs/calibration.py, compare, bisect) and
by `perfguard doctor`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from perfguard.errors import InputError
from perfguard.sections import KeyDocs, Table, number
from perfguard.sim.base import SIMULATOR_NAMES


@dataclass(frozen=True)
class Simulation:
    simulator: str = "qemu"
    timeout: float = 600.0  # seconds; a simulation that runs longer is an error (exit 3)
    reps: int = 1  # kernel calls inside the measured region (statistics are per call)
    warmup: int = 1  # kernel calls before it

    KEYS: ClassVar[KeyDocs] = {
        "simulator": ("string", '"qemu"', "`qemu` (perfguard's TCG plugin), `gem5` or `cachegrind` (x86_64 only)"),
        "timeout": ("number >= 1, seconds", "600", "a simulation that runs longer is an error (exit 3)"),
        "reps": ("integer >= 1", "1", "kernel calls inside the measured region (statistics are per call)"),
        "warmup": ("integer >= 0", "1", "kernel calls before the measured region"),
    }

    @classmethod
    def parse(cls, table: Table) -> Simulation:
        simulator = table.get("simulator", cls.simulator)
        if simulator not in SIMULATOR_NAMES:
            raise InputError(
                f"{table.where('simulator')}: unknown simulator {simulator!r} (one of {', '.join(SIMULATOR_NAMES)})"
            )
        return cls(
            simulator=simulator,
            timeout=number(table.get("timeout", cls.timeout), table.where("timeout"), 1.0),
            reps=number(table.get("reps", cls.reps), table.where("reps"), 1, integer=True),
            warmup=number(table.get("warmup", cls.warmup), table.where("warmup"), 0, integer=True),
        )
