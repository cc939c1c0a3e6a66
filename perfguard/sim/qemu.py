"""QEMU user-mode simulator back end: runs a static harness under qemu-<isa> with perfguard's
own TCG plugin (qemu_plugin.c, built on first use with the host C compiler) and reads its
statistics file.

The guest runs with an empty environment and a fixed-length argv[0] (a hard link in a
fresh temporary directory) so that its stack layout, and with it the statistics, do not
depend on the caller's environment or on where the binary lives.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from perfguard import process
from perfguard.atomic import atomic_write_text
from perfguard.errors import InfraError, InputError
from perfguard.process import last_lines, one_line
from perfguard.sim.base import SimResult, Simulator
from perfguard.sim.blocks import parse_block_lines
from perfguard.sim.isa_support import check_emulated
from perfguard.sim.stats import COUNT_LIMIT, STAT_FIELDS, Stats
from perfguard.targets import TargetProfile

PLUGIN_SOURCE = Path(__file__).with_name("qemu_plugin.c")
PLUGIN_NAME = "perfguard_plugin.so"
# Loaded first: refuses a QEMU whose plugin API the counting plugin does not implement (exit 3).
API_CHECK_SOURCE = Path(__file__).with_name("qemu_api_check.c")
API_CHECK_NAME = "perfguard_api_check.so"
OUTPUT_HEADER = "perfguard_qemu_plugin 2"
HOST_CC = "cc"


def _stderr_tail(stderr: bytes, lines: int = 2) -> str:
    return last_lines(stderr, lines) or "(no stderr)"


def parse_plugin_output(text: str, source: str) -> tuple[Stats, int, int]:
    """Strictly parse the plugin's statistics file: (roi Stats with the block profile,
    roi_count, total_insts).

    InputError naming `source` and the line for anything else (the caller, which ran the
    simulator, turns it into an infrastructure error)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != OUTPUT_HEADER:
        raise InputError(f"{source}: first line is not '{OUTPUT_HEADER}'")
    expected = list(STAT_FIELDS) + ["roi_count", "total_insts"]
    body = lines[1 : len(expected) + 1]
    if len(body) != len(expected):
        raise InputError(f"{source}: expected {len(expected)} statistics lines, got {len(body)}")
    values: dict[str, int] = {}
    for number, (line, key) in enumerate(zip(body, expected), start=2):
        parts = line.split(" ")
        if len(parts) != 2 or parts[0] != key:
            raise InputError(f"{source}: line {number}: expected '{key} <count>', got {line[:80]!r}")
        if not parts[1].isdigit() or not parts[1].isascii():
            raise InputError(f"{source}: line {number}: '{key}' is not a non-negative integer: {parts[1][:40]!r}")
        if len(parts[1]) > 20 or int(parts[1]) >= COUNT_LIMIT:
            raise InputError(f"{source}: line {number}: '{key}' does not fit in 64 bits")
        values[key] = int(parts[1])
    rest = lines[len(expected) + 1 :]
    head = rest[0].split(" ") if rest else []
    if len(head) != 2 or head[0] != "blocks" or not head[1].isdigit() or int(head[1]) != len(rest) - 1:
        raise InputError(f"{source}: line {len(expected) + 2}: expected 'blocks N' followed by N block lines")
    blocks = parse_block_lines(rest[1:], source, len(expected) + 3)
    stats = Stats(**{name: values[name] for name in STAT_FIELDS}, blocks=blocks)
    if blocks.insts != stats.insts:
        raise InputError(f"{source}: the block profile holds {blocks.insts} instructions, insts is {stats.insts}")
    return stats, values["roi_count"], values["total_insts"]


# The plugin implements QEMU's plugin API version 1 (qemu_api_check.c refuses any other at load
# time), which QEMU 4.2 to 8.2 offer; QEMU 9.0 and newer require version 2 or later. Validated
# with QEMU 7.2.
FIRST_QEMU_WITHOUT_API_1 = (9, 0)
VALIDATED_QEMU = "7.2"


def check_plugin_api(version_line: str, target: TargetProfile) -> None:
    """InfraError (exit 3) for a QEMU whose plugin API the plugin does not implement, before a run
    fails obscurely; a version line that says no version leaves the check to the plugin itself."""
    match = re.search(r"version (\d+)\.(\d+)", version_line)
    if match and (int(match.group(1)), int(match.group(2))) >= FIRST_QEMU_WITHOUT_API_1:
        raise InfraError(
            f"{target.qemu} (target {target.name}) is {match.group(1)}.{match.group(2)}: QEMU 9.0 and newer need "
            f"plugin API version 2 or later, perfguard's plugin implements version 1 (QEMU 7.2 to 8.2, validated "
            f"with {VALIDATED_QEMU}): use the perfguard image or scripts/setup.sh's QEMU 7.2"
        )


