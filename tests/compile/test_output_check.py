"""The output check (issue 17): its cache key, its tolerances, what checked the outputs, and its messages.

Real TVM builds, real cross compilers, real QEMU runs: every warm-cache answer is compared with the
answer of the same config on an empty cache.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from perfguard.config import load_config
from perfguard.job.run import run_job
from perfguard.runs.check import make_jobs, select
from perfguard.shells.cli import main
from perfguard.targets import BUILTIN

# A user kernel B = 2 A (+ an ignored param), references to check it with, and a softmax.
KERNELS = """
import numpy as np
import tvm
from tvm import te


def double(n=64, **ignored):  # `bias` and `factor` only reach the reference
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


def nearly_double(n=64, **ignored):  # 1e-4 relative off: the tolerances decide
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0002, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


def _softmax(rows, n, wrong):
    A = te.placeholder((rows, n), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    m = te.compute((rows,), lambda i: te.max(A[i, k], axis=k), name="m")
    e = te.compute((rows, n), lambda i, j: te.exp(A[i, j] - m[i]), name="e")
    k2 = te.reduce_axis((0, n), name="k2")
    s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    B = te.compute((rows, n), lambda i, j: e[i, j] / s[i] * wrong, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


def softmax(rows=4, n=512):
    return _softmax(rows, n, 1.0)


def softmax_off_0_6pct(rows=4, n=512):
    return _softmax(rows, n, 1.006)


def softmax_off_1pct(rows=4, n=512):
    return _softmax(rows, n, 1.01)


def softmax_off_5pct(rows=4, n=512):
    return _softmax(rows, n, 1.05)


def softmax_ref(inputs, rows=4, n=512):
    (a,) = inputs
    e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True)).astype(np.float32)]
"""
REFS = """
def ref(inputs, n=64, bias=0.0, factor=2.0):
    return [inputs[0] * factor + bias]


def twice(inputs, n=64, bias=0.0, factor=2.0):
    return [inputs[0] * 4.0]


def no_args():
    return []
"""

# model = "analytical": no verdict is judged here (every result is new), so the jobs do not schedule
# their blocks with llvm-mca for the pipeline model
CONFIG = """\
[perfguard]
targets = ["aarch64"]
cache_dir = "{cache}"
model = "analytical"

[[kernel]]
name = "k"
entry = "mykernels.ops:{entry}"
params = {params}
{extra}
"""


@pytest.fixture(autouse=True)
def fresh_modules():
    """Each project has its own `mykernels`: forget the previous one's modules."""
    yield
    for name in [m for m in sys.modules if m == "mykernels" or m.startswith("mykernels.")]:
        del sys.modules[name]


def run(root: Path, cache: Path, entry: str, params: str, extra: str, capsys=None) -> tuple[int, str, dict]:
    """`perfguard check` on a project written afresh: (exit code, one-line output, the result). Without
    capsys (a module fixture has none) the output is caught here."""
    for name in [m for m in sys.modules if m == "mykernels" or m.startswith("mykernels.")]:
        del sys.modules[name]
    root.mkdir(parents=True, exist_ok=True)
    (root / "perfguard.toml").write_text(CONFIG.format(cache=cache, entry=entry, params=params, extra=extra))
    (root / "mykernels").mkdir(exist_ok=True)
    (root / "mykernels" / "__init__.py").write_text("")
    (root / "mykernels" / "ops.py").write_text(KERNELS)
    if not (root / "mykernels" / "refs.py").exists():
        (root / "mykernels" / "refs.py").write_text(REFS)
    if capsys is None:
        with contextlib.redirect_stdout(io.StringIO()) as caught:
            code = main(["check", "--config", str(root / "perfguard.toml")])
        out = " ".join(caught.getvalue().split())
    else:
        code = main(["check", "--config", str(root / "perfguard.toml")])
        out = " ".join(capsys.readouterr().out.split())
    result = json.loads((root / "reports" / "perfguard.json").read_text())["results"][0]
    return code, out, result


