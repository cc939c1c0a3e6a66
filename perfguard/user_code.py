"""Importing a configuration's own kernel modules, isolated from every other configuration's.

A user's `entry = "mykernels.ops:qk"` is imported with the config's folder first on the import
path. Python keeps imported modules in `sys.modules` for the life of the process, so a second
configuration in the same process (a long pytest session, a Dask worker, `compare` of two
checkouts) that also has a `mykernels` package would silently get the first one's code. Each
import here therefore records which modules it brought in from its folder; importing for
another folder first forgets those, and takes the other folders perfguard put on the path
off it again. A module whose file changed on disk since it was imported (an edited kernel in
a long session) makes its folder's modules be imported afresh too.

`recording(root)` is the dependency file of running user code, as a compiler's `-MD` writes
one: every module of the config's folder the code imported, at any depth, and every file of
the folder it opened for reading. Modules imported earlier in the process (by another job in
the same worker) count too: each `import` statement a user module executes is remembered as an
edge of an import graph, and a recording takes every module reachable from the ones it saw.
Records of results (perfguard.records) store these files with their digests and are reused
only while every one of them is unchanged.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator

_LOADED: dict[Path, dict[str, tuple[int, int] | None]] = {}  # config folder -> user module -> its file's (mtime, size)
_ON_PATH: list[str] = []  # folders perfguard itself put on sys.path (others are left alone)
_current: Path | None = None


def _module_file(module: ModuleType) -> Path | None:
    spec_file = getattr(module, "__file__", None)
    if spec_file is None:
        paths = list(getattr(module, "__path__", []) or [])
        spec_file = paths[0] if paths else None
    return None if spec_file is None else Path(spec_file).resolve()


def _is_user_module(name: str, module: ModuleType, root: Path) -> bool:
    """Imported from the config's folder, and neither perfguard itself nor an installed package."""
    if name == "perfguard" or name.startswith("perfguard."):
        return False
    path = _module_file(module)
    if path is None or root not in path.parents:
        return False
    return not any(part in ("site-packages", "dist-packages") for part in path.parts)


def _file_state(module: ModuleType) -> tuple[int, int] | None:
    path = getattr(module, "__file__", None)
    try:
        st = Path(path).stat() if path else None
    except OSError:
        return None
    return None if st is None else (st.st_mtime_ns, st.st_size)


def forget(root: Path) -> None:
    """Drop the modules imported from `root` and take `root` off sys.path (if perfguard put it there)."""
    global _current
    root = root.resolve()
    for name in _LOADED.pop(root, {}):
        sys.modules.pop(name, None)
    folder = str(root)
    if folder in _ON_PATH:
        _ON_PATH.remove(folder)
        if folder in sys.path:
            sys.path.remove(folder)
    if _current == root:
        _current = None
    importlib.invalidate_caches()  # the folder's files may have been written since the last look


def _switch_to(root: Path) -> None:
    global _current
    loaded = _LOADED.get(root, {})
    if any(_file_state(sys.modules[name]) != state for name, state in loaded.items() if name in sys.modules):
        forget(root)  # edited since imported: every module of the folder afresh, as a new process would
    if _current == root:
        return
    for other in [r for r in _LOADED if r != root]:
        forget(other)
    for folder in [f for f in _ON_PATH if f != str(root)]:
        forget(Path(folder))
    importlib.invalidate_caches()
    _current = root


def import_user_module(module_name: str, root: Path) -> ModuleType:
    """import_module with `root` first on the path and nothing left over from another root."""
    root = root.resolve()
    _watch(root)
    _switch_to(root)
    folder = str(root)
    # a folder already on the path (PYTHONPATH, the current directory) stays there after a switch
    someone_elses = folder in sys.path and folder not in _ON_PATH
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    if folder not in _ON_PATH and not someone_elses:
        _ON_PATH.append(folder)
    before = set(sys.modules)
    for deps in _ACTIVE:
        deps.modules.add(module_name)
    try:
        return importlib.import_module(module_name)
    finally:
        loaded = _LOADED.setdefault(root, {})
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if module is not None and _is_user_module(name, module, root):
                loaded[name] = _file_state(module)


# -- dependency files ------------------------------------------------------------------------------

_IMPORTS: dict[str, set[str]] = {}  # module -> the modules its `import` statements named (ever, this process)
_ROOTS: tuple[str, ...] = ()  # folders whose modules' imports are remembered (a recording's root)
_ACTIVE: list["Dependencies"] = []  # recordings in progress
_real_import = builtins.__import__
_real_import_module = importlib.import_module
_PERFGUARD = str(Path(__file__).resolve().parent) + os.sep


