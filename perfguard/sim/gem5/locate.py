"""Finding the gem5 binary for an ISA: explicit paths, then the PERFGUARD_GEM5* variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from perfguard.errors import InputError
from perfguard.sim.gem5.se_config import GEM5_BUILD_DIR

ENV_ALL = "PERFGUARD_GEM5"
ENV_BY_ISA = {"x86_64": "PERFGUARD_GEM5_X86", "aarch64": "PERFGUARD_GEM5_ARM", "riscv64": "PERFGUARD_GEM5_RISCV"}
_ISA_ALIASES = {
    "x86_64": "x86_64",
    "x86": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm": "aarch64",
    "arm64": "aarch64",
    "riscv64": "riscv64",
    "riscv": "riscv64",
}


def _normalise_isa(name: str) -> str | None:
    key = name.strip().lower()
    if key == "all":
        return "all"
    return _ISA_ALIASES.get(key)


def gem5_candidates(
    isa: str, paths: Mapping[str, str | Path] | None, environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(path, where it came from), in order of precedence."""
    found: list[tuple[str, str]] = []
    explicit = {}
    for key, value in (paths or {}).items():
        norm = _normalise_isa(str(key))
        if norm is None:
            raise InputError(f"gem5 paths: unknown ISA key '{key}' (x86_64, aarch64, riscv64 or all)")
        explicit[norm] = value
    if isa in explicit:
        found.append((str(explicit[isa]), f"gem5 path for {isa}"))
    if environ.get(ENV_BY_ISA[isa]):
        found.append((environ[ENV_BY_ISA[isa]], ENV_BY_ISA[isa]))
    if "all" in explicit:
        found.append((str(explicit["all"]), "gem5 path for all ISAs"))
    if environ.get(ENV_ALL):
        found.append((environ[ENV_ALL], ENV_ALL))
    return found


def usable_binary(path: str) -> Path | None:
    candidate = Path(path).expanduser()
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate.resolve()
    return None


def find_gem5(
    isa: str, paths: Mapping[str, str | Path] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The gem5 binary for `isa` (x86_64 | aarch64 | riscv64), or None.

    Looks at, in order: `paths[isa]`, $PERFGUARD_GEM5_<X86|ARM|RISCV>, `paths["all"]`,
    $PERFGUARD_GEM5 (one binary built for ALL ISAs). The first that is set decides: a path
    that is not an executable file gives None (check_available says why)."""
    norm = _normalise_isa(isa)
    if norm not in ENV_BY_ISA:
        return None
    found = gem5_candidates(norm, paths, os.environ if environ is None else environ)
    return usable_binary(found[0][0]) if found else None


def gem5_hint(isa: str) -> str:
    build = GEM5_BUILD_DIR.get(isa, "ALL")
    return (
        f"set {ENV_BY_ISA.get(isa, ENV_ALL)} (or {ENV_ALL} for a build/ALL binary) to a gem5 binary; "
        f"build one in a gem5 checkout with `scons build/{build}/gem5.opt -j$(nproc)` (takes hours)"
    )
