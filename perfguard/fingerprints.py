"""What perfguard's answers depend on besides the config and the kernels, as cheap digests.

perfguard's own code (every file of the package), the Python packages that compute or render
(TVM, numpy, scikit-learn, ...), the tools it runs (cross compilers, simulators, llvm-mca) and
the Debian package database, and the environment variables that change what a tool does.
Digests come from file contents (perfguard's code; the tools, by the bytes of the program found
on PATH, so a wrapper script with the same `--version` is another tool, re-hashed only when the
file's path, size, modification time, inode or change time differ, as ccache's "content"
compiler check does) and file metadata (installed packages: their files' path, size and
modification time), never from importing a package or running a tool, so that a check can tell
"nothing changed" in milliseconds. An upgraded package rewrites its files, and apt rewrites
/var/lib/dpkg/status on every install, so either changes the environment's digest.

Records keyed on these digests (pipeline job records, check records) are invalidated by any
such change; they never need to know which part mattered.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# Packages whose code decides a result, a verdict or a page (imported or not by a given check).
PACKAGES = (
    "tvm",
    "tvm_ffi",
    "ml_dtypes",
    "numpy",
    "scipy",
    "sklearn",
    "xgboost",
    "jinja2",
    "markupsafe",
    "matplotlib",
    "git",
    "onnx",
)
LLVM_TOOLS = ("llvm-mca-19", "llvm-mc-19", "llvm-objdump-19", "llvm-dwarfdump-19")
DPKG_STATUS = Path("/var/lib/dpkg/status")
GEM5_VARIABLES = ("PERFGUARD_GEM5", "PERFGUARD_GEM5_X86", "PERFGUARD_GEM5_RISCV", "PERFGUARD_GEM5_ARM")
# Environment variables that change what a compiler, the dynamic loader, QEMU or TVM does: part
# of the build and simulation keys and of every record's (a name ending in "*" is a prefix).
TOOL_VARIABLES = (
    "CPATH",
    "C_INCLUDE_PATH",
    "LIBRARY_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "GCC_COMPARE_DEBUG",
    "SOURCE_DATE_EPOCH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "QEMU_*",
    "TVM_*",
    "OMP_*",
)


def digest(*parts: str) -> str:
    """The sha256 (hex) of the parts' UTF-8 bytes, each followed by a NUL byte: the one digest of
    every key and identity (builds, simulations, records, model kernels). Its bytes are in every
    cached result's key and committed record: tests/compile/test_digest.py holds them fixed."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def stat_identity(path: str | os.PathLike | None) -> str:
    """A file's real path, size and modification time ("absent" when there is none)."""
    if path is None:
        return "absent"
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return f"absent:{path}"
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """perfguard's own code: every file of the package (sources, templates, the QEMU plugin's C)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@cache
def logic_digest(*modules: str) -> str:
    """What the code of `modules` (package-relative paths) computes, not how it reads: a digest of
    their syntax trees without docstrings, comments or layout, so that a model whose id carries it
    changes id when its arithmetic changes and keeps it when only its prose does. Serialised by a
    walker of its own rather than ast.dump, whose output differs between Python versions for the
    same code (empty fields shown or left out)."""
    h = hashlib.sha256()
    for module in modules:
        tree = ast.parse((PACKAGE_DIR / module).read_text(), module)
        h.update(module.encode() + b"\0" + _tree_text(tree).encode() + b"\0")
    return h.hexdigest()


def _tree_text(node: ast.AST) -> str:
    body = getattr(node, "body", None)
    if (
        isinstance(body, list)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # a docstring
    parts = [type(node).__name__]
    for name, value in ast.iter_fields(node):
        if name == "body" and body is not None:
            value = body
        if value is None or value == [] or name in ("ctx", "type_params", "type_comment", "kind"):
            continue
        if isinstance(value, list):
            text = "[" + ",".join(_tree_text(v) if isinstance(v, ast.AST) else repr(v) for v in value) + "]"
        elif isinstance(value, ast.AST):
            text = _tree_text(value)
        else:
            text = repr(value)
        parts.append(f"{name}={text}")
    return "(" + " ".join(parts) + ")"


@cache
def package_identity(name: str) -> str:
    """An installed package, from its files' metadata, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return f"{name}:absent"
    origin = Path(spec.origin)
    parts = [stat_identity(origin)]
    if origin.name == "__init__.py":  # the shared libraries beside it (libtvm.so, numpy's extension modules)
        parts += sorted(stat_identity(p) for p in origin.parent.glob("*.so*"))
        parts += sorted(stat_identity(p) for p in origin.parent.parent.glob(f"{name}-*.dist-info/RECORD"))
    return digest(name, *parts)


