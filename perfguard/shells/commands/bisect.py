"""perfguard bisect --good REF --bad REF (--kernel NAME | --model NAME) --target T: find the commit that
made a kernel (or a [[model]]'s total) slower."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from perfguard.atomic import atomic_write_text
from perfguard.config import find_config, load_config
from perfguard.errors import EXIT_OK, EXIT_REGRESSION
from perfguard.executors import add_executor_options, executor_choice
from perfguard.judge.attribution import attribution_between
from perfguard.report.numbers import pct, seconds, signed_count
from perfguard.report.terminal import console
from perfguard.report.text import block_line
from perfguard.report.where import top_lines, where_line
from perfguard.runs.bisect import AMBIGUOUS, NO_CROSSING, Bisection, Bisector, Visit
from perfguard.runs.revisions import Measurer, Project
from perfguard.shells.commands.compare import check_numbers
from perfguard.sim.base import SIMULATOR_NAMES
from perfguard.targets import TargetProfile


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bisect", help="find the first commit whose predicted time crossed the threshold")
    p.add_argument("--good", required=True, metavar="REF", help="a revision where the kernel was fast enough")
    p.add_argument("--bad", required=True, metavar="REF", help="a later revision where it is slower")
    follow = p.add_mutually_exclusive_group(required=True)
    follow.add_argument("--kernel", help="the kernel to follow")
    follow.add_argument("--model", help="the [[model]] whose total (time per inference) to follow")
    p.add_argument("--target", required=True, help="the target to follow it on")
    p.add_argument(
        "--threshold",
        type=float,
        help="percent over the good revision's predicted time (default: the kernel's or model's threshold at --good)",
    )
    p.add_argument(
        "--config",
        type=Path,
        help="perfguard.toml in the working tree (default: found from here); "
        "each revision's own copy at the same path is used",
    )
    p.add_argument("--simulator", choices=SIMULATOR_NAMES, help="override the configs' simulator")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: one per 4 jobs to run, up to the CPU count)")
    add_executor_options(p)
    p.add_argument("--json", type=Path, help="write every visited revision and the outcome here")
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="measure HEAD as committed even when the working tree has uncommitted changes",
    )
    p.set_defaults(run=run)


MOST = 5  # statistics named for a kernel's first bad commit
CHANGED_BLOCKS = 5  # changed blocks named for it


@dataclass(frozen=True)
class Explanation:
    """What changed from a kernel's last good revision to its first bad one."""

    changed_stats: list[str]  # the statistics that moved most: "name +delta (+pct)"
    where: str | None  # the loop whose cycles changed most, as `perfguard check` says it (None: no attribution)
    where_top: list[str] | None  # the loops whose cycles changed most
    changed_blocks: list[str] | None  # the blocks whose code changed most


def explain(b: Bisection, profile: TargetProfile, cache_dir: Path) -> Explanation:
    assert b.last_good is not None and b.first_bad is not None  # explained only when a crossing was found
    good, bad = b.last_good.result, b.first_bad.result
    assert good is not None and bad is not None and good.stats is not None and bad.stats is not None  # measured
    before, after = good.stats, bad.stats
    rows = []
    for name in before.to_dict():
        x, y = getattr(before, name), getattr(after, name)
        if x is None or y is None or x == y:
            continue
        rows.append((abs(y - x) / x if x else float("inf"), name, x, y))
    rows.sort(key=lambda row: (-row[0], row[1]))
    stats = [
        f"{name} {signed_count(y - x)}" + (f" ({pct(100.0 * (y - x) / x)})" if x else "")
        for _, name, x, y in rows[:MOST]
    ]
    found = attribution_between(good, bad, profile, cache_dir)
    if found is None:
        return Explanation(stats, None, None, None)
    return Explanation(
        stats,
        where_line(found.attribution),
        top_lines(found.attribution)[0],
        [block_line(c) for c in found.blocks[:CHANGED_BLOCKS]],
    )


