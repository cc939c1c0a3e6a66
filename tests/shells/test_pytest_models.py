"""pytest --perfguard and whole models: perfguard_check("<model>", target) gives the model's total and
its kernels' results, a model kernel's name works like a configured kernel's, an unknown name is an
error naming it (the user's pytest in this process, tests/shells/user_pytest.py: what crosses a
process boundary is test_pytest_plugin's; real TVM extraction, builds and QEMU runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.end_to_end.test_models import NET, TOML
from tests.projects import with_cache

pytest_plugins = ["pytester"]

MODEL_TESTS = """
import pytest

from perfguard.errors import InputError


def test_model_total(perfguard_check):
    r = perfguard_check("m", "x86_64")
    assert len(r.kernels) == 3 and {k.kernel.split(".")[0] for k in r.kernels} == {"m"}
    calls = {k.kernel: k.report.params["calls"] for k in r.kernels}
    assert sorted(calls.values()) == [1, 1, {repeat}]
    assert r.current_total_s == pytest.approx(sum(k.current_time_s * calls[k.kernel] for k in r.kernels), rel=1e-12)
    assert r.total.model == "m" and r.total.current_total_s == r.current_total_s
    assert r.ok, r.explain()


def test_model_kernel_by_name(perfguard_check):
    whole = perfguard_check("m", "x86_64")
    name = whole.kernels[0].kernel
    one = perfguard_check(name, "x86_64")
    assert one.kernel == name and one.current_time_s == whole.kernel(name).current_time_s
    assert one.ok, one.explain()


def test_model_unknown_names(perfguard_check):
    with pytest.raises(InputError, match="unknown kernel or model 'nope' .*models m"):
        perfguard_check("nope", "x86_64")
    with pytest.raises(InputError, match="unknown kernel 'm.nope' of model 'm' on x86_64"):
        perfguard_check("m.nope", "x86_64")
"""


def write_model_project(root: Path, cache_dir: Path, repeat: int) -> None:
    toml = TOML.format(widths=[16, 32, 8], repeat=repeat)
    root.mkdir(parents=True, exist_ok=True)
    (root / "perfguard.toml").write_text(with_cache(toml, cache_dir))
    (root / "test_models.py").write_text(MODEL_TESTS.replace("{repeat}", str(repeat)))
    (root / "mymodels.py").write_text(NET)


@pytest.mark.slow
def test_model_totals_and_kernels_from_pytest(in_process, cache_dir):
    root = in_process.root
    write_model_project(root, cache_dir, 2)
    result = in_process.run("--perfguard-update", "-k", "test_model")
    assert result.ret == 0, result.out
    assert len(list((root / "baselines" / "x86_64").glob("m.*.json"))) == 3
    report = json.loads((root / "reports" / "perfguard.json").read_text())
    assert [m["verdict"] for m in report["models"]] == ["new", "unchanged"]  # the first test wrote the baselines

    write_model_project(
        root, cache_dir, 3
    )  # one more 8x8 layer: no kernel is slower, the model is (one kernel called once more)
    result = in_process.run("--perfguard", "-k", "test_model_total")
    text = result.out
    assert result.ret == 1, text
    failure = text[text.index("_ test_model_total _") :]
    assert "model m[x86_64]: regression +" in failure and "calls 2 -> 3" in failure and "(m.matmul_add_relu." in failure
    report = json.loads((root / "reports" / "perfguard.json").read_text())
    (view,) = report["models"]
    assert view["verdict"] == "regression" and report["summary"]["model_regressions"] == 1
    assert report["summary"]["exit_code"] == 1 and {r["verdict"] for r in report["results"]} == {"unchanged"}
    assert "model m [x86_64]: regression" in text  # the terminal summary shows the model view
