"""Which instruction-set extensions the simulators cannot execute, checked before anything runs.

QEMU 7.2's TCG emulates x86 up to AVX2/FMA/F16C (`-cpu max`): no AVX-512 and no AVX-VNNI (a VEX
vpdpbusd raised SIGILL under it; so it did natively on this AVX2 machine). valgrind 3.19 stops at
AVX2 as well. A profile whose code may use them would crash the simulated harness with SIGILL, so
it is an input error (exit 2) before any build or simulation, naming the profile and what to use.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

from perfguard.atomic import atomic_write_text
from perfguard.errors import InfraError, InputError
from perfguard.fingerprints import package_identity
from perfguard.targets import TargetProfile

# LLVM feature names (what `+feature` in a TVM target's mattr says) past what QEMU 7.2 / valgrind 3.19
# decode on x86; every AVX-512 subset implies avx512f.
X86_BEYOND_AVX2 = ("avx512f", "avxvnni", "avxvnniint8", "avxvnniint16", "avxifma", "avxneconvert", "amx-tile")


@cache
def _x86_features(tvm_target_json: str, cache_dir: Path | None = None) -> tuple[str, ...]:
    """LLVM's answer for the target, remembered in the cache under TVM's identity: asking needs
    TVM imported (seconds of CPU), which a check whose kernels all come from records avoids."""
    memo = None
    if cache_dir is not None:
        key = hashlib.sha256(f"{tvm_target_json}\0{package_identity('tvm')}\0{X86_BEYOND_AVX2}".encode()).hexdigest()
        memo = Path(cache_dir) / "identity" / f"x86-features-{key[:32]}.json"
        try:
            found = json.loads(memo.read_text())
            if isinstance(found, list) and all(f in X86_BEYOND_AVX2 for f in found):
                return tuple(found)
        except (OSError, ValueError):
            pass  # absent or damaged: ask LLVM
    import tvm
    from tvm.target.codegen import target_has_features

    target = tvm.target.Target(json.loads(tvm_target_json))
    found = tuple(f for f in X86_BEYOND_AVX2 if target_has_features([f], target))
    if memo is not None:
        try:
            atomic_write_text(memo, json.dumps(list(found)))
        except (InfraError, OSError):  # a read-only cache: the answer stands, only unremembered
            pass
    return found


def x86_features_beyond_avx2(target: TargetProfile, cache_dir: Path | None = None) -> tuple[str, ...]:
    """The extensions past AVX2 the profile's code may use: from its TVM target (LLVM answers for
    its mcpu and mattr) and from `-m<feature>` in its C flags."""
    if target.isa != "x86_64":
        return ()
    found = list(_x86_features(json.dumps(target.tvm_target, sort_keys=True), cache_dir))
    for flag in target.cflags:
        name = flag[2:] if flag.startswith("-m") else ""
        if name.replace("-", "") in X86_BEYOND_AVX2 or name.startswith("avx512"):
            found.append(name)
    return tuple(dict.fromkeys(found))


def check_emulated(target: TargetProfile, simulator: str, cache_dir: Path | None = None) -> None:
    """InputError when `simulator` (QEMU 7.2 or valgrind 3.19) cannot execute the profile's code."""
    beyond = x86_features_beyond_avx2(target, cache_dir)
    if beyond:
        raise InputError(
            f"target '{target.name}': {simulator} cannot execute {', '.join(beyond)} (it stops at AVX2): "
            f"its kernels build (for inspection) but cannot be simulated; check the 'x86_64' profile "
            f"(x86-64-v3) instead"
        )
