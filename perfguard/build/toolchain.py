"""Cross compilers: finding them, their versions (part of every cache key), linking."""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from perfguard.errors import InfraError
from perfguard.targets import TargetProfile

# Debian packages that provide each ISA's cross compiler.
CC_PACKAGES = {
    "x86_64": "gcc-x86-64-linux-gnu (or gcc on an x86_64 host)",
    "aarch64": "gcc-aarch64-linux-gnu",
    "riscv64": "gcc-riscv64-linux-gnu",
}


def find_cc(target: TargetProfile) -> str:
    path = shutil.which(target.cc)
    if path is None:
        raise InfraError(
            f"target {target.name}: cross compiler '{target.cc}' not found "
            f"(apt-get install {CC_PACKAGES.get(target.isa, target.cc)})"
        )
    return path


@lru_cache(maxsize=None)
def cc_version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


def ffi_include_dir() -> Path:
    import tvm_ffi

    include = Path(tvm_ffi.__file__).parent / "include"
    if not (include / "tvm" / "ffi" / "c_api.h").is_file():
        raise InfraError(f"tvm-ffi headers not found under {include} (pip install apache-tvm-ffi)")
    return include


def link_harness(target: TargetProfile, harness_c: Path, kernel_o: Path, out: Path, where: str) -> None:
    """Statically link (non-PIE: simulators and region-of-interest symbols want fixed addresses)."""
    cc = find_cc(target)
    cmd = [cc, *target.cflags, "-static", "-no-pie", "-I", str(ffi_include_dir()),
           str(harness_c), str(kernel_o), "-o", str(out), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise InfraError(f"{where}: linking the harness failed: {lines[-1] if lines else proc.returncode}")
