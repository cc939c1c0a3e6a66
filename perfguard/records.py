"""Job records: what a kernel x target job found, reused while nothing it depends on changed.

A job's result (statistics, build and output-check facts, flops, loops) is decided by its kernel
(the config's entry for it, or an extracted [[model]] kernel's TVMScript), its target profile,
the simulator and its arguments, perfguard's code, the installed packages and tools
(perfguard.fingerprints), and the files of the project that lowering and checking it read (its
dependency file, perfguard.user_code.recording). A record is keyed on all but the last and lists
those files with their sha256; a job whose record exists and whose files all still hash as
recorded is not run at all: no TVM, no worker, no simulator. Anything else (no record, a record
that is damaged, written by another version or for another key, a file changed or gone) means
running the job, never an error. Only successful results are recorded.

Records live in <cache>/jobs/; `perfguard check --recompute` ignores them (and writes them anew).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from perfguard.atomic import atomic_write_text
from perfguard.compile.cache import digest
from perfguard.errors import InfraError, InputError
from perfguard.fingerprints import environment_digest
from perfguard.pipeline import Job, JobResult
from perfguard.sim.base import profile_tools
from perfguard.sim.stats import Stats
from perfguard.user_code import unchanged

RECORD_VERSION = 1
# Judging-only settings: a new threshold or limit re-judges, it does not re-run the job.
_NOT_JOB_INPUTS = ("threshold", "limits", "targets")


def job_key(job: Job) -> str:
    spec = {k: v for k, v in dataclasses.asdict(job.kernel).items() if k not in _NOT_JOB_INPUTS}
    identity = {"kernel": spec, "profile": job.profile.to_dict(), "simulator": job.simulator, "reps": job.reps,
                "warmup": job.warmup, "require_reference": job.require_reference,
                "warm_pipeline": job.warm_pipeline}  # not the project's folder: a clone elsewhere reuses it
    return digest("job record", str(RECORD_VERSION), environment_digest(profile_tools([job.profile], job.simulator)),
                  json.dumps(identity, sort_keys=True, default=str))


def record_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "jobs" / key[:2] / f"{key}.json"


def lookup(job: Job) -> JobResult | None:
    """The job's recorded result when nothing it depends on changed, else None."""
    key = job_key(job)
    try:
        record = json.loads(record_path(job.cache_dir, key).read_text())
        if not isinstance(record, dict) or record.get("version") != RECORD_VERSION or record.get("key") != key:
            return None
        if not unchanged(job.root, record.get("depends")):
            return None
        return _result(record["result"], key, record["depends"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, InputError):
        return None  # absent or damaged: run the job


def store(job: Job, result: JobResult) -> None:
    """Record a successful result (best effort: a cache that cannot be written costs only reuse)."""
    if not result.ok or result.depends is None:
        return
    key = job_key(job)
    data = {k: v for k, v in result.to_dict().items() if k not in ("timings", "depends", "reused")}
    data.update(stats=None if result.stats is None else result.stats.to_record(),
                rebuilt=False, resimulated=False, rechecked=False, seconds=0.0, cpu_seconds=0.0)
    try:
        atomic_write_text(record_path(job.cache_dir, key), json.dumps(
            {"version": RECORD_VERSION, "key": key, "depends": result.depends, "result": data}, sort_keys=True))
    except (InfraError, OSError):
        pass


_FIELDS = {f.name for f in dataclasses.fields(JobResult)}


def _result(data: dict, key: str, depends: list) -> JobResult:
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if set(values) != _FIELDS - {"timings", "depends", "reused"} or values.get("ok") is not True:
        raise ValueError("not a whole result")
    values["stats"] = None if values["stats"] is None else Stats.from_dict(values["stats"], f"job record {key}")
    return JobResult(**values, depends=depends, reused=True)
