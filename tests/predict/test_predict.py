"""Predictors (scikit-learn's estimator contract), features, leave-one-group-out evaluation, the
dataset and model stores and re-scoring."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from perfguard.errors import InputError
from perfguard.predict.calibrated import CalibratedModel
from perfguard.predict.dataset import Dataset, Row, dataset_path, load_dataset
from perfguard.predict.estimator import CalibratedPredictor
from perfguard.predict.evaluate import leave_one_group_out, metrics
from perfguard.predict.features import matrix
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.store import load_model, model_path, save_model
from perfguard.shells.cli import main
from perfguard.sim.stats import STAT_FIELDS, Stats
from perfguard.targets import BUILTIN
from tests import captured
from tests.projects import ONE_GEMM as TOML

X86 = BUILTIN["x86_64"]


def counts(stats, predictor):
    return matrix(stats, "counts", predictor.view)


def synthetic(n_groups=4, per_group=40, seed=0):
    """Stats whose time follows a known additive law, the groups being shapes of different size."""
    rng = np.random.default_rng(seed)
    stats, times, groups = [], [], []
    for g in range(n_groups):
        size = 2.0**g
        for _ in range(per_group):
            insts = int(size * rng.uniform(1e6, 4e6))
            l1d_misses = int(insts * rng.uniform(0.001, 0.08))
            l2_misses = int(l1d_misses * rng.uniform(0.0, 0.3))
            values = {f: 0 for f in STAT_FIELDS}
            values.update(
                insts=insts,
                loads=insts // 3,
                stores=insts // 8,
                l1d_accesses=insts // 2,
                l1d_misses=l1d_misses,
                l2_accesses=l1d_misses,
                l2_misses=l2_misses,
                l1i_accesses=insts,
                branches=insts // 10,
                vec_insts=insts // 2,
            )
            stats.append(Stats(**values))
            times.append(1e-9 * (0.3 * insts + 12 * l1d_misses + 90 * l2_misses))
            groups.append(f"g{g}")
    return stats, np.array(times), np.array(groups)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, max_mape, min_rho", [("mlr", 1.0, 0.99), ("dnn", 12.0, 0.9), ("gp", 12.0, 0.9), ("xgboost", 20.0, 0.85)]
)
def test_each_predictor_learns_a_known_relation(name, max_mape, min_rho):
    stats, times, groups = synthetic()
    estimator = PREDICTORS[name]()
    rows = leave_one_group_out(estimator, counts(stats, estimator), times, groups)
    # The extreme groups are extrapolation for any learner; the inner ones must be accurate.
    inner = [r for r in rows if r.group in ("g1", "g2")]
    assert all(r.mape <= max_mape for r in inner), [(r.group, r.mape) for r in rows]
    assert all(r.spearman >= min_rho for r in inner), [(r.group, r.spearman) for r in rows]


class Spy(CalibratedPredictor):
    """Records which rows it was trained on (identified by their instruction count)."""

    name = "spy"
    seen: list[set[int]] = []

    def __init__(self, features: str = "counts"):
        self.features = features

    def fit(self, X, y, groups=None):
        Spy.seen.append({int(round(np.expm1(x[0]))) for x in X})
        self.mean_ = float(np.mean(y))
        self.n_features_in_ = np.asarray(X).shape[1]
        return self._finish()

    def predict(self, X):
        self._check_fitted()
        return np.full(len(X), self.mean_)

    def to_payload(self):
        return {"mean": self.mean_}

    @classmethod
    def from_payload(cls, payload):
        return cls()


def test_leave_one_group_out_never_trains_on_the_held_out_group():
    stats, times, groups = synthetic(n_groups=3, per_group=10)
    Spy.seen = []
    spy = Spy()
    rows = leave_one_group_out(spy, counts(stats, spy), times, groups)
    assert [r.group for r in rows] == ["g0", "g1", "g2"] and len(Spy.seen) == 3
    assert not hasattr(spy, "mean_")  # each fold fitted a clone, never the estimator given
    for group, seen, row in zip(["g0", "g1", "g2"], Spy.seen, rows):
        held_out = {s.insts for s, g in zip(stats, groups) if g == group}
        others = {s.insts for s, g in zip(stats, groups) if g != group}
        assert not (seen & held_out)
        assert seen == others
        assert row.n == len(held_out)  # the fold's test rows are exactly the group


def test_leave_one_group_out_folds_are_the_groups():
    from sklearn.model_selection import LeaveOneGroupOut

    groups = np.array(["b", "a", "c", "a", "b", "c", "c"])
    folds = [set(test.tolist()) for _, test in LeaveOneGroupOut().split(np.zeros((7, 1)), groups=groups)]
    assert folds == [{1, 3}, {0, 4}, {2, 5, 6}]  # one fold per group, in sorted group order


# The contract and the model file hold for any fit: the neural network's and the GP's searches cut short
# (the learning itself is test_each_predictor_learns_a_known_relation's)
SHORT_FIT = {"dnn": {"max_iter": 100}, "gp": {"iterations": 2, "initial": 2}}


@pytest.mark.parametrize("name", sorted(PREDICTORS))
def test_predictors_follow_the_estimator_contract(name):
    cls = PREDICTORS[name]
    predictor = cls(features="pipeline")
    params = predictor.get_params()
    assert params["features"] == "pipeline" and set(params) >= {"features"}
    assert not [k for k in vars(predictor) if k.endswith("_")]  # nothing learnt before fit
    twin = clone(predictor)
    assert twin is not predictor and twin.get_params() == params
    twin.set_params(features="counts")
    assert twin.features == "counts" and predictor.features == "pipeline"
    with pytest.raises(NotFittedError, match=f"this {cls.__name__} is not fitted yet"):
        twin.predict(np.ones((2, 39)))
    with pytest.raises(NotFittedError, match="not fitted"):
        _ = twin.model_id
    stats, times, groups = synthetic(n_groups=3, per_group=10)
    twin.set_params(**SHORT_FIT.get(name, {}))
    twin.fit(counts(stats, twin), times, groups)
    assert twin.model_id.startswith(f"{name}-") and twin.n_features_in_ == counts(stats, twin).shape[1]
    fresh = clone(twin)  # a clone of a fitted estimator is unfitted, with the same parameters
    assert fresh.get_params() == twin.get_params() and not hasattr(fresh, "model_id_")
    with pytest.raises(ValueError, match="fitted on"):
        twin.predict(np.ones((2, 3)))  # another feature set's width is refused, not misread


def test_xgboost_objective_is_checked_in_fit_not_in_the_constructor():
    predictor = PREDICTORS["xgboost"](objective="nonsense")  # constructing validates nothing
    stats, times, groups = synthetic(n_groups=3, per_group=5)
    with pytest.raises(ValueError, match="objective must be auto, regression or ranking"):
        predictor.fit(counts(stats, predictor), times, groups)


def test_metrics_values():
    m = metrics("g", np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 1.0, 3.0, 4.0]))
    assert m.mape == pytest.approx(100 * (0.5 + 1.0) / 4)
    assert m.best_rank_pct == 50.0  # the true best (index 1) is second in predicted order
    assert m.regret == 2.0  # the predicted best runs in 2.0, the true best in 1.0
    assert m.spearman == pytest.approx(0.8)


@pytest.mark.parametrize("name", sorted(PREDICTORS))
def test_model_file_round_trip(tmp_path, name):
    stats, times, groups = synthetic(n_groups=3, per_group=15)
    predictor = PREDICTORS[name](**SHORT_FIT.get(name, {}))
    predictor.fit(counts(stats, predictor), times, groups)
    path = save_model(
        tmp_path / "m.json", predictor, {"target": "x86_64", "family": "gemm", "simulator": "qemu", "features": []}
    )
    loaded = load_model(path)
    assert loaded.predictor.model_id == predictor.model_id
    assert loaded.predictor.get_params() == predictor.get_params()
    np.testing.assert_allclose(
        CalibratedModel(loaded.predictor, X86).predict_stats(stats),
        predictor.predict(counts(stats, predictor)),
        rtol=1e-9,
    )


def _v1_document(predictor, stats) -> dict:
    """A model file as perfguard wrote it before schema 2 (payload without its parameters)."""
    import hashlib

    payload = {"coef": predictor.to_payload()["coef"], "intercept": predictor.intercept_, "line_bytes": 64}
    text = json.dumps({"name": "mlr", "payload": payload}, sort_keys=True)
    return {
        "schema": 1,
        "predictor": "mlr",
        "model_id": "mlr-" + hashlib.sha256(text.encode()).hexdigest()[:12],
        "target": "x86_64",
        "family": "gemm",
        "simulator": "qemu",
        "features": list(STAT_FIELDS),
        "payload": payload,
    }


def test_schema_1_model_files_are_upgraded_when_read(tmp_path):
    stats, times, groups = synthetic(n_groups=3, per_group=10)
    predictor = PREDICTORS["mlr"]().fit(counts(stats, PREDICTORS["mlr"]()), times)
    path = tmp_path / "old.json"
    document = _v1_document(predictor, stats)
    path.write_text(json.dumps(document))
    loaded = load_model(path)
    assert loaded.meta["upgraded_from"] == 1 and loaded.predictor.features == "counts"
    assert loaded.predictor.model_id == predictor.model_id  # upgraded, it is the model it was
    np.testing.assert_array_equal(
        CalibratedModel(loaded.predictor, X86).predict_stats(stats), predictor.predict(counts(stats, predictor))
    )
    document["payload"]["coef"][0] += 1.0  # edited by hand: no longer the model its old id names
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match="does not match its model_id"):
        load_model(path)


def test_corrupted_and_mismatched_model_files_name_the_file(tmp_path):
    stats, times, groups = synthetic(n_groups=3, per_group=10)
    predictor = PREDICTORS["mlr"]().fit(counts(stats, PREDICTORS["mlr"]()), times)
    path = save_model(
        tmp_path / "m.json", predictor, {"target": "x86_64", "family": "gemm", "simulator": "qemu", "features": []}
    )
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputError, match="m.json: corrupted model file"):
        load_model(path)
    data = json.loads(text)
    data["schema"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="m.json: model schema 99"):
        load_model(path)
    data["schema"] = 2
    data["payload"]["coef"][0] += 1.0  # edited by hand: no longer the model its id names
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="does not match its model_id"):
        load_model(path)


def _write_dataset(config_dir, profile, stats, times, groups):
    ds = Dataset("x86_64", "gemm", "qemu", "test")
    ds.rows = [Row(g, {}, s, float(t), {}, {"cpu": "test"}) for s, t, g in zip(stats, times, groups)]
    return ds.save(dataset_path(config_dir / "baselines", "x86_64", "gemm"))


def test_rescoring_uses_one_model_on_both_sides(project, capsys):
    config = project(TOML)
    assert main(["baseline", "update", "--config", str(config)]) == 0
    stored = json.loads((config.parent / "baselines/x86_64/g.json").read_text())
    assert stored["model_id"].startswith("pipeline")  # no calibrated model yet: the default
    stats, times, groups = synthetic(n_groups=3, per_group=12)
    _write_dataset(config.parent, BUILTIN["x86_64"], stats, times, groups)
    assert (
        main(
            [
                "calibrate",
                "train",
                "--config",
                str(config),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--predictors",
                "mlr",
            ]
        )
        == 0
    )
    model = load_model(model_path(config.parent / "baselines", "x86_64", "gemm"))
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) == 0
    result = json.loads((config.parent / "reports/perfguard.json").read_text())["results"][0]
    assert result["calibrated"] is True and result["model_id"] == model.predictor.model_id
    baseline_stats = Stats.from_dict(stored["stats"])
    expected = float(CalibratedModel(model.predictor, X86).predict_stats([baseline_stats])[0])
    # Model B scored the baseline's raw stats; the stored analytical prediction played no part.
    assert result["baseline_time_s"] == pytest.approx(expected, rel=1e-12)
    assert result["baseline_time_s"] != pytest.approx(stored["predicted_time_s"], rel=1e-3)
    assert result["verdict"] == "unchanged" and result["delta_pct"] == 0.0


def test_corrupted_model_fails_check_with_exit_2(project, capsys):
    config = project(TOML)
    path = model_path(config.parent / "baselines", "x86_64", "gemm")
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "predictor": "mlr"')
    assert main(["check", "--config", str(config)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "gemm.json: corrupted model file" in out


def test_dataset_reader_rejects_bad_rows(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(
        json.dumps(
            {
                "schema": 1,
                "target": "x86_64",
                "family": "gemm",
                "simulator": "qemu",
                "simulator_fingerprint": "x",
                "rows": [
                    {"group": "a", "params": {}, "stats": {"insts": -1}, "native_s": 1e-3, "native": {}, "machine": {}}
                ],
            }
        )
    )
    with pytest.raises(InputError, match="row 0"):
        load_dataset(path)


@pytest.mark.slow  # nested leave-one-group-out of XGBoost
def test_evaluate_and_train_on_a_collected_dataset(project, capsys):
    """`calibrate evaluate` and `calibrate train` on a dataset collected for real (three gemm shapes
    of six variants, simulated and timed natively: tests/captured/); the collection itself runs in
    tests/end_to_end/test_calibration.py."""
    config = project(TOML)
    path = dataset_path(config.parent / "baselines", "x86_64", "gemm")
    path.parent.mkdir(parents=True)
    shutil.copyfile(captured.DATASET, path)
    dataset = load_dataset(path)
    assert len(dataset.groups()) == 3 and len(dataset.rows) == 18
    base = ["--config", str(config), "--target", "x86_64", "--family", "gemm"]
    assert main(["calibrate", "evaluate", *base, "--predictors", "mlr,xgboost"]) == 0
    table = json.loads((config.parent / "reports/calibration-x86_64-gemm.json").read_text())
    assert set(table["summary"]) == set(table["groups"]) == {"analytical", "mlr", "xgboost"}
    assert (table["rows"], table["left_out"]) == (len(dataset.rows), 0)
    sizes = {g: sum(r.group == g for r in dataset.rows) for g in dataset.groups()}
    for name, groups_of in table["groups"].items():  # one held-out group each, every row in one
        assert {m["group"]: m["n"] for m in groups_of} == sizes, name
        for key in ("mape", "spearman", "regret"):  # the summary is the mean over the groups
            assert table["summary"][name][key] == pytest.approx(np.mean([m[key] for m in groups_of]), rel=1e-12)
    # the analytical model's error, recomputed from the dataset (native times are whatever the capturing machine gave)
    from perfguard.predict.analytical import AnalyticalModel

    analytical = AnalyticalModel(BUILTIN["x86_64"])
    for m in table["groups"]["analytical"]:
        rows_of = [r for r in dataset.rows if r.group == m["group"]]
        predicted = analytical.predict_stats([r.stats for r in rows_of])
        native = np.array([r.native_s for r in rows_of])
        assert m["mape"] == pytest.approx(100.0 * np.mean(np.abs(predicted - native) / native), rel=1e-12)
    assert main(["calibrate", "train", *base, "--predictors", "mlr,xgboost"]) == 0
    # whether auto may use the model follows from the dataset's timings, by the rule on its figures
    data = json.loads(model_path(config.parent / "baselines", "x86_64", "gemm").read_text())
    decision = data["auto"]["summary"]
    assert [g["group"] for g in data["auto"]["groups"]] == dataset.groups()  # every shape held out once
    assert data["auto"]["use"] is (
        decision["gain"] >= decision["margin"] and decision["worst_group_gain"] >= -decision["margin"]
    )


def test_drift_without_model_is_exit_2(project, capsys):
    config = project(TOML)
    assert main(["calibrate", "drift", "--config", str(config), "--target", "x86_64", "--family", "gemm"]) == 2
    assert "no model for gemm on x86_64" in capsys.readouterr().err


@pytest.mark.slow
def test_base_ref_reads_models_from_the_base_revision_too(project, capsys):
    """A PR that slows a kernel and swaps in a model that cannot see it is still caught."""
    import git

    config = project(TOML)
    root = config.parent
    repo = git.Repo.init(root)
    repo.git.config("user.email", "t@example.invalid")
    repo.git.config("user.name", "t")
    assert main(["baseline", "update", "--config", str(config)]) == 0
    stats, times, groups = synthetic(n_groups=3, per_group=12)
    _write_dataset(root, BUILTIN["x86_64"], stats, times, groups)
    assert (
        main(
            [
                "calibrate",
                "train",
                "--config",
                str(config),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--predictors",
                "mlr",
            ]
        )
        == 0
    )
    repo.git.add(A=True)
    repo.index.commit("base")
    base = repo.head.commit.hexsha

    # The pull request: a much worse schedule, and a "model" that predicts the same time for everything.
    config.write_text(
        config.read_text().replace(
            "tile_n = 16, tile_k = 8, vector = 8", 'tile_n = 2, tile_k = 8, vector = 1, order = "kji", unroll = 0'
        )
    )
    _write_dataset(root, BUILTIN["x86_64"], stats, np.full(len(times), 1e-3), groups)
    assert (
        main(
            [
                "calibrate",
                "train",
                "--config",
                str(config),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--predictors",
                "mlr",
            ]
        )
        == 0
    )
    repo.git.add(A=True)
    repo.index.commit("pr")
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) == 0  # judged by its own model, the PR hides it
    assert main(["check", "--config", str(config), "--base", base]) == 1
    result = json.loads((root / "reports/perfguard.json").read_text())["results"][0]
    assert result["verdict"] == "regression" and result["calibrated"] is True


# --- block profiles in datasets, pipeline features ---

LOOP = "4801c84883e90175f7"  # add %rcx,%rax; sub $1,%rcx; jne: one loop body


def profiled(insts: int, runs: int, extra=()) -> Stats:
    from perfguard.sim.blocks import Block, BlockProfile

    blocks = (Block(0x401000, 9, 3, runs, LOOP, "loop"), *extra)
    values = {f: 0 for f in STAT_FIELDS}
    values.update(
        insts=insts,
        loads=insts // 4,
        l1d_accesses=insts // 4,
        l1d_misses=insts // 50,
        l2_accesses=insts // 50,
        l2_misses=insts // 400,
    )
    return Stats(**values, blocks=BlockProfile(tuple(blocks)))


def test_dataset_stores_each_block_once_and_reads_profiles_back(tmp_path):
    from perfguard.sim.blocks import Block

    shared = Block(0x402000, 2, 1, 7, "f3aa", "memset")
    rows = [
        Row("g", {"i": i}, profiled(3000 * (i + 1), 1000 * (i + 1), (shared,)), 1e-3, {}, {}, "ab" * 32)
        for i in range(3)
    ]
    rows.append(Row("g", {"i": 9}, Stats(insts=5), 1e-3, {}, {}))  # no profile: still a valid row
    ds = Dataset("x86_64", "gemm", "qemu", "fp", rows)
    path = ds.save(tmp_path / "d.json")
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and len(data["blocks"]) == 2  # the loop and memset, once each
    assert data["rows"][1]["blocks"] == [[0, 2000], [1, 7]] and "blocks" not in data["rows"][3]
    back = load_dataset(path)
    assert [r.stats for r in back.rows] == [r.stats for r in rows] and back.rows[0].binary == "ab" * 32
    assert back.digest() == ds.digest()
    data["rows"][0]["blocks"] = [[5, 1]]  # a reference past the table
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="row 0: corrupted dataset row \\('blocks' must be"):
        load_dataset(path)


def test_resimulated_rows_keep_their_native_time_only_when_nothing_changed():
    import dataclasses

    from perfguard.job.run import JobResult
    from perfguard.runs.calibration import merge_resimulated

    old = [
        Row(
            "g",
            {"i": i},
            dataclasses.replace(profiled(1000 + i, 10), blocks=None),
            1e-3 * (i + 1),
            {},
            {},
            "cd" * 32 if i == 2 else None,
        )
        for i in range(3)
    ]

    def result(i, insts, binary):
        return JobResult(
            f"k{i}", "x86_64", "gemm", {"i": i}, "qemu", True, stats=profiled(insts, 10), binary_hash=binary
        )

    got = merge_resimulated(
        Dataset("x86_64", "gemm", "qemu", "old", old),
        [result(0, 1000, "ef" * 32), result(1, 1002, "ef" * 32), result(2, 1002, "ef" * 32)],
        "new",
    )
    # row 1 records no binary and its instructions moved (1001 -> 1002); row 2's counters match
    # but its binary is another
    assert [r.params["i"] for r in got.dataset.rows] == [0]
    kept = got.dataset.rows[0]
    assert kept.native_s == 1e-3 and kept.binary == "ef" * 32 and kept.stats.blocks is not None
    assert got.dataset.simulator_fingerprint == "new"
    assert "row 1" in got.dropped[0] and "counters differ (insts)" in got.dropped[0]
    assert "row 2" in got.dropped[1] and "is not the one timed" in got.dropped[1] and got.recounted == []

    # a row that records its binary keeps its native time when that binary is rebuilt, even if a
    # simulator fix now counts it differently: it takes the new counters and is named
    again = merge_resimulated(got.dataset, [result(0, 999, "ef" * 32)], "fixed")
    assert [r.stats.insts for r in again.dataset.rows] == [999] and again.dataset.rows[0].native_s == 1e-3
    assert again.dropped == [] and "row 0" in again.recounted[0] and "(insts" in again.recounted[0]


@pytest.mark.parametrize(
    "bound, cls",
    [
        ("latency", "latency"),
        ("Zn4FP45", "fp"),
        ("Zn4FPSt", "memory"),
        ("Zn4ALU0", "integer"),
        ("Zn4AGU1", "memory"),
        ("A57UnitL", "memory"),
        ("SiFive7PipeA", "integer"),
        ("dispatch", "other"),
        ("rep string", "other"),
    ],
)
def test_bound_classes(bound, cls):
    from perfguard.predict.features import bound_class

    assert bound_class(bound) == cls


def test_pipeline_features_are_the_pipeline_models_cycles(tmp_path):
    from perfguard.predict.features import BOUND_CLASSES, bound_class, feature_names, offset_column
    from perfguard.predict.pipeline import PipelineModel

    model = PipelineModel(X86, tmp_path)
    stats = [profiled(30_000, 10_000), profiled(60_000, 20_000)]
    X = matrix(stats, "pipeline", "raw", pipeline=model)
    assert X.shape == (2, len(feature_names("pipeline", "raw")))
    for row, s in zip(X, stats):
        costs = model.block_costs(s)
        core, stall = row[len(STAT_FIELDS)], row[len(STAT_FIELDS) + 1]
        assert core == pytest.approx(sum(c.cycles for c in costs)) and core > 0
        assert stall == pytest.approx(model.stall_cycles(s)) and stall > 0
        assert core + stall == pytest.approx(model.cycles(s))
        by_class = row[len(STAT_FIELDS) + 2 :]
        assert by_class.sum() == pytest.approx(core)
        assert by_class[BOUND_CLASSES.index(bound_class(costs[0].timing.bound))] == pytest.approx(core)
    assert X[1, len(STAT_FIELDS)] == pytest.approx(2 * X[0, len(STAT_FIELDS)])  # twice the executions
    derived = matrix(stats, "pipeline", "derived", pipeline=model)
    assert derived[:, offset_column("pipeline")] == pytest.approx(np.log1p([model.cycles(s) for s in stats]))


def test_a_model_on_pipeline_features_scores_through_todays_pipeline_model(tmp_path):
    from perfguard.predict.select import predictor_for
    from perfguard.runs.calibration_models import train

    rng = np.random.default_rng(1)
    rows = [
        Row(f"g{i % 3}", {"i": i}, profiled(int(n) * 3, int(n)), 1e-9 * n * rng.uniform(0.9, 1.1), {}, {})
        for i, n in enumerate(rng.integers(1000, 100_000, 24))
    ]
    ds = Dataset("x86_64", "gemm", "qemu", "fp", rows)
    path = model_path(tmp_path, "x86_64", "gemm")
    name, evaluation, _ = train(ds, X86, path, ["mlr"], cache_dir=tmp_path / "cache")
    assert evaluation.features == "pipeline" and name == "mlr"
    # these times follow the pipeline model's cycles (both in proportion to n): on held-out shapes the
    # model cannot beat it by the margin, so auto keeps the pipeline model and the file says why
    decision = json.loads(path.read_text())["auto"]
    assert decision["use"] is False and decision["summary"]["pipeline_spearman"] > 0.8
    assert not predictor_for(X86, "gemm", "qemu", tmp_path, cache_dir=tmp_path / "cache").calibrated
    data = json.loads(path.read_text())
    data["auto"]["use"] = True  # as if it had won: from here on, the model as auto uses it
    path.write_text(json.dumps(data))
    model = predictor_for(X86, "gemm", "qemu", tmp_path, cache_dir=tmp_path / "cache")
    assert model.calibrated and model.needs_blocks and model.model_id.startswith("mlr-")
    # seconds, near the row's own time (the rows follow 1e-9 s per loop run to +-10 %: not exact by design)
    assert model.predict_stats([rows[0].stats])[0] == pytest.approx(rows[0].native_s, rel=0.15)
    # the rows had no dtype: float32, recorded with the model; a float16 kernel is not its to score
    assert json.loads(path.read_text())["dtypes"] == ["float32"]
    for params, calibrated in (({"dtype": "float32", "M": 8}, True), ({"M": 8}, True), ({"dtype": "float16"}, False)):
        chosen = predictor_for(X86, "gemm", "qemu", tmp_path, cache_dir=tmp_path / "cache", params=params)
        assert chosen.calibrated is calibrated and (calibrated or chosen.name == "pipeline")
    with pytest.raises(InputError, match="no block profile"):
        model.predict_stats([Stats(insts=5)])
    data = json.loads(path.read_text())
    data["pipeline_model_id"] = "pipeline-v1-000000000000"  # features from another pipeline model
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="retrain with 'perfguard calibrate train --target x86_64'"):
        predictor_for(X86, "gemm", "qemu", tmp_path, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize(
    "mape, spearman, reasons",
    [
        (15.0, 0.9, []),  # exactly at both limits: the model is kept
        (15.01, 0.9, ["MAPE 15.0 % > 15.0 %"]),
        (15.0, 0.8999, ["Spearman 0.900 < 0.900"]),
        (40.0, 0.5, ["MAPE 40.0 % > 15.0 %", "Spearman 0.500 < 0.900"]),
        (0.0, 1.0, []),
    ],
)
def test_drift_asks_for_retraining_only_beyond_its_limits(mape, spearman, reasons):
    from perfguard.runs.calibration_models import drift_reasons

    assert drift_reasons(mape, spearman, 15.0, 0.9) == reasons
