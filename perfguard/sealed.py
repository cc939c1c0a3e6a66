"""Cache records that vouch for themselves: a payload stored with its key and its sha256.

Every record perfguard reuses (job, result and check records, simulations, output checks,
llvm-mca timings, loop nests, build markers) is written here: one JSON object holding what kind
of record it is, the key it was stored under, the payload and the sha256 of the payload's
canonical JSON. A read gives the payload back only when all of that holds; a file that is
missing, unreadable, not UTF-8 or JSON, of another kind or key, or whose payload no longer
matches its digest (a bit flipped on disk, a value edited by hand) reads as absent, so the
caller computes the answer again and writes the record anew. A damaged record is never trusted
and never an error; with PERFGUARD_VERBOSE set, the reason is logged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from perfguard.atomic import atomic_write_bytes
from perfguard.errors import InfraError
from perfguard.signals import log

FORMAT = 1


def payload_digest(payload: Any) -> str:
    """sha256 of the payload's canonical JSON (keys sorted, no spaces): what a record is checked by."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(kind: str, key: str, payload: Any) -> bytes:
    """A record's bytes."""
    record = {"format": FORMAT, "kind": kind, "key": key, "sha256": payload_digest(payload), "payload": payload}
    return json.dumps(record, sort_keys=True).encode()


def unseal(data: bytes, kind: str, key: str, where: str) -> Any | None:
    """The payload of a record's bytes, or None (logged) when they are not a whole record of this kind and key."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # ValueError: bad JSON or UTF-8
        return damaged(where, "not JSON")
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("kind") != kind:
        return damaged(where, f"not a {kind} record of this version")
    if record.get("key") != key:
        return damaged(where, "stored under another key")
    payload = record.get("payload")
    try:
        intact = record.get("sha256") == payload_digest(payload)
    except (ValueError, TypeError):  # NaN or a value JSON cannot write back
        intact = False
    if not intact:
        return damaged(where, "its payload does not match its sha256")
    return payload


def damaged(where: str, why: str) -> Any:  # None, typed Any so that a reader may `return damaged(...)`
    """Note a record that is not used (PERFGUARD_VERBOSE), and read it as absent."""
    log(f"{where}: damaged record ignored ({why}); computing it again")
    return None


def read(path: Path, kind: str, key: str) -> Any | None:
    """The payload stored at `path`, or None: absent, unreadable or damaged (computed again by the caller)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return damaged(str(path), f"unreadable: {exc.strerror or exc}")
    return unseal(data, kind, key, str(path))


def write(path: Path, kind: str, key: str, payload: Any) -> None:
    """Write a record whole (temp file, then rename); raises InfraError when the disk refuses."""
    atomic_write_bytes(Path(path), seal(kind, key, payload))


def try_write(path: Path, kind: str, key: str, payload: Any) -> bool:
    """write, best effort: a cache that cannot be written costs only reuse. Whether it was written."""
    try:
        write(path, kind, key, payload)
    except (InfraError, OSError, ValueError):
        return False
    return True
