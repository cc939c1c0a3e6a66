"""What running user code read: the dependency file of a result.

`recording(root)` is the dependency file of running user code, as a compiler's `-MD` writes
one, but of everything the code read, wherever it lives: every Python module it executed or
imported, at any depth (the project's, an installed or editable package's, one loaded by path
with `spec_from_file_location`), every file it opened for reading (found by an audit hook while
it ran, not guessed), every environment variable it read, and the current folder when it asked
for it or opened a relative path. Files are hashed when they are read (modules when they are
executed), so an edit made while a check runs is seen: `changed` names
it, and such a result is not recorded. Modules imported earlier in the process (by another job
in the same worker) count too: each `import` statement is remembered as an edge of an import
graph, and what a module read while it was being imported is remembered with it, so a
recording takes every module reachable from the ones it saw, with their reads. perfguard
itself, the standard library and the packages perfguard.fingerprints identifies (TVM, numpy,
...) are not listed: the environment digest stands for them.

Records of results (perfguard.job.record) store these inputs with their digests and are reused
only while every one of them is unchanged.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from types import FrameType, ModuleType

from perfguard.fingerprints import PACKAGES


def module_file(module: ModuleType) -> Path | None:
    spec_file = getattr(module, "__file__", None)
    if spec_file is None:
        paths = list(getattr(module, "__path__", []) or [])
        spec_file = paths[0] if paths else None
    return None if spec_file is None else Path(spec_file).resolve()


# -- dependency files ------------------------------------------------------------------------------

_IMPORTS: dict[str, set[str]] = {}  # module -> the modules its `import` statements named (ever, this process)
_ACTIVE: list[Dependencies] = []  # recordings in progress
_real_import = builtins.__import__
_real_import_module = importlib.import_module
_real_getcwd = os.getcwd
_real_environ_getitem = os._Environ.__getitem__
_PERFGUARD = str(Path(__file__).resolve().parents[1]) + os.sep  # perfguard/, above user_code/
_NOT_FILES = ("/proc/", "/sys/", "/dev/")

UNSET = "unset"  # what an environment variable that was not set is recorded as


class Reads:
    """Inputs read by code: files (path -> sha256 when read, "" when absent), environment
    variables (name -> sha256 of the value, or UNSET: values may be secrets, never stored), and
    the current folder (when the code depended on it)."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.cwd: str | None = None

    def merge(self, other: Reads) -> None:
        for path, sha in other.files.items():
            self.files.setdefault(path, sha)
        for name, value in other.env.items():
            self.env.setdefault(name, value)
        self.cwd = self.cwd or other.cwd


# What each module (by file) read while it was being executed: an import in a later job finds
# the module in sys.modules and executes nothing, yet its answer still depends on these.
_MODULE_READS: dict[str, Reads] = {}
_EXECUTED: dict[str, tuple[str, tuple[int, int, int]]] = {}  # module file -> (sha256, stat) when executed
_READ_STATE: dict[str, tuple[int, int, int]] = {}  # a file read by user code -> its stat when first read
_busy = False  # inside the audit hook (its own reads are not the user's)
_windows = 0  # user code windows open (recordings with whole=False see reads only inside one)


@lru_cache(maxsize=1)
def _untracked_prefixes() -> tuple[str, ...]:
    """perfguard, the standard library, and the packages the environment digest identifies by
    their installed files (fingerprints.PACKAGES): not listed in a dependency file."""
    paths = sysconfig.get_paths()
    stdlib = {str(Path(paths[k]).resolve()) + os.sep for k in ("stdlib", "platstdlib") if k in paths}
    packages = set()
    for name in PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            packages.add(str(Path(folder).resolve()) + os.sep)
    return (_PERFGUARD, *sorted(stdlib), *sorted(packages), *_NOT_FILES)


def _site_folder(path: str) -> bool:
    return f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path


