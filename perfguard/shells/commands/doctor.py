"""perfguard doctor: what is installed, what is missing, and how to get it; then the toolchain
fingerprint of each configured target and whether it matches the committed baselines'."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import shutil
import subprocess
from pathlib import Path

from rich.markup import escape

from perfguard import __version__
from perfguard.baselines.store import SCHEMA_VERSION, BaselineStore, provenance
from perfguard.compile.loops import LLVM_DWARFDUMP, LOOPS_VERSION
from perfguard.compile.toolchain import CC_PACKAGES, find_cc
from perfguard.config import find_config, load_config
from perfguard.document.report import ToolchainSummary
from perfguard.errors import EXIT_INFRA, EXIT_OK, InputError, PerfguardError
from perfguard.job.run import run_toolchain
from perfguard.judge.verdicts import NOT_COMPARED, toolchain_changes, toolchain_summary
from perfguard.report.terminal import console
from perfguard.report.text import toolchain_differences
from perfguard.sim.base import get_simulator
from perfguard.sim.gem5 import ENV_BY_ISA, find_gem5
from perfguard.sim.mca import LLVM_MC, LLVM_MCA
from perfguard.targets import BUILTIN

_PYTHON = {"apache-tvm": "0.27.0.post1", "apache-tvm-ffi": "0.1.14.post1"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="report installed and missing tools, and the toolchain fingerprint")
    p.add_argument(
        "--config",
        type=Path,
        help="perfguard.toml or pyproject.toml whose targets and simulator to "
        "check and whose baselines to compare the toolchain with "
        "(default: found from this folder, if any)",
    )
    p.set_defaults(run=run)


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    lines = (out.stdout or out.stderr).splitlines()
    return lines[0].strip() if lines else "?"


def run(args: argparse.Namespace) -> int:
    out = console()
    out.print(
        f"[green]ok[/]      perfguard {__version__} (writes baseline schema {SCHEMA_VERSION} with loop nest "
        f"version {LOOPS_VERSION}; reads baseline schema 1 to {SCHEMA_VERSION})"
    )
    missing = 0
    for package, wanted in _PYTHON.items():
        try:
            have = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out.print(f"[red]missing[/] {package} (pip install {package}=={wanted})")
            missing += 1
            continue
        note = "" if have == wanted else f" [yellow](perfguard is tested with {wanted})[/]"
        out.print(f"[green]ok[/]      {package} {have}{note}")
    seen = set()
    for profile in BUILTIN.values():
        for tool, package in ((profile.cc, CC_PACKAGES.get(profile.isa, profile.cc)), (profile.qemu, "qemu-user")):
            if tool in seen:
                continue
            seen.add(tool)
            path = shutil.which(tool)
            if path:
                out.print(f"[green]ok[/]      {tool}: {_version([tool, '--version'])}")
            else:
                out.print(f"[red]missing[/] {tool} (apt-get install {package})")
                missing += 1
    required = ("cc", LLVM_MCA, LLVM_MC)
    for tool, package, note in (
        ("cc", "gcc", "compiles the QEMU plugin"),
        (LLVM_MCA, "llvm-19", "pipeline timing model: cycles per block"),
        (LLVM_MC, "llvm-19", "pipeline timing model: disassembles blocks"),
        (LLVM_DWARFDUMP, "llvm-19", "attribution: tells loops of one count apart"),
        ("valgrind", "valgrind", "cachegrind back end, x86_64 only"),
    ):
        path = shutil.which(tool)
        if path:
            out.print(f"[green]ok[/]      {tool}: {_version([tool, '--version'])} ({note})")
        else:
            out.print(f"[red]missing[/] {tool} (apt-get install {package}; {note})")
            missing += tool in required
    for isa in ENV_BY_ISA:  # the ISAs gem5 is built for
        gem5 = find_gem5(isa)
        state = f"[green]ok[/]      gem5 for {isa}: {gem5}" if gem5 else f"[dim]absent[/]  gem5 for {isa} (optional)"
        out.print(state)
    missing += _config_needs(args.config, out)
    out.print("all required tools found" if not missing else f"{missing} required tool(s) missing")
    toolchain_fingerprint(out, getattr(args, "config", None))
    baseline_versions(out, getattr(args, "config", None))
    return EXIT_OK if not missing else EXIT_INFRA


def baseline_versions(out, config_path: Path | None) -> None:
    """Which perfguard versions and which format versions wrote the committed baselines of the
    configured targets; those of a newer format (a check refuses them: upgrade perfguard).
    Informational, as the toolchain's lines are."""
    try:
        config = load_config(config_path)
    except PerfguardError:
        return  # toolchain_fingerprint said why
    found = provenance(BaselineStore(config.storage.baseline_dir), config.targets)
    for (version, schema, loops), targets in sorted(found.written.items(), key=lambda item: str(item[0])):
        nest = f" with loop nest version {loops}" if loops is not None else ""
        where = ", ".join(f"{n} on {t}" for t, n in sorted(targets.items()))
        out.print(f"baselines written by perfguard {escape(version)} as baseline schema {schema}{nest}: {where}")
    if any(schema < SCHEMA_VERSION for _, schema, _ in found.written):
        out.print(
            f"[dim]baselines[/] of schema before {SCHEMA_VERSION} are read as they are; the next `perfguard "
            f"baseline update` writes them as schema {SCHEMA_VERSION}"
        )
    for message in found.newer:
        out.print(f"[red]newer[/]   {escape(message)}")
    if found.damaged:
        out.print(f"[red]damaged[/] {found.damaged} baseline(s) cannot be read: `perfguard check` names them")


