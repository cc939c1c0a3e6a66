"""Cross compilers: finding them, their versions and their C libraries' (part of every cache key
and of every baseline's toolchain), linking; the version of LLVM's tools."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from perfguard import process
from perfguard.errors import InfraError, InputError
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


@cache
def cc_has_type(cc: str, ctype: str) -> bool:
    """Whether `cc` compiles a variable of `ctype` (riscv64's GCC 12 has no _Float16: GCC 13 added it)."""
    try:
        proc = subprocess.run(
            [cc, "-x", "c", "-c", "-o", os.devnull, "-"],
            input=f"{ctype} x;\n",
            text=True,
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{cc} cannot be run: {exc}") from None
    return proc.returncode == 0


def check_tensor_types(target: TargetProfile, cc: str, tensors, where: str) -> None:
    """InputError before building when the harness cannot hold a tensor's type on this target
    (a float16 kernel on riscv64): the target cannot build that dtype, not a toolchain failure."""
    for t in tensors:
        if t.ctype.startswith("_Float") and not cc_has_type(cc, t.ctype):
            raise InputError(
                f"{where}: tensor '{t.name}' is {t.dtype}, which target '{target.name}' cannot build "
                f"({os.path.basename(cc)} has no {t.ctype}); leave {target.name} out of the kernel's "
                f"targets"
            )


@cache
def cc_version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


def _run_text(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


@cache
def libc_version(cc: str) -> str:
    """The C library a static harness links in: glibc's version from its headers and, where dpkg
    knows the file, the Debian package and version (a Debian revision can change memcpy & co)."""
    macros = _run_text([cc, "-dM", "-E", "-include", "features.h", "-x", "c", "/dev/null"])
    major = minor = None
    for line in macros.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "__GLIBC__":
            major = parts[2]
        elif len(parts) == 3 and parts[1] == "__GLIBC_MINOR__":
            minor = parts[2]
    name = f"glibc {major}.{minor}" if major and minor else "unknown C library"
    archive = _run_text([cc, "-print-file-name=libc.a"])
    owner = _run_text(["dpkg-query", "-S", os.path.realpath(archive)]) if archive.startswith("/") else ""
    package = owner.split(":")[0] if owner else ""
    version = _run_text(["dpkg-query", "-W", "-f=${Version}", package]) if package else ""
    return f"{name} ({package} {version})" if version else name


LLVM_TOOLS = ("llvm-mca-19", "llvm-mca")
LINK_TIMEOUT = 300  # seconds: a static link takes well under one


@cache
def llvm_version() -> str:
    """The version of LLVM's machine-code tools (llvm-mca, llvm-objdump), or 'absent'."""
    for tool in LLVM_TOOLS:
        path = shutil.which(tool)
        if path:
            lines = [ln.strip() for ln in _run_text([path, "--version"]).splitlines() if "version" in ln.lower()]
            return f"{tool}: {lines[0]}" if lines else tool
    return "absent"


def ffi_include_dir() -> Path:
    import tvm_ffi

    include = Path(tvm_ffi.__file__).parent / "include"
    if not (include / "tvm" / "ffi" / "c_api.h").is_file():
        raise InfraError(f"tvm-ffi headers not found under {include} (pip install apache-tvm-ffi)")
    return include


def link_harness(
    target: TargetProfile, harness_c: Path, kernel_o: Path, out: Path, where: str, code_offset: int = 0
) -> None:
    """Statically link (non-PIE: simulators and region-of-interest symbols want fixed addresses).
    `code_offset` bytes of padding linked between the harness and the kernel put the same kernel
    code that much further on (rounded up to the kernel object's section alignment)."""
    cc = find_cc(target)
    pad = []
    if code_offset:
        pad_s = out.parent / "code-offset.s"
        pad_s.write_text(
            f"\t.text\n\t.globl perfguard_code_offset\nperfguard_code_offset:\n\t.skip {code_offset}\n"
            '\t.section .note.GNU-stack,"",@progbits\n'
        )
        pad = [str(pad_s)]
    cmd = [
        cc,
        *target.cflags,
        "-static",
        "-no-pie",
        "-I",
        str(ffi_include_dir()),
        str(harness_c),
        *pad,
        str(kernel_o),
        "-o",
        str(out),
        "-lm",
    ]
    # process.run: killed with its group (cc1, as, ld) on Ctrl-C, like a simulator
    done = process.run(cmd, LINK_TIMEOUT, env=os.environ)
    if done.timed_out:
        raise InfraError(f"{where}: linking the harness timed out after {LINK_TIMEOUT} s")
    if done.status != 0:
        last = link_error(done.stderr) or (done.signal_name or str(done.status))
        raise InfraError(f"{where}: linking the harness failed: {last}")


def link_error(stderr: bytes | str) -> str:
    """The linker's first error (an undefined symbol, say), not collect2's closing 'ld returned 1 exit status'."""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    errors = [
        line
        for line in lines
        if not line.startswith("collect2")
        and ("undefined reference" in line or "error" in line.lower() or "multiple definition" in line)
    ]
    return process.one_line((errors or lines or [""])[0], 400)