def tracked(path: str) -> bool:
    """Whether a file read by user code is one of its inputs: anything but perfguard, the
    standard library and the identified packages (site-packages under the standard library's
    folder are tracked: an installed package of the user's is an input)."""
    if not path.startswith(os.sep):
        return False
    for prefix in _untracked_prefixes():
        if path.startswith(prefix):
            if _site_folder(path) and not _site_folder(prefix) and prefix != _PERFGUARD:
                continue  # under the standard library's folder, but in site-packages
            return False
    return True


def _recording_now() -> list[Dependencies]:
    return [d for d in _ACTIVE if d.whole or _windows]


def _executing() -> list[Reads]:
    """The reads of the tracked modules whose body is running now (on the call stack)."""
    found = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>":
            reads = _MODULE_READS.get(code.co_filename)
            if reads is not None:
                found.append(reads)
        frame = frame.f_back
    return found


def _sinks() -> list[Reads]:
    """Where a read goes now: every recording that sees it, and every module being executed."""
    return [d.reads for d in _recording_now()] + (_executing() if _MODULE_READS else [])


def _saw_file(full: str, sinks: list[Reads]) -> None:
    _READ_STATE.setdefault(full, _stat_state(full))
    sha = None
    for reads in sinks:
        if full not in reads.files:
            if sha is None:
                sha = file_sha256(Path(full)) or ""
            reads.files[full] = sha


def _saw_cwd(sinks: list[Reads]) -> None:
    here = _real_getcwd()
    for reads in sinks:
        reads.cwd = reads.cwd or here


def _audit(event: str, args: tuple) -> None:
    global _busy
    if _busy or event not in ("open", "exec"):
        return
    _busy = True  # hashing a file opens it: that is not the user's read
    try:
        _observe(event, args)
    finally:
        _busy = False


def _observe(event: str, args: tuple) -> None:
    if event == "exec":
        _saw_exec(args[0])
        return
    if event != "open":
        return
    path, mode = args[0], args[1]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return
    if isinstance(path, int) or path is None:
        return
    try:
        text = os.fsdecode(path)
    except (TypeError, ValueError):
        return
    sinks = _sinks()
    if not sinks:
        return
    if not os.path.isabs(text):
        _saw_cwd(sinks)  # a relative path: which file it is depends on the current folder
    full = os.path.normpath(os.path.join(_real_getcwd(), text))
    if tracked(full) and not os.path.isdir(full):
        _saw_file(full, sinks)


def _saw_exec(code: object) -> None:
    """A module's body (or any code with a file) starts running: hash its file now, and attribute
    what it reads from here on to it (until the import that runs it returns)."""
    path = getattr(code, "co_filename", None)
    if not isinstance(path, str) or not os.path.isabs(path) or not tracked(path) or not os.path.isfile(path):
        return
    sinks = _sinks()
    if not sinks:
        return  # not run for user code (perfguard's own imports, pytest's, ...): not an input
    full = os.path.realpath(path)
    sha = file_sha256(Path(full)) or ""
    _EXECUTED[full] = (sha, _stat_state(full))
    for reads in sinks:
        reads.files.setdefault(full, sha)
    _MODULE_READS[path] = _MODULE_READS[full] = Reads()  # by the name its frames carry, and its real path


def _stat_state(path: str) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _recording_getcwd() -> str:
    if not _busy:
        sinks = _sinks()
        if sinks:
            _saw_cwd(sinks)
    return _real_getcwd()


def _recording_environ_getitem(self, key):
    try:
        value = _real_environ_getitem(self, key)
    except KeyError:
        _saw_env(key, None)
        raise
    _saw_env(key, value)
    return value


def _saw_env(name: object, value: str | None) -> None:
    if not isinstance(name, str) or _busy:
        return
    sinks = _sinks()
    if not sinks:
        return
    digest = _value_digest(value)
    for reads in sinks:
        reads.env.setdefault(name, digest)


def env_digest(name: str) -> str:
    """An environment variable as a dependency list records it (read without recording the read)."""
    value = os.environ._data.get(os.environ.encodekey(name))  # type: ignore[attr-defined]
    return _value_digest(None if value is None else os.environ.decodevalue(value))


def _value_digest(value: str | None) -> str:
    return UNSET if value is None else hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