@dataclass(frozen=True)
class BisectReport:
    """A bisection and what explains it: `perfguard bisect --json`'s document."""

    bisection: Bisection
    model: bool  # a [[model]]'s total was followed (the bisection's `kernel` is the model's name)
    explanation: Explanation | None = None  # a kernel's first bad commit (a model's step says its changes)

    @classmethod
    def of(cls, b: Bisection, model: bool, profile: TargetProfile, cache_dir: Path) -> BisectReport:
        explained = b.step is None and b.first_bad is not None
        return cls(b, model, explain(b, profile, cache_dir) if explained else None)

    def to_dict(self) -> dict:
        b = self.bisection
        data = {
            "model" if self.model else "kernel": b.kernel,
            "target": b.target,
            "threshold_pct": b.threshold_pct,
            "outcome": b.outcome,
            "commits": len(b.commits),
            "good": b.good.to_dict(),
            "bad": b.bad.to_dict(),
            "visits": [v.to_dict() for v in b.visits],
            "candidates": b.candidates,
            "first_bad": b.first_bad.to_dict() if b.first_bad else None,
            "last_good": b.last_good.to_dict() if b.last_good else None,
        }
        if b.step is not None:  # a model: what changed from the last good revision to the first bad one
            data["changes"] = list(b.step.changes)
            data["step_delta_pct"] = b.step.delta_pct
        elif self.explanation is not None:
            e = self.explanation
            data.update(
                changed_stats=e.changed_stats, where=e.where, where_top=e.where_top, changed_blocks=e.changed_blocks
            )
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def _line(visit: Visit) -> str:
    if visit.skipped:
        return f"  skip  {visit.sha[:12]}  {visit.subject[:50]}: {visit.skipped}"
    mark = "bad " if visit.crossed else "good"
    assert visit.verdict is not None  # measured, not skipped: judged
    return f"  {mark}  {visit.sha[:12]}  {seconds(visit.time_s)}  {pct(visit.verdict.delta_pct)}  {visit.subject[:50]}"


def run(args: argparse.Namespace) -> int:
    out = console()
    check_numbers(args)
    config_path = (args.config or find_config(Path.cwd())).resolve()
    current = load_config(config_path)
    project = Project.of(config_path, "bisect")
    if not args.allow_dirty:
        project.refuse_dirty_head(
            {
                args.good: project.resolve(args.good, "bisect: --good"),
                args.bad: project.resolve(args.bad, "bisect: --bad"),
            },
            "bisect",
        )
    name, model = (args.model, True) if args.model is not None else (args.kernel, False)
    out.print(
        f"bisect {'model ' if model else ''}{escape(name)}[{escape(args.target)}] between --good "
        f"{escape(args.good)} and --bad {escape(args.bad)}"
    )
    with Measurer(
        current.storage.cache_dir, args.simulator, args.jobs or current.jobs, executor_choice(args)
    ) as measurer:
        bisector = Bisector(
            project,
            name,
            args.target,
            args.threshold,
            measurer,
            on_visit=lambda v: out.print(escape(_line(v))),
            model=model,
        )
        b = bisector.run(args.good, args.bad)
    found = BisectReport.of(b, model, current.profile(args.target, "--target"), current.storage.cache_dir)
    if args.json:
        atomic_write_text(args.json, found.to_json())
    skipped = sum(1 for v in b.visits if v.skipped)
    visited = f"{len(b.visits)} revision(s) measured of {len(b.commits) + 1}" + (
        f", {skipped} skipped" if skipped else ""
    )
    assert b.bad.verdict is not None  # --bad is measured or the bisection stops with its error
    if b.outcome == NO_CROSSING:
        out.print(
            f"no crossing: --bad {escape(args.bad)} is {pct(b.bad.verdict.delta_pct)} against --good "
            f"{escape(args.good)}, within the threshold of {b.threshold_pct:.2f} % ({visited})"
        )
        return EXIT_OK
    first, last = b.first_bad, b.last_good
    # A crossing: both were measured and judged (an unmeasurable revision is skipped, never first or last).
    assert first is not None and last is not None and first.verdict is not None and last.verdict is not None
    if b.outcome == AMBIGUOUS:
        out.print(
            f"the first bad commit is one of {len(b.candidates)} (the others could not be measured): "
            + ", ".join(sha[:12] for sha in b.candidates)
        )
    out.print(f"first bad commit: {first.sha} {escape(first.subject)}")
    out.print(
        f"  predicted {seconds(first.time_s)}{' per inference' if model else ''} against "
        f"{seconds(first.reference_s)} at --good: {pct(first.verdict.delta_pct)} (threshold {b.threshold_pct:.2f} %)"
    )
    if model:
        assert b.step is not None  # a model's crossing is judged step by step (Bisector.run)
        out.print(
            f"  last good {last.sha[:12]}: {pct(last.verdict.delta_pct)}; from it to the first bad commit "
            f"({pct(b.step.delta_pct)}):"
        )
        for line in b.step.changes or ["no kernel moved beyond its threshold (small changes added up)"]:
            out.print(f"    {escape(line)}")
        out.print(visited)
        return EXIT_REGRESSION
    explained = found.explanation
    assert explained is not None  # BisectReport.of explains every kernel's crossing
    out.print(
        f"  last good {last.sha[:12]}: {pct(last.verdict.delta_pct)}; statistics that changed most: "
        + escape(", ".join(explained.changed_stats) or "none")
    )
    if explained.where:
        out.print(f"  where {escape(explained.where)}")
    for line in explained.changed_blocks or []:
        out.print(f"  block {escape(line)}")
    out.print(visited)
    return EXIT_REGRESSION
