"""pytest in this process, for the plugin's tests (the pull request the Action and workflow tests
run on is tests/conftest.py's measured_pull_request)."""

from __future__ import annotations

import os
import sys

import pytest
from _pytest.pytester import SysModulesSnapshot, SysPathsSnapshot

from tests.shells.user_pytest import InProcess


def _in(module, roots: tuple[str, ...]) -> bool:
    """Whether `module` was imported from one of `roots` (folders, each ending with a separator)."""
    where = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
    return any(isinstance(w, str) and w.startswith(roots) for w in where)


@pytest.fixture
def in_process(request, monkeypatch) -> InProcess:
    """A user's pytest in this process (tests/shells/user_pytest.py; the module needs the pytester
    plugin). After each inner run (and after the test) pytester forgets the modules imported and
    the import hooks installed meanwhile: here only the user's project's (it changes between runs),
    not the libraries' (TVM's bindings cannot be imported twice into one process, and its script
    parser needs the import hook it installs with them)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the inner pytest must not think it is an xdist worker
    pytester = request.getfixturevalue("pytester")
    roots = tuple(dict.fromkeys(os.path.join(str(p), "") for p in (pytester.path, pytester.path.resolve())))
    restore_modules, restore_paths = SysModulesSnapshot.restore, SysPathsSnapshot.restore

    def forget_only_the_project_modules(snapshot: SysModulesSnapshot) -> None:
        libraries = {name: m for name, m in sys.modules.items() if not _in(m, roots)}
        restore_modules(snapshot)
        for name, module in libraries.items():
            sys.modules.setdefault(name, module)

    def keep_the_libraries_import_hooks(snapshot: SysPathsSnapshot) -> None:
        hooks = [
            f
            for f in sys.meta_path
            if not type(f).__module__.startswith("_pytest") and not _in(sys.modules.get(type(f).__module__), roots)
        ]
        restore_paths(snapshot)
        sys.meta_path.extend(f for f in hooks if f not in sys.meta_path)

    # undone after pytester's own restore at the end of the test (pytester depends on monkeypatch)
    monkeypatch.setattr(SysModulesSnapshot, "restore", forget_only_the_project_modules)
    monkeypatch.setattr(SysPathsSnapshot, "restore", keep_the_libraries_import_hooks)
    return InProcess(pytester)