# (what changes, warm config, changed config): entry, params, extra lines, and the expected answer
CHANGES = [
    (
        "reference function",
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:ref"'),
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:twice"'),
        4,
        "wrong result",
    ),
    (
        "reference signature",
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:ref"'),
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:no_args"'),
        2,
        "reference 'mykernels.refs:no_args' raised TypeError",
    ),
    (
        "reference params",
        ("double", "{ n = 64, bias = 0.0 }", 'reference = "mykernels.refs:ref"'),
        ("double", "{ n = 64, bias = 1.0 }", 'reference = "mykernels.refs:ref"'),
        4,
        "wrong result",
    ),
    (
        "rtol",
        ("nearly_double", "{ n = 64 }", 'reference = "mykernels.refs:ref"\nrtol = 1e-3\natol = 0.0'),
        ("nearly_double", "{ n = 64 }", 'reference = "mykernels.refs:ref"\nrtol = 1e-6\natol = 0.0'),
        4,
        "rtol 1e-06, atol 0",
    ),
    (
        "atol",
        ("nearly_double", "{ n = 64 }", 'reference = "mykernels.refs:ref"\nrtol = 0.0\natol = 1e-3'),
        ("nearly_double", "{ n = 64 }", 'reference = "mykernels.refs:ref"\nrtol = 0.0\natol = 1e-7'),
        4,
        "rtol 0, atol 1e-07",
    ),
    (
        "outputs",
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:ref"'),
        ("double", "{ n = 64 }", 'reference = "mykernels.refs:ref"\noutputs = 2'),
        2,
        "reference 'mykernels.refs:ref' raised IndexError",
    ),
]


@pytest.fixture(scope="module")
def warmed(tmp_path_factory) -> Path:
    """A folder holding a project p/ and its cache cache/, in which every warm config of CHANGES was
    checked (each: exit 0, a new result, checked against its numpy reference). Tests copy it."""
    root = tmp_path_factory.mktemp("warmed")
    for warm in dict.fromkeys(change[1] for change in CHANGES):
        first, _, result = run(root / "p", root / "cache", *warm)
        assert first == 0 and result["verdict"] == "new" and result["reference"] == "numpy", warm
    return root


@pytest.mark.slow
@pytest.mark.parametrize("what, warm, changed, code, needle", CHANGES, ids=[c[0] for c in CHANGES])
def test_a_warm_cache_gives_the_cold_cache_answer(warmed, tmp_path, capsys, what, warm, changed, code, needle):
    shutil.copytree(warmed, tmp_path, dirs_exist_ok=True)  # the project and the cache its warm config filled
    warm_code, warm_out, warm_result = run(tmp_path / "p", tmp_path / "cache", *changed, capsys)
    cold_code, cold_out, cold_result = run(tmp_path / "cold", tmp_path / "empty-cache", *changed, capsys)
    assert (warm_code, cold_code) == (code, code), (warm_out, cold_out)
    assert needle in warm_out and needle in cold_out, (warm_out, cold_out)
    assert warm_result["error"] == cold_result["error"].replace(str(tmp_path / "cold"), str(tmp_path / "p"))


@pytest.mark.slow
def test_an_edited_reference_module_is_checked_again(warmed, tmp_path, capsys):
    """Same 'module:function', new source: the module file's digest is in the key."""
    shutil.copytree(warmed, tmp_path, dirs_exist_ok=True)  # p/ was checked with this config: exit 0
    cache = tmp_path / "cache"
    refs = tmp_path / "p" / "mykernels" / "refs.py"
    refs.write_text(REFS.replace("return [inputs[0] * factor + bias]", "return [inputs[0] * factor * 1.5]"))
    code, out, result = run(tmp_path / "p", cache, "double", "{ n = 64 }", 'reference = "mykernels.refs:ref"', capsys)
    assert code == 4 and "wrong result: output 'B'[" in out and result["resimulated"] is False
    assert result["verdict"] == "wrong result" and result["mismatch"]["output"] == "B"


