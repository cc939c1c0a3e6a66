"""Running gem5: SE mode, one binary per ISA, kernel-only statistics by difference of two runs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perfguard import process
from perfguard.errors import InfraError, InputError
from perfguard.process import last_lines
from perfguard.sim.base import SimResult, Simulator
from perfguard.sim.gem5.config_ini import read_config
from perfguard.sim.gem5.locate import ENV_BY_ISA, gem5_candidates, gem5_hint, usable_binary
from perfguard.sim.gem5.mapping import (
    fp_arith_insts,
    mapping_version,
    reported_stats,
    stats_from_gem5,
    subtract_stats,
    whole_line_writes,
)
from perfguard.sim.gem5.se_config import (
    CPU_TYPES,
    DEFAULT_MEM_SIZE,
    NO_CPU_MODEL_EXIT,
    SCRIPT_NAME,
    STATUS_NAME,
    WRONG_ISA_EXIT,
    check_decodable,
    generate_se_config,
)
from perfguard.sim.gem5.stats_txt import parse_stats
from perfguard.sim.gem5.verify import verify_config
from perfguard.sim.stats import Stats
from perfguard.sim.two_runs import ROI_METHOD, TwoRuns
from perfguard.targets import TargetProfile

_ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "riscv64": 243}
_NORMAL_EXIT_CAUSE = "exiting with last active thread context"
_binary_hashes: dict[tuple[str, int, int], str] = {}


def _check_harness(binary: Path, isa: str) -> None:
    """SE mode runs only a static ELF of the target's ISA."""
    try:
        with open(binary, "rb") as handle:
            header = handle.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF":
                raise InfraError(f"{binary}: not an ELF executable")
            if header[4] != 2 or header[5] != 1:
                raise InfraError(f"{binary}: not a 64-bit little-endian ELF")
            machine = int.from_bytes(header[18:20], "little")
            if machine != _ELF_MACHINE[isa]:
                names = {v: k for k, v in _ELF_MACHINE.items()}
                raise InfraError(f"{binary}: built for {names.get(machine, f'ELF machine {machine}')}, not {isa}")
            phoff = int.from_bytes(header[32:40], "little")
            phentsize = int.from_bytes(header[54:56], "little")
            phnum = int.from_bytes(header[56:58], "little")
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
    except OSError as exc:
        raise InfraError(f"{binary}: cannot read the harness binary: {exc.strerror or exc}") from None
    for index in range(phnum):
        if int.from_bytes(table[index * phentsize : index * phentsize + 4], "little") == 3:  # PT_INTERP
            raise InfraError(f"{binary}: dynamically linked; gem5 SE mode needs a statically linked harness")


def _last_line(path: Path) -> str:
    try:
        return last_lines(path.read_bytes(), limit=200)
    except OSError:
        return ""


# gem5 prints this banner first on every run; "gem5 version X" since v20
_BANNER = "gem5 Simulator System"
_VERSION_RE = re.compile(r"^gem5 version (\d+)\.(\d+)[\w.]*", re.MULTILINE)
OLDEST_GEM5 = (21, 0)  # the configuration's port names and SEWorkload, and the stat names it maps


