"""How long the HTML and Markdown reports take to render, from a captured JSON report.

    python benchmarks/report_time.py [--report tests/report/golden/repo/perfguard.json] [--runs 5]

The default report is this repository's own perfguard.toml checked after gemm_256's tile_k went
from 4 to 1 (59 kernel x target results, 158 charts; tests/report/golden/regenerate.py captures
it). Each run is a fresh Python process that

1. imports perfguard.document.report and perfguard.report.pages (what `perfguard report` imports to
   render; a check has imported them already),
2. reads the JSON report,
3. renders every page into an empty folder: cold, templates compiled on first use,
4. changes one kernel's results (the one with the largest change: its deltas and current times
   up by 10 %) and renders every page again into the same folder: the render of a check in
   which one kernel changed, in a process whose templates are compiled.

Times are CPU seconds of the process (user + sys, time.process_time), medians over the runs;
CPU time is steadier than wall time on a loaded machine. It measures the perfguard on
PYTHONPATH, so the same script times another tree (e.g. one before a change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "tests" / "report" / "golden" / "repo" / "perfguard.json"

CHILD = r"""
import json, sys, time
import perfguard
print("perfguard from", perfguard.__file__, file=sys.stderr)
from pathlib import Path
t0 = time.process_time()
from perfguard.document.report import read_report
from perfguard.report.pages import write_pages
t1 = time.process_time()
report = read_report(Path(sys.argv[1]))
t2 = time.process_time()
out = Path(sys.argv[2])
write_pages(report, out)
t3 = time.process_time()
moved = max(report.results, key=lambda r: abs(r.delta_pct or 0.0))
for r in report.results:
    if r.kernel == moved.kernel:
        r.delta_pct = (r.delta_pct or 0.0) + 10.0
        r.current_time_s = None if r.current_time_s is None else r.current_time_s * 1.1
write_pages(report, out)
t4 = time.process_time()
pages = len(list(out.rglob("*.html")))
charts = sum(p.read_text().count('<svg class="chart"') for p in out.rglob("*.html"))
print(json.dumps({"import": t1 - t0, "read": t2 - t1, "cold": t3 - t2, "changed": t4 - t3, "total": t4 - t0,
                  "pages": pages, "charts": charts, "results": len(report.results), "kernel": moved.kernel}))
"""


def run_once(report: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="report-time-") as out:
        # cwd: not this checkout, which `python -c` would put ahead of PYTHONPATH
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(report.resolve()), out],
            capture_output=True,
            text=True,
            check=True,
            cwd=out,
        )
    return {**json.loads(proc.stdout.splitlines()[-1]), "tree": proc.stderr.split("perfguard from ")[-1].strip()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    runs = [run_once(args.report) for _ in range(args.runs)]
    first = runs[0]
    print(
        f"{args.report.name}: {first['results']} results, {first['pages']} pages, {first['charts']} charts; "
        f"median of {args.runs} fresh processes, CPU seconds (user + sys); perfguard from {first['tree']}\n"
    )
    print("| step | median | min | max |")
    print("| --- | ---: | ---: | ---: |")
    for key, label in (
        ("import", "import the renderers (and what they import)"),
        ("read", "read the JSON report"),
        ("cold", "render every page, cold (templates compiled)"),
        ("changed", f"render every page again, {first['kernel']} changed"),
        ("total", "the whole process"),
    ):
        values = [r[key] for r in runs]
        print(f"| {label} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