@pytest.mark.slow
def test_the_check_runs_again_only_when_its_key_changes(tmp_path, monkeypatch):
    """Unchanged: neither simulated nor checked again; a new CHECK_VERSION: checked, not simulated."""
    from perfguard.job import verify

    root = tmp_path / "p"
    (root / "mykernels").mkdir(parents=True)
    (root / "mykernels" / "__init__.py").write_text("")
    (root / "mykernels" / "ops.py").write_text(KERNELS)
    (root / "mykernels" / "refs.py").write_text(REFS)
    (root / "perfguard.toml").write_text(
        CONFIG.format(
            cache=tmp_path / "cache", entry="double", params="{ n = 64 }", extra='reference = "mykernels.refs:ref"'
        )
    )
    config = load_config(root / "perfguard.toml")
    job = make_jobs(config, select(config, None, None))[0]
    first, second = run_job(job), run_job(job)
    assert first.ok, first.error  # (once seen failing in a fresh clone's suite, message cut: say it whole)
    assert first.resimulated and first.rechecked
    assert second.ok and not second.resimulated and not second.rechecked
    monkeypatch.setattr(verify, "CHECK_VERSION", verify.CHECK_VERSION + 1)
    third = run_job(job)
    assert third.ok and not third.resimulated and third.rechecked and third.max_error == first.max_error


@pytest.mark.slow
@pytest.mark.parametrize(
    "entry, caught",
    [("softmax", False), ("softmax_off_0_6pct", True), ("softmax_off_1pct", True), ("softmax_off_5pct", True)],
)
def test_default_tolerances_catch_a_softmax_off_by_0_6_percent(tmp_path, cache_dir, capsys, entry, caught):
    code, out, result = run(
        tmp_path / "p", cache_dir, entry, "{ rows = 4, n = 512 }", 'reference = "mykernels.ops:softmax_ref"', capsys
    )
    if caught:
        assert code == 4 and "wrong result: output 'B'[" in out, out
        assert "np.int64" not in out and "rtol 1e-05" in out  # plain indices, the defaults it used
    else:
        assert code == 0 and result["max_error"] < 1e-6, out


@pytest.mark.slow
def test_without_a_numpy_reference_it_says_self_consistency_only(tmp_path, cache_dir, capsys):
    code, out, result = run(tmp_path / "p", cache_dir, "double", "{ n = 64 }", "", capsys)
    assert code == 0 and result["reference"] == "self"
    assert "self-consistency only" in out  # the terminal
    reports = tmp_path / "p" / "reports"
    assert "self-consistency only" in (reports / "summary.md").read_text()
    assert "self-consistency only" in (reports / "index.html").read_text()
    assert "self-consistency only" in (reports / "kernels" / "k.html").read_text()
    code, out, result = run(
        tmp_path / "p", cache_dir, "double", "{ n = 64 }", 'reference = "mykernels.refs:ref"', capsys
    )
    assert code == 0 and result["reference"] == "numpy" and "self-consistency only" not in out
    assert "self-consistency only" not in (reports / "summary.md").read_text()


