"""perfguard doctor: what is installed, what is missing, and how to get it."""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess

from perfguard.build.toolchain import CC_PACKAGES
from perfguard.errors import EXIT_INFRA, EXIT_OK
from perfguard.predict.mca import LLVM_MC, LLVM_MCA
from perfguard.report.terminal import console
from perfguard.targets import BUILTIN

_PYTHON = {"apache-tvm": "0.27.0.post1", "apache-tvm-ffi": "0.1.14.post1"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="report installed and missing tools")
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
    for tool, package, note in (("cc", "gcc", "compiles the QEMU plugin"),
                                (LLVM_MCA, "llvm-19", "pipeline timing model: cycles per block"),
                                (LLVM_MC, "llvm-19", "pipeline timing model: disassembles blocks"),
                                ("valgrind", "valgrind", "cachegrind back end, x86_64 only")):
        path = shutil.which(tool)
        if path:
            out.print(f"[green]ok[/]      {tool}: {_version([tool, '--version'])} ({note})")
        else:
            out.print(f"[red]missing[/] {tool} (apt-get install {package}; {note})")
            missing += tool in required
    try:
        from perfguard.sim.gem5 import find_gem5
    except ImportError:
        find_gem5 = None
    if find_gem5 is not None:
        for isa in ("x86_64", "aarch64", "riscv64"):
            path = find_gem5(isa)
            state = f"[green]ok[/]      gem5 for {isa}: {path}" if path else f"[dim]absent[/]  gem5 for {isa} (optional)"
            out.print(state)
    out.print("all required tools found" if not missing else f"{missing} required tool(s) missing")
    return EXIT_OK if not missing else EXIT_INFRA
