"""How the workflows and the action would run, checked on the parsed YAML: rules that catch, each
with a negative control, the ways a job fails or misleads on GitHub although every linter passes.

- no `sudo` where a job may run in a container (root there, and no sudo installed);
- every `run:` step with a pipe runs under pipefail (`shell: bash`, or `defaults.run.shell`): the
  default shell is `bash -e`, where `failing | tee` succeeds;
- caches restored and saved as separate steps, each save under `always()`: actions/cache saves
  only in its post step, only when the job succeeded, so a red run would save nothing;
- container images pinned by digest;
- `apt-get install` only after `apt-get update` and only from the pinned snapshot
  (scripts/debian-snapshot): Debian's mirror keeps only the newest version of a package;
- provenance attestations only with buildx set up (the default docker driver refuses them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.shells.test_ci_security import FILES, load

SNAPSHOT_FILE = REPO / "scripts" / "debian-snapshot"
SNAPSHOT_SWITCH = re.compile(
    r'sed -i -E "s#\^URIs: http://deb\\\.debian\\\.org/\(debian\(-security\)\?\)\\\$#'
    r'URIs: http://snapshot\.debian\.org/archive/\\1/\$(\w+)#" '
    r"/etc/apt/sources\.list\.d/debian\.sources"
)
PIPE = re.compile(r"(?<![|>])\|(?![|])")


def snapshot_stamp() -> str:
    return next(line for line in SNAPSHOT_FILE.read_text().splitlines() if line and not line.startswith("#"))


def jobs(document: dict) -> dict[str, dict]:
    """Every job by name; a composite action is one job named 'action' (it may run in a container)."""
    if "runs" in document:
        return {"action": {"steps": document["runs"].get("steps", []), "container": "the caller's"}}
    return document.get("jobs") or {}


def _unquoted(script: str) -> str:
    return re.sub(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"", "''", script)


def _shell(document: dict, job: dict, step: dict) -> str | None:
    return (
        step.get("shell")
        or ((job.get("defaults") or {}).get("run") or {}).get("shell")
        or ((document.get("defaults") or {}).get("run") or {}).get("shell")
    )


# -- the rules: each returns the problems it finds ---------------------------------------------------


def sudo_in_containers(document: dict) -> list[str]:
    return [
        f"job {name}: sudo in a job that runs in a container: {step.get('name')}"
        for name, job in jobs(document).items()
        if job.get("container")
        for step in job.get("steps", [])
        if re.search(r"\bsudo\b", _unquoted(str(step.get("run", ""))))
    ]


def pipes_without_pipefail(document: dict) -> list[str]:
    problems = []
    for name, job in jobs(document).items():
        for step in job.get("steps", []):
            script = str(step.get("run", ""))
            if not PIPE.search(_unquoted(script)) or re.search(r"set -\w*o pipefail|set -o pipefail", script):
                continue
            if _shell(document, job, step) != "bash":
                problems.append(f"job {name}: a pipe without pipefail (no `shell: bash`): {step.get('name')}")
    return problems


def caches_lost_on_red_runs(document: dict) -> list[str]:
    problems = []
    for name, job in jobs(document).items():
        steps = job.get("steps", [])
        saves = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@")]
        for step in steps:
            uses = str(step.get("uses", ""))
            if uses.startswith("actions/cache@"):
                problems.append(f"job {name}: actions/cache saves only when the job succeeds: {step.get('name')}")
            if uses.startswith("actions/cache/save@") and "always()" not in str(step.get("if", "")):
                problems.append(f"job {name}: a cache save without always(): {step.get('name')}")
            if uses.startswith("actions/cache/restore@"):
                wanted = step.get("with") or {}
                if not any(
                    (s.get("with") or {}).get("key") == wanted.get("key")
                    and (s.get("with") or {}).get("path") == wanted.get("path")
                    for s in saves
                ):
                    problems.append(f"job {name}: nothing saves what {step.get('name')!r} restores")
    return problems


def images_not_by_digest(document: dict) -> list[str]:
    problems = []
    for name, job in jobs(document).items():
        container = job.get("container")
        image = container.get("image") if isinstance(container, dict) else container
        if container and name != "action" and not re.search(r"@sha256:[0-9a-f]{64}$", str(image)):
            problems.append(f"job {name}: image {image} is not pinned by digest")
    return problems


def apt_from_a_moving_mirror(document: dict) -> list[str]:
    problems = []
    stamp = str((document.get("env") or {}).get("DEBIAN_SNAPSHOT", ""))
    for name, job in jobs(document).items():
        pinned = updated = False
        for step in job.get("steps", []):
            script = str(step.get("run", ""))
            for line in script.splitlines():
                switch = SNAPSHOT_SWITCH.search(line)
                if switch:
                    pinned = switch.group(1) == "DEBIAN_SNAPSHOT" and stamp == snapshot_stamp()
                if re.search(r"\bapt-get\b.*\bupdate\b", line):
                    updated = True
                if re.search(r"\bapt-get\b.*\binstall\b", line):
                    if name == "action" or not job.get("container"):
                        problems.append(
                            f"job {name}: apt-get install outside the pinned container "
                            "(scripts/setup.sh installs there)"
                        )
                    elif not pinned:
                        problems.append(
                            f"job {name}: apt-get install from the live mirror, not the snapshot "
                            f"of scripts/debian-snapshot: {step.get('name')}"
                        )
                    elif not updated:
                        problems.append(f"job {name}: apt-get install before apt-get update: {step.get('name')}")
    return problems


def provenance_without_buildx(document: dict) -> list[str]:
    problems = []
    for name, job in jobs(document).items():
        buildx = False
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            buildx = buildx or uses.startswith("docker/setup-buildx-action@")
            attests = {k: v for k, v in (step.get("with") or {}).items() if k in ("provenance", "sbom", "attests")}
            if (
                uses.startswith("docker/build-push-action@")
                and any(v not in (False, "false") for v in attests.values())
                and not buildx
            ):
                problems.append(f"job {name}: attestations need buildx (docker/setup-buildx-action first)")
    return problems


RULES = [
    sudo_in_containers,
    pipes_without_pipefail,
    caches_lost_on_red_runs,
    images_not_by_digest,
    apt_from_a_moving_mirror,
    provenance_without_buildx,
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_workflows_and_the_action_keep_the_rule(rule, path):
    assert rule(load(path)) == []


# -- negative controls: the defects these rules are for, as they were written -------------------------

CONTAINER = "debian:12@sha256:" + "8" * 64
BAD = {
    sudo_in_containers: {
        "runs": {
            "using": "composite",
            "steps": [{"name": "Build gem5", "shell": "bash", "run": "sudo bash scripts/build-gem5.sh X86"}],
        }
    },
    pipes_without_pipefail: {
        "on": "push",
        "jobs": {
            "x": {
                "runs-on": "u",
                "steps": [
                    {
                        "name": "Cross-check",
                        "run": 'python3 benchmarks/crosscheck.py --gem5 | tee -a "$GITHUB_STEP_SUMMARY"',
                    }
                ],
            }
        },
    },
    caches_lost_on_red_runs: {
        "runs": {
            "using": "composite",
            "steps": [{"name": "Restore", "uses": "actions/cache@" + "5" * 40, "with": {"path": "p", "key": "k"}}],
        }
    },
    images_not_by_digest: {"on": "push", "jobs": {"x": {"runs-on": "u", "container": "debian:12", "steps": []}}},
    apt_from_a_moving_mirror: {
        "on": "push",
        "jobs": {
            "x": {
                "runs-on": "u",
                "container": {"image": CONTAINER},
                "steps": [{"name": "Prerequisites", "run": "apt-get update -qq\napt-get install -y git python3"}],
            }
        },
    },
    provenance_without_buildx: {
        "on": "push",
        "jobs": {
            "x": {
                "runs-on": "u",
                "steps": [{"uses": "docker/build-push-action@" + "2" * 40, "with": {"push": True, "provenance": True}}],
            }
        },
    },
}
MORE_BAD = [
    (
        caches_lost_on_red_runs,
        {
            "on": "push",
            "jobs": {
                "x": {
                    "runs-on": "u",
                    "steps": [
                        {
                            "name": "Restore",
                            "uses": "actions/cache/restore@" + "5" * 40,
                            "with": {"path": "p", "key": "k"},
                        },
                        {
                            "name": "Save",
                            "if": "success()",
                            "uses": "actions/cache/save@" + "5" * 40,
                            "with": {"path": "p", "key": "k"},
                        },
                    ],
                }
            },
        },
    ),
    (
        caches_lost_on_red_runs,
        {
            "on": "push",
            "jobs": {
                "x": {
                    "runs-on": "u",
                    "steps": [
                        {
                            "name": "Restore",
                            "uses": "actions/cache/restore@" + "5" * 40,
                            "with": {"path": "p", "key": "k"},
                        }
                    ],
                }
            },
        },
    ),
    (
        apt_from_a_moving_mirror,
        {
            "on": "push",
            "env": {"DEBIAN_SNAPSHOT": "20200101T000000Z"},
            "jobs": {
                "x": {
                    "runs-on": "u",
                    "container": {"image": CONTAINER},
                    "steps": [
                        {
                            "name": "Prerequisites",
                            "run": (
                                'sed -i -E "s#^URIs: http://deb\\.debian\\.org/(debian(-security)?)\\$#URIs: http://snapshot.debian.org/'
                                'archive/\\1/$DEBIAN_SNAPSHOT#" /etc/apt/sources.list.d/debian.sources\n'
                                "apt-get update -qq\napt-get install -y git"
                            ),
                        }
                    ],
                }
            },
        },
    ),  # a snapshot, but not the lock's
    (
        apt_from_a_moving_mirror,
        {
            "on": "push",
            "jobs": {
                "x": {
                    "runs-on": "ubuntu-24.04",
                    "steps": [{"run": "sudo apt-get update && sudo apt-get install -y qemu-user"}],
                }
            },
        },
    ),  # the runner's Ubuntu
    (
        pipes_without_pipefail,
        {
            "on": "push",
            "defaults": {"run": {"shell": "sh"}},
            "jobs": {"x": {"runs-on": "u", "steps": [{"run": "false | cat"}]}},
        },
    ),
]


@pytest.mark.parametrize(
    "rule, document",
    [*BAD.items(), *MORE_BAD],
    ids=[r.__name__ for r in BAD] + [f"{r.__name__}-{i}" for i, (r, _) in enumerate(MORE_BAD)],
)
def test_each_rule_catches_its_defect(rule, document):
    assert rule(document), f"{rule.__name__} found nothing in {yaml.safe_dump(document)}"


def test_the_negative_controls_pass_the_other_rules():
    """Each bad document breaks its own rule only: the rules do not pass by flagging everything."""
    for rule, document in BAD.items():
        others = {r.__name__: r(document) for r in RULES if r is not rule}
        assert not any(others.values()), (rule.__name__, others)


# -- the snapshot: one timestamp everywhere, and the switch does what it says -------------------------


def test_the_snapshot_is_one_timestamp_everywhere():
    stamp = snapshot_stamp()
    assert re.fullmatch(r"\d{8}T\d{6}Z", stamp), stamp
    users = [p for p in FILES if "apt-get install" in p.read_text()]
    assert {p.name for p in users} >= {"perfguard.yml", "tests.yml", "recalibrate.yml", "gem5-crosscheck.yml"}
    for path in users:
        assert load(path)["env"]["DEBIAN_SNAPSHOT"] == stamp, path.name
    docs = (REPO / "docs" / "ci.md").read_text() + (REPO / "docs" / "toolchain.md").read_text()  # workflow example,
    assert set(re.findall(r"\b\d{8}T\d{6}Z\b", docs)) == {stamp}  # the toolchain page
    from perfguard.shells.commands.init import DEBIAN_SNAPSHOT  # the workflow `perfguard init` writes

    assert DEBIAN_SNAPSHOT == stamp
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "scripts/debian-snapshot" in dockerfile and SNAPSHOT_SWITCH.search(
        dockerfile.replace("$stamp", "$DEBIAN_SNAPSHOT")
    )


DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")


@pytest.mark.skipif(
    not DEBIAN_SOURCES.is_file() or shutil.which("apt-get") is None, reason="needs Debian 12's deb822 sources and apt"
)
def test_the_snapshot_switch_points_apt_at_the_snapshot(tmp_path):
    """The workflows' sed line, run by real sed on a copy of Debian 12's sources: real apt then
    fetches every index from snapshot.debian.org at the lock's timestamp (--print-uris: nothing is
    downloaded)."""
    workflow = (REPO / ".github" / "workflows" / "perfguard.yml").read_text()
    line = next(text.strip() for text in workflow.splitlines() if SNAPSHOT_SWITCH.search(text))
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    shutil.copy(DEBIAN_SOURCES, parts / "debian.sources")
    script = line.replace("/etc/apt/sources.list.d/debian.sources", str(parts / "debian.sources"))
    subprocess.run(
        ["bash", "-c", script], check=True, env={"DEBIAN_SNAPSHOT": snapshot_stamp(), "PATH": "/usr/bin:/bin"}
    )
    (tmp_path / "lists" / "partial").mkdir(parents=True)
    proc = subprocess.run(
        [
            "apt-get",
            "-o",
            "Dir::Etc::SourceList=/dev/null",
            "-o",
            f"Dir::Etc::SourceParts={parts}",
            "-o",
            f"Dir::State::Lists={tmp_path / 'lists'}",
            "--print-uris",
            "update",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    uris = re.findall(r"^'(\S+)'", proc.stdout, re.M)
    stamp = snapshot_stamp()
    assert uris and all(
        u.startswith(
            (
                "http://snapshot.debian.org/archive/debian/" + stamp + "/",
                "http://snapshot.debian.org/archive/debian-security/" + stamp + "/",
            )
        )
        for u in uris
    ), uris
    assert {
        f"{stamp}/dists/bookworm/InRelease",
        f"{stamp}/dists/bookworm-updates/InRelease",
        f"{stamp}/dists/bookworm-security/InRelease",
    } <= {u.split("/archive/")[1].split("/", 1)[1] for u in uris}


@pytest.mark.slow  # waits for the resolver to give up on snapshot.debian.org where it is not reachable
@pytest.mark.skipif(shutil.which("apt-get") is None or os.geteuid() != 0, reason="apt-get as root")
def test_setup_takes_the_snapshot_through_a_private_apt_configuration(tmp_path):
    """--snapshot: setup.sh reads the timestamp, points a private apt configuration at
    snapshot.debian.org and stops with one line when it cannot have the locked versions from there
    (here the lock names a version no archive has, so nothing is installed either way)."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", scripts / "setup.sh")
    shutil.copy(SNAPSHOT_FILE, scripts / "debian-snapshot")
    (scripts / "toolchain.lock").write_text("perfguard-no-such-package=0.0-0\n")
    before = sorted(p.name for p in Path("/etc/apt/sources.list.d").iterdir())
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(scripts / "setup.sh"), "--snapshot"], capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 3, proc.stderr
    stamp = snapshot_stamp()
    assert f"setup.sh: installing from snapshot.debian.org at {stamp} (scripts/debian-snapshot)" in proc.stderr
    assert (
        f"http://snapshot.debian.org/archive/debian/{stamp}/dists/bookworm/InRelease" in proc.stderr
        or "could not install perfguard-no-such-package=0.0-0" in proc.stderr
    ), proc.stderr
    assert sorted(p.name for p in Path("/etc/apt/sources.list.d").iterdir()) == before  # the system's are untouched
    bad = scripts / "debian-snapshot"
    bad.write_text("last tuesday\n")
    proc = subprocess.run(
        ["bash", str(scripts / "setup.sh"), "--snapshot"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (
        proc.returncode == 2
        and "scripts/debian-snapshot: 'last tuesday' is not a snapshot.debian.org timestamp" in proc.stderr
    )
