"""The documentation's reference parts, generated from the code they describe (one source of truth).

Each part sits in a page between `<!-- generated: NAME -->` and `<!-- /generated -->`:

  config-perfguard, config-kernel, config-model  docs/configuration.md  perfguard.config.KEY_DOCS
  targets                                         docs/configuration.md  perfguard.targets.BUILTIN
  families                                        docs/families.md       every family's knobs (perfguard.kernels)
  exit-codes                                      docs/troubleshooting.md  perfguard.errors.EXIT_CODES
  cli                                             docs/command-line.md   every subcommand's --help (perfguard.shells.cli)

`python scripts/docs_reference.py` rewrites them; `--check` exits 1 naming a stale page (the test
suite runs it: tests/structure/test_docs.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BLOCK = re.compile(r"(<!-- generated: ([a-z-]+) -->\n)(.*?)(<!-- /generated -->)", re.S)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def config_table(table: str) -> str:
    from perfguard.config import KEY_DOCS

    return _table(
        ["key", "type", "default", "meaning"],
        [[f"`{key}`", kind, default or "", meaning] for key, (kind, default, meaning) in KEY_DOCS[table].items()],
    )


def targets_table() -> str:
    import dataclasses

    from perfguard.targets import BUILTIN, TargetProfile

    rows = []
    for name, p in BUILTIN.items():
        tvm = p.tvm_target
        rows.append(
            [
                f"`{name}`",
                p.isa,
                f"`{tvm.get('mcpu', '')}`" if tvm.get("mcpu") else "",
                ", ".join(f"`{a}`" for a in tvm.get("mattr", [])),
                f"`{p.pipeline_cpu}`",
                f"{p.clock_hz / 1e9:g} GHz",
                f"{p.peak_gflops:g}",
                f"{p.peak_bandwidth_gbs:g}",
                f"{p.l1d.size // 1024} KiB / {p.l2.size // 1024} KiB",
            ]
        )
    keys = ", ".join(f"`{f.name}`" for f in dataclasses.fields(TargetProfile) if f.name != "name")
    return (
        _table(
            ["target", "ISA", "mcpu", "mattr", "llvm-mca CPU", "clock", "peak GFLOP/s", "peak GB/s", "L1D / L2"], rows
        )
        + f"\nKeys of a `[target.NAME]` table (any field of a profile; a new target also needs `base`): {keys}; "
        f"and `machine`, the machine profile its intervals come from (below).\n"
        + '\nMachine profiles (`perfguard/machine_profiles/NAME.json`; `[target.NAME] machine = "NAME"`):\n\n'
        + machines_table()
    )


def machines_table() -> str:
    from perfguard import machines

    rows = []
    for name in machines.names():
        m = machines.load(name)
        for isa, section in sorted(m.isas.items()):
            rows.append(
                [
                    f"`{name}`",
                    m.cpu.model_name,
                    m.cpu.vendor,
                    str(m.cpu.family),
                    str(m.cpu.model),
                    isa,
                    str(section.pairs),
                    m.date,
                    f"`{section.source.get('native_file', '')}`",
                    ", ".join(f"`{f}`" for f in sorted(section.models)) or "none",
                ]
            )
    return _table(
        [
            "profile",
            "CPU",
            "vendor",
            "family",
            "model",
            "ISA",
            "verdict pairs",
            "timed",
            "native timings",
            "calibrated models carried",
        ],
        rows,
    )


def _toml(value: object) -> str:
    """A default as it is written in perfguard.toml."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _allowed(knob) -> str:
    parts = []
    if knob.choices:
        parts.append("one of " + ", ".join(f"`{c}`" for c in knob.choices))
    if knob.minimum is not None:
        parts.append(f">= {knob.minimum}")
    if knob.divides:
        parts.append(f"divides `{knob.divides}`")
    return "; ".join(parts)


def families_text() -> str:
    from perfguard.kernels import FAMILY_NAMES, get_family

    out = []
    for name in FAMILY_NAMES:
        family = get_family(name)
        module = sys.modules[family.entry.__module__]
        out.append(
            f'## `{name}`\n\n{family.doc}\n\n`entry = "{family.entry.__module__}:{family.entry.__name__}"`, '
            f'`family = "{name}"`; the shape: {", ".join(f"`{k}`" for k in family.shape_keys)}'
            f"{'' if family.space is None else '; `perfguard tune` searches its schedule space'}"
            f" ({Path(module.__file__).relative_to(REPO).as_posix()}).\n"
        )
        rows = []
        for key, knob in family.knobs.items():
            default = (
                "required" if knob.required else "automatic" if knob.default is None else f"`{_toml(knob.default)}`"
            )
            rows.append([f"`{key}`", knob.kind.__name__, default, _allowed(knob), knob.doc])
        out.append(_table(["knob", "type", "default", "allowed", "meaning"], rows))
    return "\n".join(out)


def exit_codes_table() -> str:
    from perfguard.errors import EXIT_CODES

    return _table(["exit code", "meaning"], [[f"`{code}`", meaning] for code, meaning in EXIT_CODES.items()])


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def cli_text() -> str:
    from perfguard.shells.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the page must not depend on one
    out = []

    def walk(parser: argparse.ArgumentParser, depth: int) -> None:
        if depth:
            out.append(f"{'#' * (depth + 1)} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        for sub in _subparsers(parser).values():
            walk(sub, depth + 1)

    walk(build_parser(), 0)
    return "\n".join(out)


PARTS = {
    "config-perfguard": lambda: config_table("perfguard"),
    "config-kernel": lambda: config_table("kernel"),
    "config-model": lambda: config_table("model"),
    "targets": targets_table,
    "families": families_text,
    "exit-codes": exit_codes_table,
    "cli": cli_text,
}


def regenerate(text: str) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in PARTS:
            raise SystemExit(f"unknown generated part '{name}' (known: {', '.join(PARTS)})")
        return match.group(1) + PARTS[name]() + match.group(4)

    return BLOCK.sub(fill, text)


def pages() -> dict[Path, tuple[str, str]]:
    """Every page with a generated part: (its text, the text it should have)."""
    out = {}
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        if BLOCK.search(text):
            out[page] = (text, regenerate(text))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale; write nothing")
    args = parser.parse_args()
    stale = []
    for page, (text, wanted) in pages().items():
        if text != wanted:
            stale.append(page)
            if not args.check:
                page.write_text(wanted)
    for page in stale:
        print(f"{page.relative_to(REPO)}: {'stale' if args.check else 'regenerated'}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
