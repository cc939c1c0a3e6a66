"""One pinned toolchain: the lock setup.sh installs (and refuses to stray from), the toolchain every
baseline records, and what a run says when its toolchain is not its baselines'."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from perfguard import __version__
from perfguard.config import load_config
from perfguard.shells.cli import main
from tests.conftest import REPO
from tests.projects import repository_project

LOCK = REPO / "scripts" / "toolchain.lock"
HEADLINE = "toolchain differs from the baselines'"


def lock() -> dict[str, str]:
    pairs = [line.split("=", 1) for line in LOCK.read_text().splitlines() if line and not line.startswith("#")]
    return dict(pairs)


# -- the lock and setup.sh ---------------------------------------------------------------------------


def test_the_lock_pins_every_package_setup_installed_before():
    pinned = lock()
    for package in (
        "qemu-user",
        "gcc-aarch64-linux-gnu",
        "libc6-dev-arm64-cross",
        "gcc-riscv64-linux-gnu",
        "libc6-dev-riscv64-cross",
        "gcc",
        "libc6-dev",
        "valgrind",
        "llvm-19",
        "git",
    ):
        assert package in pinned, package
    assert pinned["qemu-user"].startswith("1:7.2+"), "the plugin is validated with QEMU 7.2"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system")
def test_this_machine_has_the_locked_versions():
    """The suite runs on the machine kind the lock was read from (CI: the pinned Debian 12 container)."""
    for package, version in lock().items():
        have = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True).stdout
        assert have == version, f"{package}: installed {have!r}, locked {version!r}"


def _setup_copy(tmp_path: Path, change: tuple[str, str]) -> Path:
    """scripts/setup.sh beside a lock with one version changed, in a folder with no project: it
    must stop at the lock (before pip is reached)."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", scripts / "setup.sh")
    text = LOCK.read_text()
    assert change[0] in text
    (scripts / "toolchain.lock").write_text(text.replace(*change))
    return scripts / "setup.sh"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system")