class Dependencies:
    """What the code run inside a recording read: module names it imported, and its Reads."""

    def __init__(self, root: Path, exclude: tuple[Path, ...] = (), whole: bool = True):
        self.root = Path(root).resolve()
        self.exclude = tuple(str(Path(p).resolve()) + os.sep for p in exclude)
        self.whole = whole  # everything in the block, or only what runs inside user_code() windows
        self.modules: set[str] = set()
        self.reads = Reads()

    def add(self, *paths: Path) -> None:
        """Files the code depends on that perfguard read for it (wherever they are): hashed now."""
        for p in paths:
            full = str(Path(p).resolve())
            self.reads.files.setdefault(full, file_sha256(Path(full)) or "")

    def _inputs(self) -> Reads:
        """Every input: the reads, plus the modules reachable from those imported (their packages'
        __init__ files included) with what each, and each file it executed, read while running."""
        found = Reads()
        found.merge(self.reads)

        def module_step(name: str) -> list[str]:
            parent = name.rpartition(".")[0]
            module = sys.modules.get(name)
            path = module_file(module) if module is not None else None
            if path is None or not tracked(str(path)):
                return [parent] if parent else []
            full = str(path)
            found.files.setdefault(full, _EXECUTED[full][0] if full in _EXECUTED else file_sha256(path) or "")
            return ([parent] if parent else []) + sorted(_IMPORTS.get(name, ()))

        def file_step(path: str) -> list[str]:
            reads = _MODULE_READS.get(path)
            if reads is None:
                return []
            found.merge(reads)
            return list(reads.files)

        _closure(self.modules, module_step)
        _closure(found.files, file_step)
        return found

    def files(self) -> list[Path]:
        """Every file the recorded code depends on, sorted."""
        return sorted(Path(p) for p in self._inputs().files if self._listed(p))

    def _listed(self, path: str) -> bool:
        return not path.startswith(self.exclude) and "__pycache__" not in path

    def digests(self) -> list[list[str]]:
        """What a record stores: [path relative to root or absolute, sha256] per file ("" for one
        that was absent), ["env", NAME, sha256 of the value or "unset"] per environment variable,
        and ["cwd", "", folder] when the current folder decided a lookup."""
        inputs = self._inputs()
        out: list[list[str]] = []
        for path in sorted(p for p in inputs.files if self._listed(p)):
            full = Path(path)
            out.append(
                [full.relative_to(self.root).as_posix() if self.root in full.parents else path, inputs.files[path]]
            )
        out += [["env", name, inputs.env[name]] for name in sorted(inputs.env)]
        if inputs.cwd is not None:
            out.append(["cwd", "", inputs.cwd])
        return out


