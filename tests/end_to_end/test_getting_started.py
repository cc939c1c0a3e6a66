"""docs/getting-started.md, run as a newcomer would: every `bash` block of the page, literally, in
order, in one shell in a temporary folder (init -> baseline update -> commit -> check -> a
regression caught -> the report). A line ending in `# exits N` must exit N; every other line 0.

The `sh` block (installing perfguard) is not run: the test suite runs where perfguard is set up.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

from tests.conftest import REPO

PAGE = REPO / "docs" / "getting-started.md"
EXITS = re.compile(r"#\s*exits\s+(\d+)")


def page_commands() -> list[tuple[str, int]]:
    """(command, expected exit code) of every line of the page's ```bash blocks."""
    blocks = re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)
    out = []
    for block in blocks:
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                found = EXITS.search(line)
                out.append((line, int(found.group(1)) if found else 0))
    return out


def script(commands: list[tuple[str, int]]) -> str:
    """One bash script that runs each command and stops at the first unexpected exit code."""
    lines = ["set -u"]
    for command, code in commands:
        lines += [
            command,
            f'rc=$?; if [ $rc -ne {code} ]; then echo "UNEXPECTED exit $rc (wanted {code}): "{shlex.quote(command)}; exit 99; fi',
        ]
    return "\n".join(lines) + "\n"


def test_the_page_has_the_steps_it_promises():
    commands = [c for c, _ in page_commands()]
    assert commands[:2] == ["mkdir myproject && cd myproject && git init -q", "perfguard init"]
    assert "perfguard baseline update" in commands and commands.count("perfguard check") == 1
    assert [code for _, code in page_commands()].count(1) == 1  # the regression


def test_getting_started_runs_as_written(tmp_path, cache_dir):
    env = {
        **os.environ,
        "PERFGUARD_CACHE_DIR": str(cache_dir),
        "GIT_AUTHOR_NAME": "newcomer",
        "GIT_AUTHOR_EMAIL": "newcomer@example.com",
        "GIT_COMMITTER_NAME": "newcomer",
        "GIT_COMMITTER_EMAIL": "newcomer@example.com",
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
    }
    (tmp_path / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n")
    proc = subprocess.run(
        ["bash", "-c", script(page_commands())], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    project = tmp_path / "myproject"
    assert "next:\n  perfguard baseline update\n  git add perfguard.toml" in out  # init says the next two commands
    assert out.count("report: reports/index.html (summary: reports/summary.md)") == 2
    tracked = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True, check=True).stdout
    assert {
        "perfguard.toml",
        "perfguard_kernels/matmul.py",
        ".github/workflows/perfguard.yml",
        ".gitignore",
        "baselines/x86_64/matmul.json",
        "baselines/aarch64/matmul.json",
        "baselines/riscv64/matmul.json",
    } <= set(tracked.split())
    report = json.loads((project / "reports" / "perfguard.json").read_text())
    verdicts = {r["target"]: r for r in report["results"]}
    assert verdicts["x86_64"]["verdict"] == "regression" and verdicts["x86_64"]["delta_pct"] > 50
    # step 5 says what the check printed, in its words and figures (issue 42)
    page = PAGE.read_text()
    for target, figure in (("x86_64", "+178"), ("aarch64", "-2.25 %"), ("riscv64", "-32.17 %")):
        r = verdicts[target]
        assert figure in page and f"{r['delta_pct']:+.2f} %".startswith(figure.split(" ")[0]), (target, r["delta_pct"])
    assert verdicts["aarch64"]["verdict"] == verdicts["riscv64"]["verdict"] == "improvement"
    assert report["summary"]["exit_code"] == 1 and verdicts["x86_64"]["reference"] == "numpy"
    assert "regression" in (project / "reports" / "summary.md").read_text()
    assert "matmul" in (project / "reports" / "index.html").read_text()
