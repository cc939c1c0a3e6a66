"""The interface every simulator back end implements, and the registry that finds them."""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from perfguard.registry import Registry
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile


@dataclass(frozen=True)
class SimResult:
    stats: Stats  # kernel-only counts, summed over every region of interest
    stdout: bytes  # what the guest wrote (the harness writes the kernel outputs here)
    roi_count: int  # regions of interest entered (one per harness run)
    total_insts: int | None  # whole-program instructions, for reporting overheads


class Simulator(abc.ABC):
    """Runs a statically linked harness binary for a target and returns kernel-only Stats."""

    name: str = ""
    records_blocks: bool = False  # a run gives the block profile (what the pipeline model scores)

    @abc.abstractmethod
    def check_available(self, target: TargetProfile) -> None:
        """Raise InfraError naming what is missing (binary, plugin compiler) and how to get it."""

    def check_target(self, target: TargetProfile) -> None:  # noqa: B027 (optional hook)
        """Raise InputError when this simulator cannot execute the code the profile produces
        (checked for every job before anything is built or simulated)."""

    @classmethod
    def programs(cls, target: TargetProfile) -> list[str]:
        """The programs a run for `target` executes besides the binary (their versions change what
        a recorded result depends on: perfguard.job.record)."""
        return []

    @abc.abstractmethod
    def fingerprint(self, target: TargetProfile) -> str:
        """Everything about the simulator that changes statistics (versions, plugin source)."""

    @abc.abstractmethod
    def run(self, binary: Path, target: TargetProfile, args: list[str], timeout: float) -> SimResult:
        """Simulate `binary args...`; InfraError on crash, timeout or unreadable output."""


SIMULATORS = Registry(
    "simulator",
    {
        "qemu": "perfguard.sim.qemu:QemuSimulator",
        "gem5": "perfguard.sim.gem5:Gem5Simulator",
        "cachegrind": "perfguard.sim.cachegrind:CachegrindSimulator",
    },
)

SIMULATOR_NAMES = SIMULATORS.names


def get_simulator(name: str, cache_dir: Path) -> Simulator:
    return SIMULATORS.load(name)(cache_dir=cache_dir)


def records_blocks(name: str) -> bool:
    """Whether the simulator called `name` records the block profile (imports its module)."""
    return SIMULATORS.load(name).records_blocks


def profile_tools(profiles: Iterable[TargetProfile], simulator: str) -> list[str]:
    """The programs a check of `profiles` under `simulator` runs (compilers and the simulator's)."""
    runs = SIMULATORS.load(simulator)
    return [tool for profile in profiles for tool in (profile.cc, *runs.programs(profile))]


def block_profile_simulators() -> tuple[str, ...]:
    """The simulators that record a block profile (imports every simulator's module)."""
    return tuple(name for name in SIMULATORS.names if records_blocks(name))