def _closure(start, step) -> None:
    """Visit `start` and everything `step` returns for a visited item, each once."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        item = todo.pop()
        if item not in seen:
            seen.add(item)
            todo.extend(step(item))


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
    """The module an import statement runs in, when its imports are remembered (a tracked file)."""
    if not globals_:
        return None
    path = globals_.get("__file__")
    if not isinstance(path, str) or not tracked(path):
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


_INSTALLED = False


def install() -> None:
    """Once per process: remember imports from now on, and see files opened, code executed,
    environment variables and the current folder read while recording."""
    global _INSTALLED
    if _INSTALLED:
        return
    builtins.__import__ = _recording_import
    importlib.import_module = _recording_import_module
    os.getcwd = _recording_getcwd
    os._Environ.__getitem__ = _recording_environ_getitem  # type: ignore[method-assign]  # the recording hook
    sys.addaudithook(_audit)
    _INSTALLED = True


def forget_edited_modules() -> None:
    """Modules outside the config's folder whose file changed since they were executed (an
    edited package in a long session): dropped, with every tracked module that imported them,
    so that the next import executes the file as it is now, as a new process would."""
    edited = {path for path, (_, state) in _EXECUTED.items() if _stat_state(path) != state}
    moved = edited | {path for path, state in _READ_STATE.items() if _stat_state(path) != state}
    if not moved and not _MODULE_READS:
        return
    for path, reads in list(_MODULE_READS.items()):  # a module whose import read what changed since
        if moved & reads.files.keys() or (
            not _site_folder(path)
            and (
                (reads.cwd is not None and reads.cwd != _real_getcwd())
                or any(env_digest(name) != value for name, value in reads.env.items())
            )
        ):
            edited.add(os.path.realpath(path))
    if not edited:
        for path in moved:
            _READ_STATE.pop(path, None)
        return
    names = {
        name
        for name, module in list(sys.modules.items())
        if module is not None and str(module_file(module) or "") in edited
    }
    grew = True
    while grew:  # their packages (which hold them as attributes) and whatever imported any of them
        parents = {name.rsplit(".", 1)[0] for name in names if "." in name}
        importers = {m for m, targets in _IMPORTS.items() if targets & names}
        grew = bool((parents | importers) - names)
        names |= parents | importers
    for name in names:
        sys.modules.pop(name, None)
    for path in edited:
        _EXECUTED.pop(path, None)
        _MODULE_READS.pop(path, None)
    for path in moved:
        _READ_STATE.pop(path, None)
    importlib.invalidate_caches()


@contextmanager
def recording(root: Path, exclude: tuple[Path, ...] = (), whole: bool = True) -> Iterator[Dependencies]:
    """Record what the code run inside the block depends on (`exclude`: folders that are not
    inputs, such as a cache inside the project). With whole=False, only what runs inside a
    `user_code()` window counts (perfguard's own work between them, which reads its cache and
    passes the environment to compilers, is not the user's input)."""
    deps = Dependencies(root, tuple(exclude), whole)
    install()
    forget_edited_modules()
    before = set(sys.modules)
    _ACTIVE.append(deps)
    try:
        yield deps
    finally:
        _ACTIVE.remove(deps)
        deps.modules |= set(sys.modules) - before  # imported for the first time inside the block


@contextmanager
def user_code() -> Iterator[None]:
    """A window in which user code runs (an entry, a reference, a flops function, an import)."""
    global _windows
    _windows += 1
    try:
        yield
    finally:
        _windows -= 1


def changed(root: Path, depends: object) -> str | None:
    """The first input of a dependency list (Dependencies.digests) that differs now, naming it;
    None when every one is as recorded. A malformed list is changed."""
    if not isinstance(depends, list):
        return "a malformed dependency list"
    for item in depends:
        if not (isinstance(item, list) and len(item) in (2, 3) and all(isinstance(x, str) for x in item)):
            return "a malformed dependency list"
        if len(item) == 3:
            kind, name, value = item
            if kind == "env":
                if env_digest(name) != value:
                    return f"environment variable {name}"
            elif kind == "cwd":
                if _real_getcwd() != value:
                    return f"the current folder ({value} then)"
            else:
                return "a malformed dependency list"
            continue
        path = Path(item[0]) if os.path.isabs(item[0]) else Path(root) / item[0]
        if (file_sha256(path) or "") != item[1]:
            return f"file {path}"
    return None


def unchanged(root: Path, depends: object) -> bool:
    """Whether every input of a dependency list still is as recorded."""
    return changed(root, depends) is None


def depend_on(root: Path, depends: list[list[str]]) -> None:
    """Inputs a reused record depended on count for every recording in progress too (a check's
    record holds its model records' inputs, which nothing re-read this time)."""
    root = Path(root).resolve()
    for deps in _ACTIVE:
        for item in depends:
            if len(item) == 3 and item[0] == "env":
                deps.reads.env.setdefault(item[1], item[2])
            elif len(item) == 3 and item[0] == "cwd":
                deps.reads.cwd = deps.reads.cwd or item[2]
            elif len(item) == 2:
                path = item[0] if os.path.isabs(item[0]) else str(root / item[0])
                deps.reads.files.setdefault(path, item[1])


def note_import(module_name: str) -> None:
    """A user module imported by name (import_user_module): an input of every recording in progress."""
    for deps in _ACTIVE:
        deps.modules.add(module_name)