def test_setup_refuses_an_unvalidated_version_in_one_line(tmp_path):
    qemu = lock()["qemu-user"]
    script = _setup_copy(tmp_path, (f"qemu-user={qemu}", "qemu-user=1:9.2.0+ds-1"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"qemu-user {qemu} is installed, validated with 1:9.2.0+ds-1" in lines[0]
    assert "PERFGUARD_UNVALIDATED_TOOLCHAIN=1" in lines[0]

    # Told to proceed: a warning, and it goes on (to pip, which finds no project in this folder).
    proc = subprocess.run(["bash", str(script), "--unvalidated"], capture_output=True, text=True, env=env, timeout=120)
    assert "setup.sh: warning: qemu-user" in proc.stderr and proc.returncode != 3, proc.stderr
    proc = subprocess.run(["bash", str(script), "--bogus"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "unknown option '--bogus'" in proc.stderr


def test_the_dockerfile_installs_through_setup_and_the_lock():
    text = (REPO / "Dockerfile").read_text()
    assert "scripts/setup.sh" in text and "COPY . /opt/perfguard" in text
    assert "scripts/toolchain.lock" in (REPO / "scripts" / "setup.sh").read_text()


# -- the toolchain of a run and of its baselines -------------------------------------------------------

KERNELS = "gemv_1024,dense_relu_16x512x256"


def _headline_count(text: str) -> int:
    return text.count(HEADLINE)


@pytest.mark.slow
def test_one_changed_toolchain_field_is_one_headline_not_a_regression(tmp_path, cache_dir, capsys):
    """Outside git, where the base cannot be measured again with this toolchain (runs.rebase; in a
    repository: tests/end_to_end/test_upgrade.py), a project that opts out of failing on it."""
    config = repository_project(tmp_path / "repo", cache_dir, ("[perfguard]\n", "[perfguard]\nallow_unjudged = true\n"))
    reports = config.parent / "reports"
    path = config.parent / "baselines" / "x86_64" / "gemv_1024.json"
    data = json.loads(path.read_text())
    old = data["toolchain"]["simulator"]
    assert old.startswith("qemu-x86_64 version 7.2.")
    # The baseline as another QEMU would have made it: another version string, and fewer counted
    # instructions and misses (enough to be a regression, were it the same toolchain).
    data["toolchain"]["simulator"] = old.replace(old.split(";")[0], "qemu-x86_64 version 8.2.2 (Debian 1:8.2.2+ds-0)")
    # by this perfguard: one field differs (a perfguard version beside it would be named too: test_toolchain_wording)
    data["toolchain"]["perfguard"] = __version__
    for name in ("insts", "l1i_accesses", "loads", "l1d_accesses", "l1d_misses", "l2_accesses", "l2_misses"):
        data["stats"][name] = int(data["stats"][name] * 0.8)
    path.write_text(json.dumps(data))
    argv = ["check", "--config", str(config), "--kernels", KERNELS, "--targets", "x86_64"]

    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out  # documented: a toolchain change alone exits 0
    report = json.loads((reports / "perfguard.json").read_text())
    jsonschema.validate(report, json.loads((REPO / "docs" / "report.schema.json").read_text()))
    verdicts = {r["kernel"]: r["verdict"] for r in report["results"]}
    assert verdicts == {"gemv_1024": "toolchain", "dense_relu_16x512x256": "unchanged"}, verdicts
    moved = next(r for r in report["results"] if r["kernel"] == "gemv_1024")
    assert moved["delta_pct"] > moved["threshold_pct"]  # it moved: only the toolchain keeps it from being a regression
    summary = report["summary"]
    assert summary["regression"] == 0 and summary["toolchain"] == 1 and summary["exit_code"] == 0
    assert summary["toolchain_changed"] == {
        "tools": {"simulator": [{"baseline": data["toolchain"]["simulator"], "current": old}]},
        "targets": ["x86_64"],
        "rebaseline": "perfguard baseline update --targets x86_64",
    }

    # Once in every output, naming what differs and the command.
    sentence = (
        "toolchain differs from the baselines' (simulator qemu-x86_64 version 8.2.2 (Debian 1:8.2.2+ds-0) "
        "\u2192 qemu-x86_64 version 7.2."
    )
    for name, text in (
        ("terminal", out),
        ("summary.md", (reports / "summary.md").read_text().replace("\\_", "_")),  # Markdown-escaped
        ("index.html", html.unescape((reports / "index.html").read_text())),
    ):
        assert _headline_count(text) == 1, name
        assert "re-baseline with: perfguard baseline update --targets x86_64" in text, name
        assert "regression" not in text.split(HEADLINE)[1].split("\n")[0], name
    assert sentence in " ".join(out.split())
    assert "1 kernel(s) moved but are not judged" in out

    # The option that fails on it, and the control: the same counts under the same toolchain regress.
    assert main([*argv, "--fail-on-toolchain-change"]) == 3
    # Not opted out: the result that moved is an error that says why it could not be judged.
    config.write_text(config.read_text().replace("allow_unjudged = true\n", ""))
    capsys.readouterr()
    assert main(argv) == 3
    said = " ".join(capsys.readouterr().out.split())
    assert (
        f"gemv_1024[x86_64]: not judged: its baseline was measured with another toolchain (simulator) and "
        f"{config.parent} is not in a git repository, so its base revision cannot be measured again; "
        f"re-baseline with: perfguard baseline update --targets x86_64 (or allow_unjudged = true in "
        f"perfguard.toml)"
    ) in said
    data["toolchain"]["simulator"] = old
    path.write_text(json.dumps(data))
    assert main(argv) == 1
    report = json.loads((reports / "perfguard.json").read_text())
    assert report["summary"]["toolchain_changed"] == {} and report["summary"]["regression"] == 1
    capsys.readouterr()

    # The command the headline gives re-baselines (here for the two kernels only): then all is quiet.
    data["toolchain"]["simulator"] = "qemu-x86_64 version 8.2.2; " + old.split("; ", 1)[1]
    path.write_text(json.dumps(data))
    assert main(["baseline", "update", "--targets", "x86_64", "--config", str(config), "--kernels", KERNELS]) == 0
    assert main(argv) == 0
    assert _headline_count(capsys.readouterr().out) == 0
    assert json.loads(path.read_text())["toolchain"]["simulator"] == old


@pytest.fixture(scope="module")
def gemv_check(tmp_path_factory, cache_dir) -> tuple[int, dict]:
    """`perfguard check` of gemv_1024 on x86_64 against this repository's committed baseline, once
    for the tests below: its exit code and its result."""
    config = repository_project(tmp_path_factory.mktemp("gemv-check") / "repo", cache_dir)
    code = main(["check", "--config", str(config), "--kernels", "gemv_1024", "--targets", "x86_64"])
    return code, json.loads((config.parent / "reports" / "perfguard.json").read_text())["results"][0]


@pytest.mark.slow
def test_a_field_the_baseline_never_recorded_is_no_difference(gemv_check):
    """The committed baselines predate the libc/llvm/harness fields: they still compare cleanly."""
    committed = json.loads((REPO / "baselines" / "x86_64" / "gemv_1024.json").read_text())["toolchain"]
    code, result = gemv_check
    assert code == 0
    assert {"cc", "libc", "tvm", "llvm", "harness", "simulator"} <= set(result["toolchain"])
    assert result["toolchain"]["libc"].startswith("glibc 2.36 (libc6-dev 2.36-")
    assert result["toolchain_changed"] == {} and result["verdict"] == "unchanged"
    assert "libc" not in committed or committed["libc"] == result["toolchain"]["libc"]


# -- the QEMU plugin API -------------------------------------------------------------------------------

# A stand-in for QEMU's plugin loader: it loads the real plugin binary lazily (the plugin's calls
# into QEMU are never reached) and calls its qemu_plugin_install with the qemu_info_t a QEMU of the
# given plugin API versions passes. QEMU 9.x cannot be installed here; this is the part of it the
# plugin's check reads.
HOST_C = r"""
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef struct { const char *target_name; struct { int min; int cur; } version; bool system_emulation;
                 union { struct { int smp_vcpus; int max_vcpus; } system; }; } qemu_info_t;
int main(int argc, char **argv) {
    void *so = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
    if (!so) { fprintf(stderr, "%s\n", dlerror()); return 99; }
    int (*install)(uint64_t, const qemu_info_t *, int, char **) = dlsym(so, "qemu_plugin_install");
    int *version = dlsym(so, "qemu_plugin_version");
    qemu_info_t info = { "x86_64", { atoi(argv[2]), atoi(argv[3]) }, false, { { 0, 0 } } };
    printf("plugin_version=%d\n", *version);
    return install(1, &info, argc - 4, argv + 4);
}
"""


@pytest.fixture(scope="module")
def plugin_host(tmp_path_factory, cache_dir):
    from perfguard.sim.qemu import QemuSimulator

    folder = tmp_path_factory.mktemp("plugin-host")
    (folder / "host.c").write_text(HOST_C)
    subprocess.run(["cc", "-O1", "-o", str(folder / "host"), str(folder / "host.c"), "-ldl"], check=True)
    plugin = QemuSimulator(cache_dir).api_check_path()

    def install(api_min: int, api_cur: int, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(folder / "host"), str(plugin), str(api_min), str(api_cur), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    return install


@pytest.mark.parametrize("api_min, api_cur", [(2, 4), (2, 2), (0, 2), (1, 3)])
def test_the_plugin_refuses_an_unsupported_plugin_api(plugin_host, api_min, api_cur):
    proc = plugin_host(api_min, api_cur)
    assert proc.returncode == 1 and "plugin_version=1" in proc.stdout
    assert proc.stderr.strip() == (
        f"perfguard plugin: QEMU offers plugin API versions {api_min}..{api_cur}, "
        f"perfguard's plugin supports 1..1 (QEMU 7.2 to 8.2; validated with 7.2)"
    )


@pytest.mark.parametrize("api_min", [0, 1])
def test_the_plugin_accepts_api_version_1(plugin_host, api_min):
    proc = plugin_host(api_min, 1)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.slow
def test_real_qemu_7_2_loads_the_check_and_counts_as_the_baselines_did(gemv_check):
    """The check plugin, loaded before the counting one by real QEMU 7.2, changes no count: the
    committed x86_64 baseline's statistics come out exactly (this is also the run's path)."""
    code, result = gemv_check
    assert code == 0
    committed = json.loads((REPO / "baselines" / "x86_64" / "gemv_1024.json").read_text())
    counts = {k: v for k, v in committed["stats"].items() if k != "blocks"}  # the block profile stays in the baseline
    assert result["stats"] == counts


def test_a_qemu_without_plugin_api_1_is_exit_3_before_any_run(tmp_path, cache_dir, capsys, monkeypatch):
    """A stand-in `qemu-x86_64` reporting 9.2 (no QEMU 9 package exists for Debian 12): perfguard
    stops with a clear message instead of letting QEMU refuse or the plugin miscount."""
    fake = tmp_path / "bin" / "qemu-x86_64"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'qemu-x86_64 version 9.2.0';;\n"
        "  *) echo '-plugin FILE load a plugin';;\nesac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    config = repository_project(tmp_path / "repo", cache_dir)
    code = main(["check", "--config", str(config), "--kernels", "gemv_1024", "--targets", "x86_64"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 3, out
    assert (
        "qemu-x86_64 (target x86_64) is 9.2: QEMU 9.0 and newer need plugin API version 2 or later, "
        "perfguard's plugin implements version 1"
    ) in out


# -- perfguard doctor ----------------------------------------------------------------------------------


def test_doctor_prints_the_fingerprint_and_whether_it_matches_the_baselines(tmp_path, cache_dir, capsys):
    config = repository_project(tmp_path / "repo", cache_dir)
    assert main(["doctor", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    counts = {}
    loaded = load_config(config)
    for target in ("x86_64", "aarch64", "riscv64"):
        found = re.search(rf"toolchain {target}: [0-9a-f]{{16}} matches its (\d+) baseline\(s\)", out)
        assert found, out
        counts[target] = int(found.group(1))
        # one per configured kernel on the target, whatever the repository configures ([[model]] kernels are not counted)
        assert counts[target] == sum(1 for k in loaded.kernels if k.targets is None or target in k.targets) > 0, out
    assert "libc: glibc 2.36 (libc6-dev-arm64-cross " in out
    assert "toolchain matches the committed baselines'" in out

    path = config.parent / "baselines" / "riscv64" / "gemv_1024.json"
    data = json.loads(path.read_text())
    data["toolchain"]["cc"] = "riscv64-linux-gnu-gcc (Debian 13.2.0-1) 13.2.0"
    data["toolchain"]["perfguard"] = __version__  # one field differs (the committed baselines are 0.1.0's)
    path.write_text(json.dumps(data))
    assert main(["doctor", "--config", str(config)]) == 0  # informational: check --fail-on-toolchain-change gates
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(
        rf"toolchain riscv64: [0-9a-f]{{16}} differs from 1 of its {counts['riscv64']} baseline\(s\)", out
    ), out
    assert (
        "toolchain differs from the baselines' (cc riscv64-linux-gnu-gcc (Debian 13.2.0-1) 13.2.0 \u2192 "
        "riscv64-linux-gnu-gcc (Debian 12.2.0-13) 12.2.0); re-baseline with: perfguard baseline update "
        "--targets riscv64"
    ) in out
    assert "toolchain toolchain" not in out  # the line's label is not the sentence's first word again
    # who wrote the baselines: the committed ones, by 0.1.0 as schema 3
    assert re.search(
        r"baselines written by perfguard 0\.1\.0 as baseline schema 3 with loop nest version 2: \d+ on "
        r"aarch64, \d+ on riscv64, \d+ on x86_64",
        out,
    ), out


def test_the_action_annotates_a_toolchain_change_once():
    from perfguard.document.report import Report
    from perfguard.judge.verdicts import toolchain_summary
    from perfguard.shells.action import annotation_lines

    changed = {"cc": {"baseline": "gcc 12", "current": "gcc 13"}}
    summary = toolchain_summary([("aarch64", changed), ("riscv64", changed), ("x86_64", {})])
    assert summary == {
        "tools": {"cc": [{"baseline": "gcc 12", "current": "gcc 13"}]},
        "targets": ["aarch64", "riscv64"],
        "rebaseline": "perfguard baseline update --targets aarch64,riscv64",
    }
    results = [
        {"kernel": "k", "target": t, "verdict": "toolchain", "toolchain_changed": changed}
        for t in ("aarch64", "riscv64")
    ]
    lines = annotation_lines(
        Report.from_json(
            {
                "schema": 1,
                "config": None,
                "results": results,
                "summary": {"exit_code": 0, "toolchain_changed": summary, "toolchain": 2},
            }
        )
    )
    assert len(lines) == 1 and lines[0].startswith("::warning ")
    assert "cc gcc 12 \u2192 gcc 13" in lines[0] and "2 kernel(s) moved but are not judged" in lines[0]