GUEST_STACK_BYTES = 8 * 1024 * 1024
# Part of the fingerprint: bump when how the guest is launched changes (its layout, its counts).
RUN_RECIPE = 2


class QemuSimulator(Simulator):
    name = "qemu"
    records_blocks = True

    @classmethod
    def programs(cls, target: TargetProfile) -> list[str]:
        return [target.qemu]

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self._plugin: Path | None = None
        self._api_check: Path | None = None
        self._versions: dict[str, str] = {}
        self._plugin_ok: set[str] = set()

    # -- availability --------------------------------------------------------------------

    def _which(self, program: str, package: str, role: str) -> str:
        path = shutil.which(program)
        if path is None:
            raise InfraError(
                f"{program} ({role}) not found on PATH: install the Debian package {package} "
                f"(apt-get install {package})"
            )
        return path

    def check_target(self, target: TargetProfile) -> None:
        check_emulated(target, f"QEMU {VALIDATED_QEMU} ({target.qemu})", self.cache_dir)

    def check_available(self, target: TargetProfile) -> None:
        self.check_target(target)
        qemu = self._which(target.qemu, "qemu-user", f"QEMU user-mode emulator for target {target.name}")
        self._which(HOST_CC, "gcc", "host C compiler that builds the perfguard QEMU plugin")
        if qemu not in self._plugin_ok:
            try:
                proc = subprocess.run([qemu, "-h"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise InfraError(f"{target.qemu} (target {target.name}) cannot be run: {one_line(str(exc))}") from None
            if b"-plugin" not in proc.stdout + proc.stderr:
                raise InfraError(
                    f"{target.qemu} (target {target.name}) has no TCG plugin support "
                    f"(qemu-user-static has none): install the Debian package qemu-user"
                )
            check_plugin_api(self._qemu_version(target), target)
            self._plugin_ok.add(qemu)

    def _qemu_version(self, target: TargetProfile) -> str:
        qemu = self._which(target.qemu, "qemu-user", f"QEMU user-mode emulator for target {target.name}")
        if qemu not in self._versions:
            try:
                proc = subprocess.run([qemu, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise InfraError(
                    f"{target.qemu} --version failed (target {target.name}): {one_line(str(exc))}"
                ) from None
            lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
            if proc.returncode != 0 or not lines:
                raise InfraError(f"{target.qemu} --version failed (target {target.name}): {_stderr_tail(proc.stderr)}")
            self._versions[qemu] = lines[0].strip()
        return self._versions[qemu]

    # -- plugin build --------------------------------------------------------------------

    @staticmethod
    def plugin_source_hash() -> str:
        return hashlib.sha256(PLUGIN_SOURCE.read_bytes()).hexdigest()

    def plugin_path(self) -> Path:
        """Build the plugin if needed (atomically; concurrent builders are safe) and return it."""
        if self._plugin is None or not self._plugin.exists():
            self._plugin = self._build(PLUGIN_SOURCE, PLUGIN_NAME)
        return self._plugin

    def api_check_path(self) -> Path:
        if self._api_check is None or not self._api_check.exists():
            self._api_check = self._build(API_CHECK_SOURCE, API_CHECK_NAME)
        return self._api_check

    def _build(self, source_path: Path, name: str) -> Path:
        cc = self._which(HOST_CC, "gcc", "host C compiler that builds the perfguard QEMU plugin")
        source = source_path.read_bytes()
        try:
            version = subprocess.run(
                [cc, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InfraError(f"{HOST_CC} --version failed: {one_line(str(exc))}") from None
        digest = hashlib.sha256(source + b"\0" + version).hexdigest()[:20]
        directory = self.cache_dir / "plugin" / digest
        final = directory / name
        sealed = directory / f"{name}.sha256"  # the built file's content: a damaged one is built again
        if not (final.exists() and _file_sha(final) == _read_text(sealed)):
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=directory)
            os.close(fd)
            try:
                proc = subprocess.run(
                    [cc, "-O2", "-shared", "-fPIC", "-o", tmp_name, str(source_path)],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=300,
                )
                if proc.returncode != 0:
                    raise InfraError(
                        f"{HOST_CC} failed to build the QEMU plugin {source_path}: {_stderr_tail(proc.stderr, 3)}"
                    )
                os.replace(tmp_name, final)
                atomic_write_text(sealed, _file_sha(final))
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise InfraError(
                    f"{HOST_CC} failed to build the QEMU plugin {source_path}: {one_line(str(exc))}"
                ) from None
            finally:
                if os.path.exists(tmp_name):
                    os.unlink(tmp_name)
        return final

    # -- interface -----------------------------------------------------------------------

    def fingerprint(self, target: TargetProfile) -> str:
        geometry = " ".join(
            f"{level}={c.size}/{c.assoc}/{c.line}"
            for level, c in (("l1i", target.l1i), ("l1d", target.l1d), ("l2", target.l2))
        )
        return (
            f"{self._qemu_version(target)}; cpu={' '.join(target.qemu_cpu)}; isa={target.isa}; "
            f"plugin={self.plugin_source_hash()[:20]}; run={RUN_RECIPE}; {geometry}"
        )

    def _plugin_arg(self, plugin: Path, out: Path, target: TargetProfile) -> str:
        parts = [str(plugin), f"arch={target.isa}", f"out={out}"]
        for level in ("l1i", "l1d", "l2"):
            c = getattr(target, level)
            parts += [f"{level}_size={c.size}", f"{level}_assoc={c.assoc}", f"{level}_line={c.line}"]
        return ",".join(parts)

    def run(self, binary: Path, target: TargetProfile, args: list[str], timeout: float) -> SimResult:
        self.check_available(target)
        qemu = shutil.which(target.qemu)
        assert qemu is not None
        binary = Path(binary)
        where = f"{binary.name} on target {target.name} ({target.qemu})"
        if not binary.is_file():
            raise InfraError(f"{where}: harness binary {binary} does not exist")
        plugin, api_check = self.plugin_path(), self.api_check_path()
        # The guest runs from a path of fixed length (see process.fixed_path).
        with process.fixed_path(binary, "qemu") as guest:
            work = guest.parent
            so = work / "plugin.so"
            so.symlink_to(plugin.resolve())
            check = work / "check.so"
            check.symlink_to(api_check.resolve())
            out = work / "stats.txt"
            # -s: a fixed guest stack size (QEMU would otherwise grow it to the host RLIMIT_STACK).
            cmd = [
                qemu,
                "-s",
                str(GUEST_STACK_BYTES),
                *target.qemu_cpu,
                "-plugin",
                str(check),
                "-plugin",
                self._plugin_arg(so, out, target),
                str(guest),
                *args,
            ]
            try:
                done = process.run(cmd, timeout)
            except OSError as exc:
                raise InfraError(f"{where}: cannot start {target.qemu}: {one_line(str(exc))}") from None
            stdout, stderr = done.stdout, done.stderr
            if done.timed_out:
                raise InfraError(f"{where}: simulation timed out after {timeout:g} s; stderr: {_stderr_tail(stderr)}")
            if done.signal is not None:
                raise InfraError(
                    f"{where}: killed by {done.signal_name}{done.oom_hint}; stderr: {_stderr_tail(stderr)}"
                )
            if done.status != 0:
                raise InfraError(f"{where}: exited with status {done.status}; stderr: {_stderr_tail(stderr)}")
            try:
                text = out.read_text(encoding="ascii")
            except FileNotFoundError:
                raise InfraError(
                    f"{where}: the plugin wrote no statistics file; stderr: {_stderr_tail(stderr)}"
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise InfraError(
                    f"{where}: plugin output is unreadable (prints garbage): {one_line(str(exc))}"
                ) from None
            try:
                stats, roi_count, total_insts = parse_plugin_output(text, "plugin output")
            except InputError as exc:
                raise InfraError(
                    f"{where}: plugin output is unparseable (prints garbage): {one_line(exc.message)}; "
                    f"stderr: {_stderr_tail(stderr)}"
                ) from None
        if roi_count == 0:
            raise InfraError(
                f"{where}: the harness never entered its region of interest (no call to "
                f"perfguard_roi_begin followed by perfguard_roi_end); stderr: {_stderr_tail(stderr)}"
            )
        return SimResult(stats=stats, stdout=stdout, roi_count=roi_count, total_insts=total_insts)


def _file_sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
