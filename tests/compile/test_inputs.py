"""Configured inputs (a [[kernel]]'s `inputs`): the simulated harness fills them with exactly the
values the host's reference gets, on every ISA; a bad entry is one line naming it (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfguard.compile.inputs import TensorSpec, generate
from perfguard.document.report import read_report
from perfguard.report.text import change_text
from perfguard.shells.cli import main

ISAS = ["x86_64", "aarch64", "riscv64"]

# Every input copied to an output, so the output check (exact: rtol = atol = 0) compares the values
# the simulated harness wrote into the inputs with compile.inputs.generate's, bit for bit.
KERNELS = """
import numpy as np


def copies(n=96):
    import tvm
    from tvm import te

    idx = te.placeholder((n,), "int32", name="idx")
    wide = te.placeholder((n,), "int64", name="wide")
    x = te.placeholder((n,), "float32", name="x")
    byte = te.placeholder((n,), "uint8", name="byte")
    def copy(t):  # not `lambda i, t=t:`: TVM refuses default arguments in a compute function
        return te.compute((n,), lambda i: t[i], name=t.op.name + "_out")

    outs = [copy(t) for t in (idx, wide, x, byte)]
    return tvm.IRModule({"main": te.create_prim_func([idx, wide, x, byte, *outs])})


def copies_ref(inputs, n=96):
    idx, wide, x, byte = inputs
    assert 0 <= idx.min() and idx.max() < 4096, "idx outside [0, 4096)"
    return [a.copy() for a in inputs]
"""

CONFIG = """
[perfguard]
targets = {targets}
cache_dir = "{cache}"

