"""A machine profile for the CPU this runs on: collect, train, time the verdict pairs, publish.

The per-machine calibration end to end (perfguard.machines): on this CPU,

1. `perfguard calibrate collect --root benchmarks/profiles/NAME` for every built-in family (the
   default shape groups; none is a shape of the verdict pairs), timed natively here;
2. `perfguard calibrate train --root benchmarks/profiles/NAME`: one model per family, each with
   its nested leave-one-shape-out decision whether `model = "auto"` uses it;
3. benchmarks/verdicts.py times the verdict pairs here (benchmarks/verdicts-native-NAME.json) and
   scores them with those models, then writes perfguard/machine_profiles/NAME.json: the CPU's
   identity, the interval quantiles of every model from its residuals on this CPU's pairs, and
   the models it carries (copied to perfguard/machine_profiles/NAME/ISA/FAMILY.json).

NAME is the CPU's identity, e.g. intel-6-167 (vendor, family, model), so a profile stands for one
kind of CPU and each new one adds a file. The recalibration workflow runs this on its runner and
proposes the result in a pull request. Steps whose output exists are skipped unless --fresh.

    python benchmarks/machine_profile.py [--target x86_64] [--variants 32] [--families a,b] [--fresh] [-j 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

from perfguard.errors import InputError  # noqa: E402
from perfguard.job.native import this_machine  # noqa: E402
from perfguard.kernels import FAMILY_NAMES  # noqa: E402
from perfguard.machines import MACHINES_DIR, CpuIdentity, profile_name  # noqa: E402


def run(*argv: str) -> None:
    print("+ " + " ".join(argv), flush=True)
    code = subprocess.run(list(argv), cwd=REPO, check=False).returncode
    if code != 0:
        raise SystemExit(f"machine_profile: {argv[1] if argv[1] != '-m' else argv[3]} failed with exit code {code}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="x86_64", help="the config's target this CPU runs natively")
    parser.add_argument("--variants", type=int, default=32, help="schedules per shape group (default 32)")
    parser.add_argument("--families", default=",".join(FAMILY_NAMES), help="comma-separated (default: all)")
    parser.add_argument("--seed", default="7")
    parser.add_argument("--fresh", action="store_true", help="collect, train and time again what exists")
    parser.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing when this CPU's profile already carries models for the target's ISA",
    )
    parser.add_argument(
        "--github-output",
        type=Path,
        metavar="FILE",
        help="append name=NAME and written=true|false here ($GITHUB_OUTPUT in the workflow)",
    )
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    machine = this_machine()
    try:
        cpu = CpuIdentity.parse(machine.cpu_id, machine.cpu)
    except InputError as exc:
        raise SystemExit(f"machine_profile: {exc.message}") from None
    name = profile_name(cpu)
    root = REPO / "benchmarks" / "profiles" / name
    print(f"machine_profile: {cpu.describe()} -> {name}", flush=True)
    if args.if_missing and _has_models(name, args.target):
        print(f"machine_profile: {MACHINES_DIR / name}.json already carries models for {args.target}: nothing to do")
        _outputs(args.github_output, name, False)
        return 0
    python, jobs = sys.executable, str(args.jobs)
    common = ["--target", args.target, "--root", str(root)]
    for family in [f for f in args.families.split(",") if f]:
        if family not in FAMILY_NAMES:
            raise SystemExit(f"machine_profile: unknown family '{family}' (one of {', '.join(FAMILY_NAMES)})")
        if args.fresh or not (root / "datasets" / args.target / f"{family}.json").exists():
            run(python, "-m", "perfguard.shells.cli", "calibrate", "collect", *common, "--family", family,
                "--variants", str(args.variants), "--seed", args.seed, "-j", jobs)  # fmt: skip
    run(python, "-m", "perfguard.shells.cli", "calibrate", "train", *common)
    verdicts = [python, "benchmarks/verdicts.py", "--profile", args.target, "-j", jobs]
    verdicts += ["--native-file", f"benchmarks/verdicts-native-{name}.json", "--models-root", str(root)]
    verdicts += ["--machine-profile", str(MACHINES_DIR / f"{name}.json"), "--json", str(root / "verdicts.json")]
    run(*verdicts, *(["--retime"] if args.fresh else []))
    print(
        f'machine_profile: wrote {MACHINES_DIR / name}.json; choose it with [target.{args.target}] machine = "{name}"'
    )
    _outputs(args.github_output, name, True)
    return 0


def _has_models(name: str, target: str) -> bool:
    from perfguard import machines
    from perfguard.config import load_config

    if name not in machines.names():
        return False
    isa = load_config(REPO / "perfguard.toml").profile(target, "--target").isa
    section = machines.load(name).isas.get(isa)
    return section is not None and bool(section.models)


def _outputs(path: Path | None, name: str, written: bool) -> None:
    if path is not None:
        with open(path, "a") as out:
            out.write(f"name={name}\nwritten={str(written).lower()}\n")


if __name__ == "__main__":
    raise SystemExit(main())
