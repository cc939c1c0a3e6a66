"""The screenshots of the documentation (docs/report-*.png), taken from the golden report of a failing check.

    python scripts/docs_screenshots.py           # render the golden report, screenshot it, record the digests
    python scripts/docs_screenshots.py --check   # exit 1 when the recorded digests are not this perfguard's pages

The report is tests/report/golden/repo/perfguard.json: this repository's kernels checked after gemm_256's
tile_k went from 4 to 1 (three regressions). This perfguard renders it (index.html, the gemm_256 page,
summary.md shown as a pull-request comment) and Debian's headless Chromium photographs each page.
docs/screenshots.json records, per picture, the SHA-256 of the page it shows: when a renderer or the
golden report changes, the digest does and tests/structure/test_docs.py says the pictures are stale
(as it does for the generated reference pages); Chromium's own pixels are not compared.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RECORD = DOCS / "screenshots.json"
GOLDEN = REPO / "tests" / "report" / "golden" / "repo" / "perfguard.json"
KERNEL = "gemm_256"
COMMENT_WIDTH = 780  # GitHub's comment body in a pull request's conversation
# picture -> (the page it shows, relative to the report folder; window width, height)
PICTURES = {
    "report-summary.png": ("index.html", 1400, 1000),
    "report-kernel.png": (f"kernels/{KERNEL}.html", 1400, 1400),
    "report-comment.png": ("comment.html", COMMENT_WIDTH + 60, 1000),
}


def comment_html(markdown_text: str) -> str:
    """summary.md as a browser shows the pull-request comment: tables, raw <details> and <sub> kept, in
    a column as wide as GitHub's comment body."""
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables"])
    return (
        '<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0;font:14px/1.5 '
        f"system-ui,sans-serif}} main{{max-width:{COMMENT_WIDTH}px;padding:16px}} table{{border-collapse:collapse}} "
        f"td,th{{border:1px solid #d0d7de;padding:6px 13px}}</style></head><body><main>{body}</main></body>"
        "</html>"
    )


def render(folder: Path) -> dict[str, Path]:
    """The golden report's pages written into `folder` by this perfguard: picture -> page."""
    sys.path.insert(0, str(REPO))
    from perfguard.document.report import Report
    from perfguard.report.pages import write_pages

    write_pages(Report.from_json(copy.deepcopy(json.loads(GOLDEN.read_text())), str(GOLDEN)), folder)
    (folder / "comment.html").write_text(comment_html((folder / "summary.md").read_text()))
    return {name: folder / page for name, (page, _, _) in PICTURES.items()}


def digests(pages: dict[str, Path]) -> dict[str, str]:
    return {name: hashlib.sha256(page.read_bytes()).hexdigest() for name, page in sorted(pages.items())}


def current_digests() -> dict[str, str]:
    """The digests of the pages this perfguard renders from the golden report now."""
    with tempfile.TemporaryDirectory(prefix="docs-shots-") as tmp:
        return digests(render(Path(tmp)))


def recorded() -> dict[str, str]:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def screenshot(page: Path, out: Path, width: int, height: int, work: Path) -> None:
    """Headless Chromium, offline (every host name unresolvable), one picture of the page's first screen."""
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if chromium is None:
        raise SystemExit("chromium is not installed: PERFGUARD_EXTRAS=test bash scripts/setup.sh installs it")
    cmd = [
        chromium,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={work}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--window-size={width},{height}",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")
    subprocess.run(cmd, check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the pictures are current")
    args = parser.parse_args(argv)
    if args.check:
        stale = sorted(k for k, v in current_digests().items() if recorded().get(k) != v)
        if stale:
            print(f"stale: {', '.join(stale)} (python scripts/docs_screenshots.py)")
            return 1
        return 0
    with tempfile.TemporaryDirectory(prefix="docs-shots-") as tmp:
        pages = render(Path(tmp) / "report")
        for name, page in pages.items():
            _, width, height = PICTURES[name]
            screenshot(page, DOCS / name, width, height, Path(tmp) / "profile")
            print(f"wrote {DOCS / name}")
        RECORD.write_text(json.dumps(digests(pages), indent=2, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