def _config_needs(path: Path | None, out) -> int:
    """What the config's targets and simulator need, and whether each is here; the count missing.
    Without a config (none given, none found) nothing more is checked."""
    if path is None:
        try:
            path = find_config(Path.cwd())
        except InputError:
            out.print("[dim]no perfguard.toml here: --config FILE says what a project needs[/]")
            return 0
    config = load_config(path)  # a bad config is exit 2, as for every command
    targets = list(dict.fromkeys([*config.targets, *(t for k in config.kernels for t in (k.targets or ()))]))
    simulator_name = config.simulation.simulator
    out.print(
        f"{escape(str(config.path))} needs simulator {simulator_name} for "
        f"{len(targets)} target(s): {escape(', '.join(targets))}"
    )
    simulator = get_simulator(simulator_name, config.storage.cache_dir)
    missing = 0
    for name in targets:
        profile = config.profile(name)
        problems = []
        # Each probe is called in this iteration, so it sees this profile.
        for probe in (lambda: find_cc(profile), lambda: simulator.check_available(profile)):  # noqa: B023
            try:
                probe()
            except PerfguardError as exc:
                problems.append(exc.message)
        if problems:
            out.print(f"[red]missing[/] {escape(name)}: {escape('; '.join(problems))}")
            missing += 1
        else:
            out.print(f"[green]ok[/]      {escape(name)}: {escape(profile.cc)} and {simulator_name} for {profile.isa}")
    return missing


def fingerprint(toolchain: dict[str, str]) -> str:
    """A short hash of the compared parts of a toolchain: equal fingerprints, comparable statistics."""
    text = "\n".join(f"{k}={v}" for k, v in sorted(toolchain.items()) if k not in NOT_COMPARED)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def toolchain_fingerprint(out, config_path: Path | None) -> None:
    """Each configured target's toolchain (what a run would record) against its committed
    baselines': match, or what differs and the command that re-baselines. Informational: the exit
    code stays about missing tools (`perfguard check --fail-on-toolchain-change` is the gate)."""
    try:
        config = load_config(config_path)
    except PerfguardError as exc:
        out.print(f"[dim]toolchain[/] no baselines to compare with ({escape(exc.message)})")
        return
    store = BaselineStore(config.storage.baseline_dir)
    changes: list[tuple[str, dict]] = []
    unrecorded: set[str] = set()
    for target in config.targets:
        try:
            current = run_toolchain(config.profile(target), config.simulation.simulator, config.storage.cache_dir)
        except PerfguardError as exc:
            out.print(f"[red]toolchain[/] {target}: cannot be fingerprinted: {escape(exc.message)}")
            continue
        baselines = []
        for spec in config.kernels:
            try:
                baseline = store.read(target, spec.name)
            except PerfguardError:
                continue  # an unreadable baseline: `perfguard check` names it
            if baseline is not None and baseline.toolchain:
                baselines.append(baseline)
                changes.append((target, toolchain_changes(baseline.toolchain, current)))
                unrecorded |= set(current) - set(baseline.toolchain)
        differ = sum(1 for t, c in changes if t == target and c)
        state = (
            "[dim]no baselines[/]"
            if not baselines
            else f"[green]matches its {len(baselines)} baseline(s)[/]"
            if not differ
            else f"[yellow]differs from {differ} of its {len(baselines)} baseline(s)[/]"
        )
        out.print(f"toolchain {target}: {fingerprint(current)} {state}")
        for tool, version in sorted(current.items()):
            out.print(f"          {tool}: {escape(version)}")
    summary = toolchain_summary(changes)
    if summary:
        out.print(
            f"[yellow]{escape(toolchain_differences(ToolchainSummary.of(summary)))}[/]; "
            f"re-baseline with: {summary['rebaseline']}"
        )
    elif changes:
        out.print("[green]toolchain[/] matches the committed baselines'")
    if unrecorded - {"perfguard"}:
        out.print(
            f"[dim]toolchain[/] not recorded by some baselines (recorded at their next re-baseline): "
            f"{', '.join(sorted(unrecorded - {'perfguard'}))}"
        )
