"""User kernel modules are isolated per configuration: two projects in one process that both
have a `mykernels` package each get their own code, in either order, including modules the
package itself imports and modules only one project has."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfguard.errors import InputError
from perfguard.user_code.imports import load_callable


def _project(root: Path, value: int, extra: bool) -> Path:
    pkg = root / "mykernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    # ops imports a sibling top-level helper module: it must be isolated too.
    (root / "kernel_helpers.py").write_text(f"VALUE = {value}\n")
    (pkg / "ops.py").write_text("import kernel_helpers\n\ndef which():\n    return kernel_helpers.VALUE\n")
    if extra:
        (pkg / "only_here.py").write_text(f"def which():\n    return {value * 10}\n")
    return root


@pytest.mark.parametrize("order", ["ab", "ba", "aba"])
def test_two_projects_with_the_same_package_name(tmp_path, order):
    roots = {"a": _project(tmp_path / "a", 1, extra=True), "b": _project(tmp_path / "b", 2, extra=False)}
    expected = {"a": 1, "b": 2}
    for name in order:
        which = load_callable("mykernels.ops:which", roots[name], f"{name}/perfguard.toml")
        assert which() == expected[name], f"project {name} ran another project's code"
    if order.endswith("b"):
        # A module that only project a has must not be found through a's leftover path entry.
        with pytest.raises(InputError, match="cannot import 'mykernels.only_here'"):
            load_callable("mykernels.only_here:which", roots["b"], "b/perfguard.toml")
    else:
        assert load_callable("mykernels.only_here:which", roots["a"], "a/perfguard.toml")() == 10
    assert sys.modules["perfguard.user_code.imports"].load_callable is load_callable  # perfguard itself never reloaded


def test_perfguard_and_installed_packages_are_never_forgotten(tmp_path):
    import numpy

    _project(tmp_path / "a", 1, extra=False)
    _project(tmp_path / "b", 2, extra=False)
    load_callable("mykernels.ops:which", tmp_path / "a", "a")
    load_callable("perfguard.kernels.gemm:gemm", tmp_path / "b", "b")
    load_callable("mykernels.ops:which", tmp_path / "a", "a")
    assert sys.modules["numpy"] is numpy
    assert "perfguard.kernels.gemm" in sys.modules


def test_a_module_edited_on_disk_is_imported_afresh(tmp_path):
    root = _project(tmp_path / "a", 1, extra=False)
    assert load_callable("mykernels.ops:which", root, "a")() == 1
    (root / "kernel_helpers.py").write_text("VALUE = 7  # edited, and a different size\n")
    assert load_callable("mykernels.ops:which", root, "a")() == 7


# -- dependency files (user_code.recording) ---------------------------------------------------------


def _deps_project(root: Path) -> Path:
    """entry -> mid -> helper (two imports away), a module imported lazily inside a function, a
    data file the entry reads, and an unrelated module another entry uses."""
    pkg = root / "deps"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text("from deps import mid\n\ndef run():\n    return mid.value()\n")
    (pkg / "mid.py").write_text(
        "from deps.helper import FACTOR\n\ndef value():\n    from deps import lazy\n    return FACTOR * lazy.TWO\n"
    )
    (pkg / "helper.py").write_text("FACTOR = 3\n")
    (pkg / "lazy.py").write_text("TWO = 2\n")
    (pkg / "other.py").write_text(
        "import json\n\ndef run():\n    with open(__file__.replace('other.py', 'table.json')) as f:\n"
        "        return json.load(f)\n"
    )
    (pkg / "table.json").write_text("[1, 2]\n")
    return root


def _recorded(root: Path, ref: str) -> tuple[object, set[str]]:
    from perfguard.user_code.reads import recording

    with recording(root, exclude=(root / "cache",)) as deps:
        value = load_callable(ref, root, "t")()
    return value, {path for path, _ in deps.digests()}


def test_recording_names_every_file_an_entry_depends_on_again_and_again(tmp_path):
    root = _deps_project(tmp_path / "p")
    first = _recorded(root, "deps.entry:run")
    assert first == (6, {"deps/__init__.py", "deps/entry.py", "deps/mid.py", "deps/helper.py", "deps/lazy.py"})
    other = _recorded(root, "deps.other:run")  # imported since: reads a data file of the project
    assert other == ([1, 2], {"deps/__init__.py", "deps/other.py", "deps/table.json"})
    # The second time nothing is imported afresh (all in sys.modules): the import graph still knows.
    assert _recorded(root, "deps.entry:run") == first


def test_digests_change_with_a_file_two_imports_away(tmp_path):
    from perfguard.user_code.reads import recording, unchanged

    root = _deps_project(tmp_path / "p")
    with recording(root) as deps:
        load_callable("deps.entry:run", root, "t")()
    recorded = deps.digests()
    assert unchanged(root, recorded)
    (root / "deps" / "other.py").write_text("# not a dependency of entry\n")
    assert unchanged(root, recorded)
    (root / "deps" / "helper.py").write_text("FACTOR = 4\n")
    assert not unchanged(root, recorded)
    assert not unchanged(root, [["deps/helper.py"]]) and not unchanged(root, "damaged")  # malformed: never unchanged