def _check_banner(gem5: Path, stdout_path: Path, code: int, stderr_path: Path) -> None:
    """InfraError if the program that ran is not gem5, or a gem5 older than OLDEST_GEM5."""
    try:
        with open(stdout_path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        head = ""
    if _BANNER not in head:
        why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        last = _last_line(stderr_path) or _last_line(stdout_path) or "no output"
        raise InfraError(f"{gem5}: not gem5 (no '{_BANNER}' banner on its output; {why}: {last})")
    version = _VERSION_RE.search(head)
    if version and (int(version.group(1)), int(version.group(2))) < OLDEST_GEM5:
        raise InfraError(
            f"{gem5}: {version.group(0)} is older than {OLDEST_GEM5[0]}.{OLDEST_GEM5[1]}, the oldest whose "
            f"configuration API and statistics names perfguard runs; build a newer one (scripts/build-gem5.sh)"
        )


@dataclass(frozen=True)
class _RunOutput:
    stats: Stats
    stdout: bytes


class Gem5Simulator(Simulator):
    """gem5 in SE mode, one binary per ISA; kernel-only stats by difference of two runs."""

    name = "gem5"

    def __init__(
        self,
        cache_dir: Path,
        gem5_paths: Mapping[str, str | Path] | None = None,
        *,
        cpu_type: str = "atomic",
        mem_size: int = DEFAULT_MEM_SIZE,
        keep_outputs: bool = False,
    ):
        if cpu_type not in CPU_TYPES:
            raise InputError(f"gem5: unknown CPU type '{cpu_type}' (one of {', '.join(CPU_TYPES)})")
        self.cache_dir = Path(cache_dir)
        self.gem5_paths = dict(gem5_paths or {})
        self.cpu_type = cpu_type
        self.mem_size = mem_size
        self.keep_outputs = keep_outputs
        self.last_run_dir: Path | None = None

    # -- Simulator interface ------------------------------------------------------------------

    def gem5_binary(self, target: TargetProfile) -> Path:
        if target.isa not in ENV_BY_ISA:
            raise InputError(f"target '{target.name}': gem5 back end does not support ISA '{target.isa}'")
        found = gem5_candidates(target.isa, self.gem5_paths, os.environ)
        if not found:
            raise InfraError(f"gem5 for {target.isa} not found: {gem5_hint(target.isa)}")
        path, where = found[0]
        usable = usable_binary(path)
        if usable is None:
            raise InfraError(
                f"gem5 for {target.isa}: {where}={path} is not an executable file; {gem5_hint(target.isa)}"
            )
        return usable

    def check_available(self, target: TargetProfile) -> None:
        check_decodable(target)
        self.gem5_binary(target)

    def fingerprint(self, target: TargetProfile) -> str:
        binary = self.gem5_binary(target)
        status = binary.stat()
        key = (str(binary), status.st_size, status.st_mtime_ns)
        if key not in _binary_hashes:
            digest = hashlib.sha256()
            with open(binary, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            _binary_hashes[key] = digest.hexdigest()
        script = generate_se_config(
            target, "BINARY", ["BINARY", "REPS", "WARMUP"], "/RUN", cpu_type=self.cpu_type, mem_size=self.mem_size
        )
        return json.dumps(
            {
                "simulator": "gem5",
                "gem5_sha256": _binary_hashes[key],
                "config_sha256": hashlib.sha256(script.encode()).hexdigest(),
                "cpu_type": self.cpu_type,
                "mapping": mapping_version(target.isa),
                "roi": ROI_METHOD,
            },
            sort_keys=True,
        )

    def run(self, binary: Path, target: TargetProfile, args: list[str], timeout: float) -> SimResult:
        check_decodable(target)
        gem5 = self.gem5_binary(target)
        runs = TwoRuns.start(args, timeout, "gem5", more=True)
        binary = Path(binary).resolve()
        _check_harness(binary, target.isa)
        base_dir = self.cache_dir / "gem5"
        base_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=base_dir))
        self.last_run_dir = work
        # On failure the directory stays, so the file an error names can be read.
        roi = self._run_once(gem5, binary, target, runs, runs.reps, work / f"reps{runs.reps}")
        empty = self._run_once(gem5, binary, target, runs, 0, work / "reps0")
        kernel = subtract_stats(
            roi.stats, empty.stats, error=InfraError, what=f"REPS=0 and REPS={runs.reps} runs ({work})"
        )
        if not self.keep_outputs:
            shutil.rmtree(work, ignore_errors=True)
            self.last_run_dir = None
        return SimResult(
            stats=reported_stats(kernel, target.isa), stdout=roi.stdout, roi_count=1, total_insts=roi.stats.insts
        )

    # -- one gem5 process -----------------------------------------------------------------------

    def _run_once(
        self, gem5: Path, binary: Path, target: TargetProfile, runs: TwoRuns, reps: int, run_dir: Path
    ) -> _RunOutput:
        args = runs.argv(reps)
        run_dir.mkdir(parents=True)
        outdir = run_dir / "m5out"
        script = run_dir / SCRIPT_NAME
        script.write_text(
            generate_se_config(
                target, binary, [str(binary), *args], run_dir, cpu_type=self.cpu_type, mem_size=self.mem_size
            )
        )
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        command = [str(gem5), f"--outdir={outdir}", "--listener-mode=off", str(script)]
        label = f"gem5 {target.isa} REPS={args[0]}"
        stderr_path = run_dir / "gem5.stderr"
        with open(run_dir / "gem5.stdout", "wb") as out, open(stderr_path, "wb") as err:
            try:
                done = process.run(command, runs.time_left(), cwd=run_dir, env=env, stdout=out, stderr=err)
            except OSError as exc:
                raise InfraError(f"{gem5}: cannot start gem5: {exc.strerror or exc}") from None
        if done.timed_out:
            raise InfraError(f"{label}: timed out ({runs.timeout_note}; outputs in {run_dir})")
        code = done.status
        assert code is not None
        _check_banner(gem5, run_dir / "gem5.stdout", code, stderr_path)
        status_path = run_dir / STATUS_NAME
        status: dict = {}
        if status_path.is_file():
            try:
                status = json.loads(status_path.read_text())
            except (OSError, json.JSONDecodeError):
                status = {}
        if code == WRONG_ISA_EXIT or status.get("error") == "wrong-isa":
            built = ", ".join(status.get("built", [])) or "another ISA"
            raise InfraError(f"{gem5}: gem5 built for {built}, not {target.isa}: {gem5_hint(target.isa)}")
        if code == NO_CPU_MODEL_EXIT or status.get("error") == "no-cpu-model":
            wanted = ", ".join(status.get("wanted", []))
            raise InfraError(f"{gem5}: this gem5 build has no {self.cpu_type} CPU model ({wanted})")
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise InfraError(f"{label}: gem5 {why}: {_last_line(stderr_path) or 'no message'} (see {stderr_path})")
        if not status:
            raise InfraError(f"{status_path}: gem5 ended without finishing the simulation (see {stderr_path})")
        if status.get("cause") != _NORMAL_EXIT_CAUSE:
            raise InfraError(f"{label}: simulation stopped early: {status.get('cause')!r} (see {stderr_path})")
        if status.get("code") != 0:
            guest_stderr = run_dir / "guest.stderr"
            raise InfraError(f"{label}: the harness exited with status {status.get('code')} (see {guest_stderr})")

        stats_path = outdir / "stats.txt"
        if not stats_path.is_file():
            raise InfraError(f"{stats_path}: gem5 wrote no statistics")
        if stats_path.stat().st_size == 0:
            raise InfraError(f"{stats_path}: empty")
        try:
            dumps = parse_stats(stats_path)
            config = read_config(outdir)
        except InputError as exc:
            raise InfraError(exc.message) from None
        if config is None:
            raise InfraError(f"{outdir / 'config.ini'}: gem5 wrote no config.ini or config.json")
        problems = verify_config(config, target, self.cpu_type)
        if problems:
            raise InfraError(f"{config.source}: {problems[0]}")
        try:
            stats = stats_from_gem5(dumps[-1], config)
        except InputError as exc:
            raise InfraError(f"{stats_path}: {exc.message}") from None
        stats = dataclasses.replace(stats, fp_insts=fp_arith_insts(dumps[-1]))
        if target.isa == "aarch64" and stats.l2_accesses is not None:  # dc zva: an L2 access to the plugin
            accesses, misses = whole_line_writes(dumps[-1])
            stats = dataclasses.replace(
                stats, l2_accesses=stats.l2_accesses + accesses, l2_misses=(stats.l2_misses or 0) + misses
            )
        if stats.insts is None:
            raise InfraError(f"{stats_path}: no instruction count in the statistics")
        try:
            stdout = (run_dir / "guest.stdout").read_bytes()
        except OSError:
            stdout = b""
        return _RunOutput(stats=stats, stdout=stdout)
