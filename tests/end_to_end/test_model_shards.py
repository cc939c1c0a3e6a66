"""Whole models across `check --shard` and `perfguard merge`: the merged model totals are, value for
value, what one unsharded check gives (real TVM extraction, builds and QEMU runs)."""

from __future__ import annotations

import json

import pytest

from perfguard.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from perfguard.shells.cli import main
from tests.conftest import REPO
from tests.end_to_end.test_models import NET, TOML, _set


@pytest.mark.slow
def test_merged_shards_give_the_unsharded_model_totals(project, tmp_path, capsys):
    path = project(TOML.format(widths=[16, 32, 8], repeat=2), {"mymodels.py": NET})
    assert main(["baseline", "update", "--config", str(path), "-j", "1"]) == 0
    # one more 8x8 layer (calls 2 -> 3) and 32 -> 24 (two kernels renamed): the total regresses, no kernel does,
    # and two baselines are leftovers that every shard sees
    _set(path, [16, 24, 8], 3)
    whole_json = tmp_path / "whole.json"
    assert main(["check", "--config", str(path), "-j", "1", "--json", str(whole_json)]) == EXIT_REGRESSION
    whole = json.loads(whole_json.read_text())
    (view,) = whole["models"]
    assert view["verdict"] == "regression" and len(view["kernels"]) == 5  # 3 now, 2 removed (renamed)
    assert sum(line.startswith("changed: ") for line in view["changes"]) == 2
    assert "model_parts" not in whole

    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
    import jsonschema

    files = []
    for i in (1, 2):
        files.append(tmp_path / f"shard-{i}.json")
        code = main(
            [
                "check",
                "--config",
                str(path),
                "-j",
                "1",
                "--shard",
                f"{i}/2",
                "--report-dir",
                str(tmp_path / f"r{i}"),
                "--json",
                str(files[-1]),
            ]
        )
        shard = json.loads(files[-1].read_text())
        jsonschema.validate(shard, schema)
        assert code == EXIT_OK and "models" not in shard  # a part of a model is not judged
        assert "model totals (m [x86_64]): this shard holds part of them" in capsys.readouterr().out
        (part,) = shard["model_parts"]
        assert part["kernels"] == sorted(r["kernel"] for r in whole["results"])
        assert len([r for r in part["rows"] if r["verdict"] != "removed"]) == len(shard["results"])
        assert len([r for r in part["rows"] if r["verdict"] == "removed"]) == 2

    capsys.readouterr()
    merged_json = tmp_path / "merged.json"
    assert (
        main(["merge", *map(str, files), "--report-dir", str(tmp_path / "m"), "--json", str(merged_json)])
        == EXIT_REGRESSION
    )
    merged = json.loads(merged_json.read_text())
    jsonschema.validate(merged, schema)
    assert merged["models"] == whole["models"]  # every float, row, share and change line
    assert merged["summary"]["model_regressions"] == 1 == whole["summary"]["model_regressions"]
    assert merged["summary"] == whole["summary"]
    assert "1 model total(s) regressed" in capsys.readouterr().out

    # a shard missing one of the model's kernels (a hand-edited report) is refused, naming the kernel
    one = json.loads(files[0].read_text())
    lost = one["model_parts"][0]["rows"].pop(0)
    files[0].write_text(json.dumps(one))
    assert main(["merge", *map(str, files), "--report-dir", str(tmp_path / "m2")]) == EXIT_USAGE
    assert f"kernel {lost['kernel']} is in no shard's report" in capsys.readouterr().err