@pytest.mark.slow
def test_require_reference(tmp_path, cache_dir, capsys):
    root = tmp_path / "p"
    code, out, result = run(root, cache_dir, "double", "{ n = 64 }", "", capsys)
    assert code == 0
    text = (root / "perfguard.toml").read_text().replace("[perfguard]\n", "[perfguard]\nrequire_reference = true\n")
    (root / "perfguard.toml").write_text(text)
    assert main(["check", "--config", str(root / "perfguard.toml")]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "kernel 'k' on aarch64: no numpy reference, and require_reference = true" in out


@pytest.mark.slow
@pytest.mark.parametrize("flops", ['"2 * n"', '"mykernels.refs:work"'])
def test_user_kernel_flops_give_gflops_roofline_and_bound(tmp_path, cache_dir, capsys, flops):
    root = tmp_path / "p"
    (root / "mykernels").mkdir(parents=True)
    (root / "mykernels" / "refs.py").write_text(REFS + "\n\ndef work(n, **params):\n    return 2 * n\n")
    code, out, result = run(root, cache_dir, "double", "{ n = 4096 }", f"flops = {flops}", capsys)
    assert code == 0 and result["flops"] == 8192
    current = result["analysis"]["current"]
    assert current["gflops"] == pytest.approx(8192 / result["current_time_s"] / 1e9)
    assert current["bound"] in ("compute", "memory", "latency")
    page = (root / "reports" / "kernels" / "k.html").read_text()
    assert "GFLOP/s" in page and "add <code>flops" not in page


@pytest.mark.slow
def test_without_flops_the_page_says_how_to_add_them(tmp_path, cache_dir, capsys):
    code, out, result = run(tmp_path / "p", cache_dir, "double", "{ n = 64 }", "", capsys)
    assert code == 0 and result["flops"] is None
    page = " ".join((tmp_path / "p" / "reports" / "kernels" / "k.html").read_text().split())
    assert (
        "add <code>flops = &#34;2 * M * N * K&#34;</code>" in page
        or "add <code>flops = &quot;2 * M * N * K&quot;</code>" in page
    )
    summary = " ".join((tmp_path / "p" / "reports" / "index.html").read_text().split())
    assert "1 kernel x target result without a flop count" in summary


def _config_error(tmp_path, capsys, toml: str, argv: tuple[str, ...] = ()) -> str:
    path = tmp_path / "perfguard.toml"
    path.write_text(textwrap.dedent(toml))
    assert main(["check", "--config", str(path), *argv]) == 2
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


GEMV = '[perfguard]\ntargets = ["aarch64"]\n\n[[kernel]]\nname = "v"\nentry = "perfguard.kernels.gemv:gemv"\n'


def test_messages(tmp_path, capsys):
    line = _config_error(tmp_path, capsys, GEMV, ("--targets", "mips"))
    assert (
        line.startswith("error: --targets: unknown target 'mips' (known: aarch64, riscv64")
        or "--targets: unknown target 'mips' (known: aarch64" in line
    )
    assert "perfguard.toml: " not in line.split("unknown target")[0]
    line = _config_error(tmp_path, capsys, GEMV, ("--kernels", "nope"))
    assert "--kernels: unknown kernel 'nope'" in line and "perfguard.toml: " not in line.split("unknown kernel")[0]
    line = _config_error(tmp_path, capsys, GEMV + 'targets = ["riscv"]\n')
    known = ", ".join(sorted(BUILTIN))  # every built-in profile, whichever were added since
    assert f"targets: unknown target 'riscv' (did you mean 'riscv64'?) (known: {known})" in line
    line = _config_error(tmp_path, capsys, GEMV.replace("perfguard.kernels.gemv:gemv", "mykernels.softmax.softmax"))
    assert "did you mean 'mykernels.softmax:softmax'?" in line and "not a path" not in line


def test_doctor_reads_the_config(tmp_path, capsys):
    path = tmp_path / "perfguard.toml"
    path.write_text(
        '[perfguard]\ntargets = ["aarch64", "odd"]\n\n[target.odd]\nbase = "riscv64"\n'
        'cc = "no-such-linux-gnu-gcc"\n\n[[kernel]]\nname = "v"\nentry = "perfguard.kernels.gemv:gemv"\n'
        'targets = ["x86_64"]\n'
    )
    assert main(["doctor", "--config", str(path)]) == 3
    out = " ".join(capsys.readouterr().out.split())
    assert f"{path} needs simulator qemu for 3 target(s): aarch64, odd, x86_64" in out
    assert "ok aarch64: aarch64-linux-gnu-gcc and qemu for aarch64" in out
    assert "missing odd: target odd: cross compiler 'no-such-linux-gnu-gcc' not found" in out
    assert "1 required tool(s) missing" in out
    path.write_text('[perfguard]\ntargets = ["sparc"]\n')
    assert main(["doctor", "--config", str(path)]) == 2


def test_flop_expressions_are_arithmetic_over_params_only():
    from perfguard import flopcount
    from perfguard.errors import InputError

    params = {"M": 6, "N": 4, "K": 5, "dtype": "float32", "fast": True}
    assert flopcount.evaluate("2 * M * N * K", params, "w") == 240
    assert (
        flopcount.evaluate("max(M, N) ** 2 // 4 - min(K, 3) + 7 % 4 + 1.6", params, "w") == 11
    )  # 9 - 3 + 3 + 1.6, rounded
    assert flopcount.parse(120, params, "w") == "120" and flopcount.parse("m.mod:f", params, "w") == "m.mod:f"
    for text, needle in [
        ("M.bit_length()", "only numbers"),
        ("open('x')", "only numbers"),
        ("dtype * 2", "not a numeric"),
        ("fast * 2", "not a numeric"),
        ("M / (N - 4)", "division by zero"),
        ("2 **", "not an arithmetic"),
        ("9 ** 99", "too large"),
        ("-M", "finite number >= 0"),
        ("[M]", "only numbers"),
    ]:
        with pytest.raises(InputError, match=re.escape(needle)):
            flopcount.evaluate(text, params, "kernel 'k': flops")
