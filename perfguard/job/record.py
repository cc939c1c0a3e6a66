"""Job records: what a kernel x target job found, reused while nothing it depends on changed.

A job's result (statistics, build and output-check facts, flops, loops) is decided by its kernel
(the config's entry for it, or an extracted [[model]] kernel's TVMScript), its target profile,
the simulator and its arguments, perfguard's code, the installed packages, the tools by their
bytes and the variables that change them (perfguard.fingerprints), and what its user code read:
the modules it executed wherever they live, the files it opened, the environment variables it
read, the current folder where a lookup depended on it (its dependency file,
perfguard.user_code.recording). A record is keyed on all but the last and lists those inputs
with their sha256; a job whose record exists and whose inputs are all as recorded is not run at
all: no TVM, no worker, no simulator. Anything else (no record, a record that is damaged, of
another version or for another key, an input changed or gone) means running the job, never an
error. Only successful results whose inputs did not change while they ran are recorded, and
each record holds the sha256 of its payload (perfguard.sealed), so an edited or corrupted one is
run again and replaced, never trusted.

Records live in <cache>/jobs/; `perfguard check --recompute` ignores them (and writes them anew).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from perfguard import sealed
from perfguard.errors import InputError
from perfguard.fingerprints import digest, environment_digest
from perfguard.job.run import Job, JobResult
from perfguard.signals import log
from perfguard.sim.base import profile_tools
from perfguard.sim.stats import Stats
from perfguard.user_code.reads import changed

RECORD_VERSION = 3  # 3: a result's configured inputs and entry source
# Judging-only settings: a new threshold or limit re-judges, it does not re-run the job.
_NOT_JOB_INPUTS = ("threshold", "limits", "targets")


def job_key(job: Job) -> str:
    spec = {k: v for k, v in dataclasses.asdict(job.kernel).items() if k not in _NOT_JOB_INPUTS}
    identity = {
        "kernel": spec,
        "profile": job.profile.to_dict(),
        "simulator": job.simulator,
        "reps": job.reps,
        "warmup": job.warmup,
        "require_reference": job.require_reference,
        "warm_pipeline": job.warm_pipeline,
        "code_offset": job.code_offset,
    }  # not the project's folder: a clone elsewhere reuses it
    return digest(
        "job record",
        str(RECORD_VERSION),
        environment_digest(profile_tools([job.profile], job.simulator)),
        json.dumps(identity, sort_keys=True, default=str),
    )


def record_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "jobs" / key[:2] / f"{key}.json"


def read_record(job: Job) -> dict | None:
    """The job's record as stored ({"depends", "result"}), whatever its inputs now; None when
    there is none or it is damaged."""
    key = job_key(job)
    record = sealed.read(record_path(job.cache_dir, key), "job", key)
    return record if isinstance(record, dict) and isinstance(record.get("depends"), list) else None


def lookup(job: Job) -> JobResult | None:
    """The job's recorded result when nothing it depends on changed, else None."""
    key = job_key(job)
    record = read_record(job)
    if record is None:
        return None
    moved = changed(job.root, record["depends"])
    if moved is not None:
        log(f"{job.label}: its recorded result is not reused: {moved} changed")
        return None
    try:
        return _result(record["result"], key, record["depends"])
    except (ValueError, TypeError, KeyError, AttributeError, InputError):
        return sealed.damaged(str(record_path(job.cache_dir, key)), "not a whole result")


def store(job: Job, result: JobResult) -> None:
    """Record a successful result (best effort: a cache that cannot be written costs only reuse)."""
    if not result.ok or result.depends is None:
        return
    key = job_key(job)
    data = {k: v for k, v in result.to_dict().items() if k not in _NOT_RECORDED}
    data.update(
        stats=None if result.stats is None else result.stats.to_record(),
        rebuilt=False,
        resimulated=False,
        rechecked=False,
        seconds=0.0,
        cpu_seconds=0.0,
    )
    sealed.try_write(record_path(job.cache_dir, key), "job", key, {"depends": result.depends, "result": data})


_FIELDS = {f.name for f in dataclasses.fields(JobResult)}
_NOT_RECORDED = ("timings", "depends", "reused", "worker")  # this run's, not the result's


def _result(data: dict, key: str, depends: list) -> JobResult:
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if set(values) != _FIELDS - set(_NOT_RECORDED) or values.get("ok") is not True:
        raise ValueError("not a whole result")
    values["stats"] = None if values["stats"] is None else Stats.from_dict(values["stats"], f"job record {key}")
    return JobResult(**values, depends=depends, reused=True)