class Dependencies:
    """What user code under `root` read while a recording ran: module names and opened files."""

    def __init__(self, root: Path, exclude: tuple[Path, ...] = ()):
        self.root = Path(root).resolve()
        self.exclude = tuple(str(Path(p).resolve()) + os.sep for p in exclude) + (_PERFGUARD,)
        self.modules: set[str] = set()
        self.opened: set[str] = set()

    def add(self, *paths: Path) -> None:
        """Files the code depends on that perfguard read for it (wherever they are)."""
        self.opened.update(str(Path(p).resolve()) for p in paths)

    def files(self) -> list[Path]:
        """Every file the recorded code depends on: the modules reachable from those it imported
        (their packages' __init__ files included) and the files it opened, sorted."""
        seen: set[str] = set()
        todo = [name for name in self.modules]
        found: set[str] = set(self.opened)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            parent = name.rpartition(".")[0]
            if parent:
                todo.append(parent)
            module = sys.modules.get(name)
            if module is None or not _is_user_module(name, module, self.root):
                continue
            path = getattr(module, "__file__", None)
            if path:
                found.add(str(Path(path).resolve()))
            todo.extend(_IMPORTS.get(name, ()))
        return sorted(Path(f) for f in found if not f.startswith(self.exclude) and "__pycache__" not in f)

    def digests(self) -> list[list[str]]:
        """[[path relative to root, sha256], ...]: what a record stores ("" for a file gone)."""
        return [[path.relative_to(self.root).as_posix() if self.root in path.parents else str(path),
                 file_sha256(path) or ""] for path in self.files()]


def file_sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def _absolute(name: str, globals_: dict | None, level: int) -> str | None:
    if level == 0:
        return name
    package = (globals_ or {}).get("__package__")
    try:
        return importlib.util.resolve_name("." * level + name, package) if package else None
    except (ImportError, ValueError):
        return None


def _importer(globals_: dict | None) -> str | None:
    """The module an import statement runs in, when it is one whose imports are remembered."""
    if not globals_:
        return None
    path = globals_.get("__file__")
    if not isinstance(path, str) or not path.startswith(_ROOTS) or path.startswith(_PERFGUARD):
        return None
    return globals_.get("__name__")


def _remember(importer: str, name: str, fromlist) -> None:
    edges = _IMPORTS.setdefault(importer, set())
    edges.add(name)
    for item in fromlist or ():
        if isinstance(item, str) and item != "*":
            edges.add(f"{name}.{item}")  # `from pkg import mod`: a submodule, when it is one


def _recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = _real_import(name, globals, locals, fromlist, level)
    importer = _importer(globals)
    if importer:
        absolute = _absolute(name, globals, level)
        if absolute:
            _remember(importer, absolute, fromlist)
    return module


def _recording_import_module(name, package=None):
    module = _real_import_module(name, package)
    importer = _importer(sys._getframe(1).f_globals)
    if importer:
        _remember(importer, module.__name__, ())
    return module


def _audit(event: str, args: tuple) -> None:
    if event != "open" or not _ACTIVE:
        return
    path, mode = args[0], args[1]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return
    if isinstance(path, int) or path is None:
        return
    try:
        full = os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    for deps in _ACTIVE:
        if full.startswith(str(deps.root) + os.sep) and os.path.isfile(full):
            deps.opened.add(full)


_INSTALLED = False


def _install() -> None:
    """Once per process: remember user modules' imports from now on, and see files opened while recording."""
    global _INSTALLED
    if _INSTALLED:
        return
    builtins.__import__ = _recording_import
    importlib.import_module = _recording_import_module
    sys.addaudithook(_audit)
    _INSTALLED = True


def _watch(root: Path) -> None:
    """Remember the imports of `root`'s modules from now on (before the first of them is imported)."""
    global _ROOTS
    _install()
    folder = str(root) + os.sep
    if folder not in _ROOTS:
        _ROOTS = (*_ROOTS, folder)


@contextmanager
def recording(root: Path, exclude: tuple[Path, ...] = ()) -> Iterator[Dependencies]:
    """Record the files of `root` that the code run inside the block depends on (`exclude`:
    folders that are not inputs, such as a cache inside the project)."""
    deps = Dependencies(root, tuple(exclude))
    _watch(deps.root)
    before = set(sys.modules)
    _ACTIVE.append(deps)
    try:
        yield deps
    finally:
        _ACTIVE.remove(deps)
        deps.modules |= set(sys.modules) - before  # imported for the first time inside the block


def unchanged(root: Path, depends: object) -> bool:
    """Whether every file of a dependency list ([[path relative to root, sha256], ...], as
    `Dependencies.digests` gives) still has its digest; a malformed list is never unchanged."""
    if not isinstance(depends, list):
        return False
    for item in depends:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            return False
        path = Path(item[0]) if os.path.isabs(item[0]) else Path(root) / item[0]
        if (file_sha256(path) or "") != item[1]:
            return False
    return True


def depend_on(root: Path, depends: list[list[str]]) -> None:
    """Files a reused record depended on count for every recording in progress too (a check's
    record holds its model records' files, which nothing re-read this time)."""
    root = Path(root).resolve()
    for deps in _ACTIVE:
        deps.add(*(Path(p) if os.path.isabs(p) else root / p for p, _ in depends))
