"""User kernel modules are isolated per configuration: two projects in one process that both
have a `mykernels` package each get their own code, in either order, including modules the
package itself imports and modules only one project has."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfguard.config import load_callable
from perfguard.errors import InputError


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
    assert sys.modules["perfguard.config"].load_callable is load_callable  # perfguard itself never reloaded


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