_CONTENT: dict[tuple, str] = {}  # a file's (real path, size, mtime, inode, ctime) -> sha256 of its bytes


def content_identity(path: str | os.PathLike) -> str:
    """A file by its real path and the sha256 of its bytes, hashed again only when its metadata
    changed ("absent" when there is none)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return f"absent:{path}"
    state = (real, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    sha = _CONTENT.get(state)
    if sha is None:
        try:
            with open(real, "rb") as handle:
                sha = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            return f"unreadable:{real}"
        _CONTENT[state] = sha
    return f"{real}:{sha}"


def tool_identity(name: str) -> str:
    """A program on PATH (or a path), by what it is: its content (looked up afresh each time: a
    tool replaced or wrapped takes effect at once, in a long-lived process too)."""
    found = name if os.path.sep in name else shutil.which(name)
    return f"{name}={content_identity(found) if found else 'absent'}"


def tool_environment() -> str:
    """The TOOL_VARIABLES set now, by name and the sha256 of their values."""
    found = []
    for name in sorted(os.environ):
        if any(name == v or (v.endswith("*") and name.startswith(v[:-1])) for v in TOOL_VARIABLES):
            found.append(f"{name}={hashlib.sha256(os.environ[name].encode('utf-8', 'surrogateescape')).hexdigest()}")
    return ";".join(found)


def environment_digest(tools: Iterable[str] = ()) -> str:
    """perfguard's code, Python, the packages, LLVM's tools, `tools` and the Debian package database."""
    gem5 = {name: os.environ.get(name, "") for name in GEM5_VARIABLES}
    return digest(
        "perfguard",
        code_digest(),
        sys.version,
        stat_identity(sys.executable),
        *(package_identity(name) for name in PACKAGES),
        *(tool_identity(name) for name in sorted({*LLVM_TOOLS, *tools})),
        *(tool_identity(path) for path in gem5.values() if path),
        json.dumps(gem5, sort_keys=True),
        stat_identity(DPKG_STATUS),
        tool_environment(),
    )


def worker_identity(tools: Iterable[str] = ()) -> dict[str, str]:
    """What a machine that runs jobs for another must share with it for its statistics to be the
    other's: perfguard's code, Python's and the packages' versions, each of `tools` (and LLVM's) by
    the sha256 of its bytes (not its path: the same Debian package installed anywhere is the same
    tool) and the tool variables. Comparable between machines, unlike environment_digest."""
    from importlib import metadata  # only a cluster's admission needs the installed versions

    identity = {"perfguard": code_digest(), "python": sys.version.split()[0]}
    distributions = metadata.packages_distributions()  # import name -> distribution (sklearn: scikit-learn)
    for name in PACKAGES:
        versions = []
        for dist in distributions.get(name, []):
            try:
                versions.append(f"{dist} {metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                pass
        identity[f"package {name}"] = ", ".join(sorted(versions)) or "absent"
    for name in sorted({*LLVM_TOOLS, *tools}):
        found = name if os.path.sep in name else shutil.which(name)
        identity[f"tool {name}"] = content_identity(found).rpartition(":")[2] if found else "absent"
    identity["tool variables"] = tool_environment()
    return identity
