"""The GitHub Actions runner as a step sees it: its inputs (INPUT_<NAME>), outputs (GITHUB_OUTPUT),
step summary, workflow commands (annotations, escaped: a pull request's text is data) and the event
payload. The standard library only: the Action's `keys` step runs before perfguard is installed."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

PR_EVENTS = ("pull_request", "pull_request_target")


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def action_input(name: str, default: str = "") -> str:
    return env("INPUT_" + name.upper().replace("-", "_"), default)


def flag_input(name: str, default: bool) -> bool:
    value = action_input(name, "true" if default else "false").lower()
    if value not in ("true", "false"):
        raise ActionError(f"input '{name}' must be true or false, got {value!r}")
    return value == "true"


class ActionError(Exception):
    """A bad input or a missing piece of the environment: one line, exit 2."""


def set_outputs(values: dict[str, str]) -> None:
    """Append to $GITHUB_OUTPUT (a random delimiter, so a value cannot end the block early)."""
    path = env("GITHUB_OUTPUT")
    lines = []
    for key, value in values.items():
        delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        lines.append(f"{key}<<{delimiter}\n{value}\n{delimiter}\n")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(lines))
    else:
        for key, value in values.items():
            print(f"{key}={value}")


def append_summary(markdown: str) -> None:
    path = env("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown.rstrip("\n") + "\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, title: str, file: str | None = None, line: int | None = None) -> str:
    """A workflow command line (::error file=..,line=..,title=..::message), escaped."""
    props = []
    if file:
        props.append(f"file={_escape_property(file)}")
        if line:
            props.append(f"line={line}")
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def event_payload() -> dict[str, Any]:
    path = env("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        raise ActionError(f"GITHUB_EVENT_PATH {path}: cannot read the event payload") from None
    return data if isinstance(data, dict) else {}


def pull_request_number(payload: dict[str, Any]) -> int | None:
    if env("GITHUB_EVENT_NAME") not in PR_EVENTS:
        return None
    number = (payload.get("pull_request") or {}).get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