[[kernel]]
name = "copies"
entry = "mykernels.ops:copies"
reference = "mykernels.ops:copies_ref"
outputs = 4
rtol = 0
atol = 0
flops = "0"
inputs = {inputs}
"""

GOOD = (
    "{ idx = { low = 0, high = 4096 }, wide = { low = -5000000000, high = -4999999000 }, "
    "x = { low = -2.5, high = 7, seed = 3 }, byte = { low = 200, high = 256 } }"
)


def project(root: Path, cache: Path, inputs: str, targets: list[str]) -> Path:
    (root / "mykernels").mkdir(parents=True, exist_ok=True)
    (root / "mykernels" / "__init__.py").write_text("")
    (root / "mykernels" / "ops.py").write_text(KERNELS)
    (root / "perfguard.toml").write_text(CONFIG.format(targets=json.dumps(targets), cache=cache, inputs=inputs))
    return root / "perfguard.toml"


def test_generated_ranges_cover_what_was_asked():
    def values(dtype, fill, index=0):
        return generate(TensorSpec("t", (65536,), dtype, False, index, fill))

    idx = values("int32", (0, 4096, None))
    assert idx.min() == 0 and idx.max() == 4095 and len(np.unique(idx)) == 4096
    wide = values("int64", (-5_000_000_000, -4_999_999_000, None))
    assert wide.min() >= -5_000_000_000 and wide.max() < -4_999_999_000 and wide.max() > -4_999_999_010
    x = values("float32", (-2.5, 7.0, 3))
    assert x.min() >= -2.5 and x.max() < 7.0 and x.max() > 6.9 and x.min() < -2.4
    # a seed is its own stream: not the position's, not another seed's
    assert not np.array_equal(values("float32", (-2.5, 7.0, 3)), values("float32", (-2.5, 7.0, 4)))
    assert not np.array_equal(values("float32", (None, None, 3)), values("float32", None))
    # the default fill is unchanged: trunc(8 u), u in [-1, 1): -8 only at u = -1 exactly, so -7..7 in practice
    default = values("int32", None)
    assert default.min() == -7 and default.max() == 7


@pytest.mark.slow
def test_configured_inputs_reach_kernel_and_reference_alike_on_every_isa(tmp_path):
    config = project(tmp_path / "p", tmp_path / "cache", GOOD, ISAS)
    assert main(["baseline", "update", "--config", str(config)]) == 0
    assert main(["check", "--config", str(config)]) == 0
    results = json.loads((tmp_path / "p" / "reports" / "perfguard.json").read_text())["results"]
    assert sorted(r["target"] for r in results) == sorted(ISAS)
    assert all(r["verdict"] == "unchanged" and r["max_error"] == 0.0 for r in results), results
    # the inputs are in the job's key: another range is another build, checked again
    (tmp_path / "p" / "perfguard.toml").write_text(config.read_text().replace("high = 4096", "high = 4000"))
    assert main(["check", "--config", str(config)]) == 0
    results = json.loads((tmp_path / "p" / "reports" / "perfguard.json").read_text())["results"]
    assert all(r["rebuilt"] for r in results), [r.get("rebuilt") for r in results]


def test_default_integer_inputs_are_named_in_a_wrong_results_hint(tmp_path, capsys):
    # idx drawn by default ([-8, 7]): the reference refuses... so a gather-like reference that
    # does not check: the copy is right, the hint shows only on a wrong result -- make one by
    # asking for exactness against a reference that shifts the values
    config = project(tmp_path / "p", tmp_path / "cache", "{ x = { seed = 1 } }", ["x86_64"])
    ops = tmp_path / "p" / "mykernels" / "ops.py"
    ops.write_text(
        ops.read_text()
        .replace('    assert 0 <= idx.min() and idx.max() < 4096, "idx outside [0, 4096)"\n', "")
        .replace("return [a.copy() for a in inputs]", "return [inputs[0] + 1, *inputs[1:]]")
    )
    assert main(["check", "--config", str(config)]) == 4
    out = capsys.readouterr().out
    assert "integer inputs idx, wide, byte drawn by default from [-8, 7]" in out, out
    assert "inputs = { idx = { low = 0, high = N } }" in out


# the first five are refused as the config is read (stderr), the rest once the kernel's module is made
@pytest.mark.parametrize(
    "inputs, message",
    [
        ("{ idx = { low = 0 } }", "kernel 'copies': inputs: idx: low and high go together"),
        ("{ idx = { low = 0, hihg = 3 } }", "kernel 'copies': inputs: idx: unknown key 'hihg' (did you mean 'high'?)"),
        (
            "{ idx = { low = 5, high = 5 } }",
            "inputs: idx: low must be below high (values in [low, high)), got low = 5, high = 5",
        ),
        ("{ idx = { seed = -1 } }", "inputs: idx: seed"),
        ("{ idx = 3 }", "inputs: idx: must be a table"),
        (
            "{ idz = { low = 0, high = 4 } }",
            "inputs: 'idz' is not an input of the kernel (its inputs: idx, wide, x, byte)",
        ),
        ("{ idx_out = { low = 0, high = 4 } }", "inputs: 'idx_out' is an output"),
        ("{ idx = { low = 0, high = 4.5 } }", "inputs: idx: int32 takes whole numbers, got low = 0, high = 4.5"),
        ("{ byte = { low = -1, high = 4 } }", "inputs: byte: [-1, 4) does not fit uint8"),
    ],
)
def test_a_bad_inputs_entry_is_an_input_error_naming_it(tmp_path, capsys, inputs, message):
    config = project(tmp_path / "p", tmp_path / "cache", inputs, ["x86_64"])
    assert main(["check", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert message in captured.out + captured.err, captured
    if message in captured.err:
        assert len(captured.err.strip().splitlines()) == 1, captured.err


NPY_INPUTS = '{ idx = { file = "data/idx.npy" }, wide = { file = "data/wide.npy" }, x = { seed = 2 } }'


def write_npy(root: Path, idx: np.ndarray, wide: np.ndarray | None = None) -> None:
    (root / "data").mkdir(parents=True, exist_ok=True)
    np.save(root / "data" / "idx.npy", idx)
    if wide is not None:
        np.save(root / "data" / "wide.npy", wide)


@pytest.mark.slow
def test_npy_inputs_reach_kernel_and_reference_and_a_changed_file_is_built_and_checked_again(tmp_path):
    """Values given as .npy files are the ones the simulated kernel and its reference see (exact
    copies, on every ISA; a big-endian file too); the file's content is in the keys: another
    content is another build and another output check, never the recorded result."""
    root = tmp_path / "p"
    config = project(root, tmp_path / "cache", NPY_INPUTS, ISAS)
    write_npy(
        root, (np.arange(96, dtype=np.int32) * 37) % 4096, (np.arange(96, dtype=np.int64) * -123456789013).astype(">i8")
    )
    assert main(["baseline", "update", "--config", str(config)]) == 0
    recorded = json.loads((root / "baselines" / "x86_64" / "copies.json").read_text())
    assert recorded["schema"] == 5 and recorded["source"].startswith("def copies(n=96):\n")
    idx_digest = recorded["inputs"]["idx"]["sha256"]
    assert recorded["inputs"] == {
        "idx": {"file": "data/idx.npy", "sha256": idx_digest},
        "wide": {"file": "data/wide.npy", "sha256": recorded["inputs"]["wide"]["sha256"]},
        "x": {"seed": 2},
    }
    assert main(["check", "--config", str(config)]) == 0
    results = json.loads((root / "reports" / "perfguard.json").read_text())["results"]
    assert all(r["verdict"] == "unchanged" and r["max_error"] == 0.0 and not r["rebuilt"] for r in results), results
    assert all(r["baseline_inputs"] == recorded["inputs"] and "source_diff" not in r for r in results)

    # another content of the same file: rebuilt, simulated and checked again, the change named
    idx = (np.arange(96, dtype=np.int32) * 91) % 4096
    write_npy(root, idx)
    assert main(["check", "--config", str(config)]) == 0
    report = read_report(root / "reports" / "perfguard.json")
    for r in report.results:
        assert r.rebuilt and r.resimulated and r.max_error == 0.0, r.label
        assert r.inputs["idx"]["sha256"] == __import__("hashlib").sha256(idx.tobytes()).hexdigest() != idx_digest
        assert f"inputs.idx.sha256 {idx_digest[:12]} -> {r.inputs['idx']['sha256'][:12]}" in change_text(r)

    # the reference sees the new values too: an index it refuses fails the check, not a recorded pass
    write_npy(root, np.full(96, 5000, dtype=np.int32))
    assert main(["check", "--config", str(config)]) != 0
    errors = [r["error"] for r in json.loads((root / "reports" / "perfguard.json").read_text())["results"]]
    assert all(e and "idx outside [0, 4096)" in e for e in errors), errors


@pytest.mark.parametrize(
    "inputs, files, message",
    [
        (
            '{ idx = { file = "data/idx.npy" } }',
            {"idx.npy": np.zeros(95, np.int32)},
            "kernel 'copies' on x86_64: inputs: idx: 'data/idx.npy' holds int32[95], the kernel's input 'idx' is int32[96]",
        ),
        (
            '{ idx = { file = "data/idx.npy" } }',
            {"idx.npy": np.zeros(96, np.int64)},
            "kernel 'copies' on x86_64: inputs: idx: 'data/idx.npy' holds int64[96], the kernel's input 'idx' is int32[96]",
        ),
        (
            '{ x = { file = "data/x.npy" } }',
            {"x.npy": np.zeros((8, 12), np.float32)},
            "inputs: x: 'data/x.npy' holds float32[8, 12], the kernel's input 'x' is float32[96]",
        ),
        ('{ idx = { file = "data/gone.npy" } }', {}, "inputs: idx: file 'data/gone.npy' does not exist"),
        (
            '{ idx = { file = "data/idx.npy" } }',
            {"idx.npy": b"not numpy"},
            "inputs: idx: 'data/idx.npy' is not a readable .npy file",
        ),
        ('{ idx = { file = "../idx.npy" } }', {}, "inputs: idx: file '../idx.npy' leads outside the config's folder"),
        (
            '{ idx = { file = "data/idx.npy", low = 0 } }',
            {},
            "inputs: idx: file gives the values whole: no low beside it",
        ),
        ('{ idx = { file = "data/idx.txt" } }', {}, "inputs: idx: file must be the path of a .npy file"),
    ],
)
def test_a_bad_npy_input_is_an_input_error_naming_file_input_and_both_shapes(tmp_path, capsys, inputs, files, message):
    root = tmp_path / "p"
    config = project(root, tmp_path / "cache", inputs, ["x86_64"])
    (root / "data").mkdir()
    for name, value in files.items():
        if isinstance(value, bytes):
            (root / "data" / name).write_bytes(value)
        else:
            np.save(root / "data" / name, value)
    assert main(["check", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    report = root / "reports" / "perfguard.json"
    said = captured.err.splitlines() + (
        [r["error"] for r in json.loads(report.read_text())["results"]] if report.exists() else []
    )
    line = next((line for line in said if message in line), None)
    assert line is not None and "\n" not in line and len(line) < 300, (said, captured.out)
