"""Importing a configuration's own kernel modules, isolated from every other configuration's.

A user's `entry = "mykernels.ops:qk"` is imported with the config's folder first on the import
path. Python keeps imported modules in `sys.modules` for the life of the process, so a second
configuration in the same process (a long pytest session, a Dask worker, `compare` of two
checkouts) that also has a `mykernels` package would silently get the first one's code. Each
import here therefore records which modules it brought in from its folder; importing for
another folder first forgets those, and takes the other folders perfguard put on the path
off it again. A module whose file changed on disk since it was imported (an edited kernel in
a long session) makes its folder's modules be imported afresh too. What the imported code then
reads is recorded by user_code/reads.py.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from perfguard.errors import InputError, did_you_mean
from perfguard.user_code.reads import forget_edited_modules, install, module_file, note_import, user_code

# "package.module:function", the one grammar of every callable a config names (entry, reference,
# flops, a [[model]]'s source): importable names only, so one can never name a file path.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CALLABLE = re.compile(rf"{_IDENT}(?:\.{_IDENT})*:{_IDENT}")


def callable_parts(text: str) -> tuple[str, str] | None:
    """(module, function) of a "module:function" reference; None when `text` is not one."""
    if not _CALLABLE.fullmatch(text):
        return None
    module, _, function = text.partition(":")
    return module, function


_LOADED: dict[Path, dict[str, tuple[int, int] | None]] = {}  # config folder -> user module -> its file's (mtime, size)
_ON_PATH: list[str] = []  # folders perfguard itself put on sys.path (others are left alone)
_current: Path | None = None


def _is_user_module(name: str, module: ModuleType, root: Path) -> bool:
    """Imported from the config's folder, and neither perfguard itself nor an installed package."""
    if name == "perfguard" or name.startswith("perfguard."):
        return False
    path = module_file(module)
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
    forget_edited_modules()
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
    install()  # remember imports from now on, before the first user module is imported
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
    note_import(module_name)
    try:
        return importlib.import_module(module_name)
    finally:
        loaded = _LOADED.setdefault(root, {})
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if module is not None and _is_user_module(name, module, root):
                loaded[name] = _file_state(module)


def callable_hint(text: str) -> str:
    """Why a 'module:function' string was refused, and the likely fix."""
    if "/" in text or "\\" in text or text.endswith(".py") or text.startswith("."):
        return " (dotted Python names, not a path)"
    module, _, function = text.rpartition(".")
    if ":" not in text and callable_parts(f"{module}:{function}"):
        return f" (a colon before the function: did you mean '{module}:{function}'?)"
    return " (dotted Python names)"


def load_callable(ref: str, root: Path, where: str, key: str = "entry") -> Callable:
    """Import "module:function" from the config's folder (perfguard.user_code isolates it). An error
    names the config `key` (entry, reference, flops, source) and the closest existing name."""
    parts = callable_parts(ref)
    if parts is None:
        raise InputError(f"{where}: {key} '{ref}' must be 'module:function'{callable_hint(ref)}")
    module_name, attr = parts
    try:
        with user_code():  # a module's body is user code: what it reads is an input
            module = import_user_module(module_name, root)
    except Exception as exc:
        hint = _module_hint(exc, root) if isinstance(exc, ModuleNotFoundError) else ""
        raise InputError(
            f"{where}: {key} '{ref}': cannot import '{module_name}': {type(exc).__name__}: {exc}".splitlines()[0] + hint
        ) from None
    func = getattr(module, attr, None)
    if not callable(func):
        functions = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
        raise InputError(
            f"{where}: {key} '{ref}': '{module_name}' has no function '{attr}'{did_you_mean(attr, functions)}"
        )
    return func


def _module_hint(exc: ModuleNotFoundError, root: Path) -> str:
    """The module nearest the missing one among its siblings (the modules of its package, or of the
    config's folder for a top-level one)."""
    missing = exc.name or ""
    parent, _, leaf = missing.rpartition(".")
    try:
        folders = list(importlib.import_module(parent).__path__) if parent else [str(root)]
    except Exception:  # the parent is missing too, or not a package: nothing to compare with
        return ""
    found = difflib.get_close_matches(leaf, sorted(m.name for m in pkgutil.iter_modules(folders)), n=1, cutoff=0.6)
    return f" (did you mean '{parent + '.' if parent else ''}{found[0]}'?)" if found else ""
