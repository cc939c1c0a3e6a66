"""Result records: one kernel x target's judged and explained report entry, reused when its inputs are.

A check in which some kernels changed (or whose baselines' commit moved: every CI run) judges
and explains only the results whose inputs changed. A result's report entry (its verdict, stat
deltas, limit breaches, block attribution, analysis, history and calibration) is decided by the
job's result (statistics, toolchain, build facts), its baseline file's bytes, the calibrated
model file of its target and family, the config's `model`, the kernel's threshold and limits,
the target profile and the machine profile it chose (its name and bytes: its interval and the
machine the entry names), the commits that changed its baseline (its history), perfguard and the
environment (perfguard.fingerprints). A record is keyed on all of them; the entry's run facts
(seconds, rebuilt, resimulated) are this run's. Only the working tree's baselines are recorded
(not `--base`), and only results that are not errors.

Records live in <cache>/results/; anything that does not read back whole, or whose payload no
longer matches the sha256 it was stored with (perfguard.sealed), means: judge again.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfguard import machines, sealed
from perfguard.baselines.store import BaselineStore
from perfguard.config import Config
from perfguard.document.codec import from_json, to_json
from perfguard.document.result import Result
from perfguard.errors import InputError
from perfguard.fingerprints import digest, environment_digest
from perfguard.job.run import Job, JobResult
from perfguard.judge.decide import judgement_of
from perfguard.judge.history import BaselineHistory
from perfguard.judge.verdicts import Verdict
from perfguard.predict.intervals import DeltaInterval
from perfguard.predict.store import model_path
from perfguard.user_code.reads import file_sha256

RECORD_VERSION = 4  # 3: the entry names its machine; 4: keyed by the job's resolved judgement (judging.Judgement.key)
# What a result's entry says about this run rather than about the result: never recorded.
RUN_FIELDS = ("seconds", "rebuilt", "resimulated")
_NOT_INPUTS = ("seconds", "cpu_seconds", "timings", "depends", "reused", "rebuilt", "resimulated", "rechecked")


def keys(config: Config, jobs: list[Job], results: list[JobResult], threshold: float | None) -> list[str | None]:
    """Each result's record key (None: not recordable, a failed job)."""
    history = BaselineHistory(config.storage.baseline_dir)
    environment = environment_digest()
    out: list[str | None] = []
    for job, result in zip(jobs, results):
        if not result.ok or result.stats is None:
            out.append(None)
            continue
        data = {k: v for k, v in result.to_dict().items() if k not in _NOT_INPUTS}
        data["stats"] = result.stats.to_record()
        target, kernel = job.profile.name, job.kernel.name
        commits = [rev.commit for rev in history.changes(target, kernel)]
        judgement = judgement_of(config, job, threshold)
        out.append(
            digest(
                "result record",
                str(RECORD_VERSION),
                environment,
                str(config.path),
                json.dumps(data, sort_keys=True, default=str),
                json.dumps(job.profile.to_dict(), sort_keys=True),
                judgement.key(),
                file_sha256(BaselineStore(config.storage.baseline_dir).path(target, kernel)) or "absent",
                (file_sha256(model_path(config.storage.baseline_dir, target, result.family)) or "absent")
                if result.family
                else "no family",
                json.dumps(commits),
                history.head or "",
                _machine_digest(judgement.machine),
            )
        )
    return out


def _machine_digest(name: str | None) -> str:
    """The chosen machine profile's content (its name is in the judgement's key): a recalibrated
    profile judges again."""
    return machines.load(name).sha256 if name else "none"


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "results" / key[:2] / f"{key}.json"


def lookup(config: Config, key: str | None, result: JobResult) -> Result | None:
    """The recorded entry with this run's facts, or None (none, damaged, another key)."""
    if key is None:
        return None
    path = _path(config.storage.cache_dir, key)
    data = sealed.read(path, "result", key)
    if data is None:
        return None
    try:
        entry = from_json(Result, data, f"result record {key}")
    except (ValueError, TypeError, KeyError, InputError):
        return sealed.damaged(str(path), "not a report entry")
    entry.seconds, entry.rebuilt, entry.resimulated = round(result.seconds, 3), result.rebuilt, result.resimulated
    return entry


def store(config: Config, key: str | None, entry: Result) -> None:
    """Record an explained entry (best effort)."""
    if key is None or entry.verdict == "error":
        return
    data = to_json(entry)
    for name in RUN_FIELDS:
        data.pop(name, None)
    sealed.try_write(_path(config.storage.cache_dir, key), "result", key, data)


def verdict_of(entry: Result) -> Verdict:
    """The Verdict a recorded entry was made from (runs.report_build.result_of, backwards)."""
    assert entry.threshold_pct is not None  # recorded from a judged result
    return Verdict(
        entry.verdict,
        entry.threshold_pct,
        entry.current_time_s,
        entry.baseline_time_s,
        entry.delta_pct,
        {k: vars(d) for k, d in entry.stat_deltas.items()},
        {k: vars(d) for k, d in entry.toolchain_changed.items()},
        {k: vars(d) for k, d in entry.limit_breaches.items()},
        None
        if entry.interval is None
        else DeltaInterval(
            entry.interval.low_pct,
            entry.interval.high_pct,
            entry.interval.level,
            entry.interval.basis,
            entry.interval.exact,
        ),
        entry.gate,
    )
