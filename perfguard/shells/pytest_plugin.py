"""pytest --perfguard: every configured kernel x target as a test item. Hooks only.

The work (build, simulate, score, judge, native timing) is perfguard.shells.pytest_cases; this module
wires it into pytest: options, the `perfguard` marker, the `perfguard_check` fixture, the
collected items and the one report written at the end. Without --perfguard (or one of the
mode options that imply it) nothing else is registered and nothing heavy is imported.

Under pytest-xdist every worker collects the same items in the same order (the config is read
the same way everywhere), each item runs on one worker, and only the controller writes the
report: a worker's results reach it in the test reports' user_properties.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perfguard.errors import InputError, PerfguardError
from perfguard.jsonfile import now_iso

if TYPE_CHECKING:  # lazy at run time: the plugin loads in every pytest session
    from perfguard.config import Config

_PROPERTY = "perfguard"  # user_properties key carrying a result to the controller
_MODEL_PROPERTY = "perfguard-model"  # ... and a [[model]]'s total (perfguard_check("<model>", target))
_MARKER_KEYS = {"threshold", "simulator"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfguard", "perfguard: performance regressions of compute kernels")
    group.addoption(
        "--perfguard",
        action="store_true",
        help="collect every configured kernel x target as a test that fails on a regression",
    )
    group.addoption(
        "--perfguard-update",
        action="store_true",
        help="rewrite the baselines of the collected kernels instead of failing (implies --perfguard)",
    )
    group.addoption(
        "--perfguard-native",
        action="store_true",
        help="time host-ISA kernels natively with pytest-benchmark's fixture (implies --perfguard)",
    )
    group.addoption(
        "--perfguard-config", metavar="FILE", help="perfguard.toml or pyproject.toml (default: found from the rootdir)"
    )
    group.addoption("--perfguard-targets", metavar="A,B", help="only these targets")
    group.addoption("--perfguard-kernels", metavar="K,..", help="only these kernels")
    group.addoption(
        "--perfguard-base", metavar="REF", help="read baselines from this git revision instead of the working tree"
    )
    group.addoption(
        "--perfguard-report-dir",
        metavar="DIR",
        help="where perfguard.json, index.html and summary.md go (default: the config's report_dir)",
    )


def _enabled(config: pytest.Config) -> bool:
    return any(config.getoption(name) for name in ("perfguard", "perfguard_update", "perfguard_native"))


def _names(value: str | None) -> list[str] | None:
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    return items or None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "perfguard(threshold=None, simulator=None): options for the perfguard_check fixture in this test "
        "(threshold in percent); such tests run only with --perfguard",
    )
    if not _enabled(config):
        for name in (
            "perfguard_targets",
            "perfguard_kernels",
            "perfguard_config",
            "perfguard_base",
            "perfguard_report_dir",
        ):
            if config.getoption(name):
                raise pytest.UsageError(f"--{name.replace('_', '-')} needs --perfguard")
        return
    if config.getoption("perfguard_update") and config.getoption("perfguard_native"):
        raise pytest.UsageError("--perfguard-update and --perfguard-native cannot be combined")
    if config.getoption("perfguard_native") and not config.pluginmanager.hasplugin("benchmark"):
        raise pytest.UsageError("--perfguard-native needs pytest-benchmark (pip install pytest-benchmark)")
    config.pluginmanager.register(PerfguardSession(config), "perfguard-session")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("perfguard") is not None and not _enabled(item.config):
        pytest.skip("perfguard tests run with --perfguard")


@pytest.fixture
def perfguard_check(request: pytest.FixtureRequest):
    """check(kernel, target, threshold=None) -> CaseResult: build, simulate, score, judge one kernel.

    `kernel` is a configured name, a [[model]]'s kernel name ("mlp.matmul_add.2d43f3"), a
    perfguard.config.KernelSpec, or a mapping with the keys of a [[kernel]] table; a [[model]]'s
    own name ("mlp") gives a ModelCaseResult: the model's total and verdict, and every kernel's
    result (`.kernels`, `.kernel(name)`). `@pytest.mark.perfguard(threshold=..., simulator=...)`
    sets defaults. The result says `.verdict`, `.delta_pct`, `.ok` and `.explain()`; nothing
    fails by itself: `assert result.ok, result.explain()`.
    """
    session = request.config.pluginmanager.get_plugin("perfguard-session")
    if session is None:
        pytest.skip("perfguard tests run with --perfguard")
    marker = request.node.get_closest_marker("perfguard")
    options = dict(marker.kwargs) if marker else {}
    unknown = sorted(set(options) - _MARKER_KEYS)
    if unknown or (marker and marker.args):
        raise pytest.UsageError(
            f"{request.node.nodeid}: @pytest.mark.perfguard takes only {', '.join(sorted(_MARKER_KEYS))} as keywords"
        )
    return session.checker(request.node, **options)


class PerfguardFailure(Exception):
    """A regression or an error: shown as its message, without a Python traceback."""


class PerfguardSession:
    """State of one --perfguard run: the case runner, the results seen, the report at the end."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.results: list[Any] = []  # document.report.Result (imported with the first result)
        self.models: list[Any] = []  # document.report.ModelTotal of each perfguard_check("<model>", target)
        self.codes: list[int] = []
        self.updated = 0
        self.targets: dict[str, Any] = {}
        self.report_path: Path | None = None
        self.report: Any = None  # the session's document.report.Report, once written
        self.deselected = 0
        self.orphans: list[Any] = []  # pytest_cases.CaseResult of each orphaned baseline (runs.orphans)
        self._runners: dict[str | None, Any] = {}
        self._seen: dict[tuple[str, str], int] = {}  # (kernel, target) -> its place in results (and codes)
        self._perfguard_config: Config | None = None

    # -- perfguard objects, created on first use --------------------------------------------------
    def perfguard_config(self):
        if self._perfguard_config is None:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.config import load_config

            path = self.config.getoption("perfguard_config")
            here = self.config.invocation_params.dir
            try:
                if path or _find_config_or_none(here) is not None:
                    self._perfguard_config = load_config(Path(path) if path else None, cwd=here)
                else:  # pytest run from outside the project, e.g. `pytest --perfguard proj/`
                    self._perfguard_config = load_config(None, cwd=self.config.rootpath)
            except PerfguardError as exc:
                raise pytest.UsageError(f"perfguard: {exc.message}") from None
        return self._perfguard_config

    def runner(self, simulator: str | None = None):
        if simulator not in self._runners:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.shells.pytest_cases import CaseRunner

            self._runners[simulator] = CaseRunner(
                self.perfguard_config(),
                simulator=simulator,
                update=bool(self.config.getoption("perfguard_update")),
                base=self.config.getoption("perfguard_base"),
            )
        return self._runners[simulator]

    def checker(self, node: pytest.Item, threshold: float | None = None, simulator: str | None = None):
        def check(kernel, target: str, threshold: float | None = threshold):
            result = self.runner(simulator).run(kernel, target, threshold)
            _record(node, result)
            return result

        return check

    # -- collection -------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, so those select perfguard items too
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        try:
            pairs = self.runner().pairs(
                _names(config.getoption("perfguard_kernels")), _names(config.getoption("perfguard_targets"))
            )
        except PerfguardError as exc:
            raise pytest.UsageError(f"perfguard: {exc.message}") from None
        if _files_only(config) and not config.getoption("perfguard_kernels"):
            pairs = []  # `pytest --perfguard tests/test_x.py`: what that file holds, no configured kernel besides
        native = bool(config.getoption("perfguard_native"))
        explicit = set() if native else _explicit_checks(items)  # a test's check times nothing natively
        pairs = [
            (spec, target)
            for spec, target in pairs
            if (spec.name, target) not in explicit and (spec.name, None) not in explicit
        ]
        collector = PerfguardCollector.from_parent(session, name="perfguard", nodeid="perfguard")
        kernel_items = [
            KernelItem.from_parent(
                collector,
                name=f"{spec.name}[{target}]",
                callobj=_native_case if native else _simulated_case,
                spec=spec,
                target=target,
            )
            for spec, target in pairs
        ]

        items.extend(kernel_items)
        collected: list[pytest.Item | pytest.Collector] = list(kernel_items)
        # Report them as collected, as a collector would: the terminal counts items from collect
        # reports, and would otherwise say "collected 0 items" before running them.
        config.hook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))

    def pytest_deselected(self, items) -> None:
        self.deselected += len(items)

    # -- results ----------------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties: list[tuple[str, Any]] = list(report.user_properties)  # ours: JSON objects
        for name, value in properties:
            if name == _PROPERTY and report.when == "call":
                # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
                from perfguard.document.codec import from_json
                from perfguard.document.report import TargetSummary
                from perfguard.document.result import Result

                result = from_json(Result, value["result"], "pytest --perfguard result")
                at = self._seen.get((result.kernel, result.target))
                if at is None:  # one result per kernel x target in a session: a later check replaces it
                    self._seen[(result.kernel, result.target)] = len(self.results)
                    self.results.append(result)
                    self.codes.append(value["exit_code"])
                else:
                    self.results[at], self.codes[at] = result, value["exit_code"]
                self.updated += value["updated"] is not None
                if value["target"]:
                    self.targets[result.target] = from_json(TargetSummary, value["target"], "pytest --perfguard")
            elif name == _MODEL_PROPERTY and report.when == "call":
                # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
                from perfguard.document.codec import from_json
                from perfguard.document.report import ModelTotal

                self.models.append(from_json(ModelTotal, value["total"], "pytest --perfguard model"))
                self.codes.append(value["exit_code"])

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or not self.results:
            return  # an xdist worker: the controller writes the one report
        # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
        from perfguard.document.report import write_report
        from perfguard.judge.merge import assemble, combined_exit_code
        from perfguard.report.pages import write_pages

        config = self.perfguard_config()
        self.orphans = self._orphans()
        for case in self.orphans:
            self.results.append(case.report)
            self.codes.append(case.exit_code)
        if any(not case.ok for case in self.orphans) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a guard lost fails the run, as `check` does
        report = assemble(
            self.results, combined_exit_code(self.codes), now_iso(), str(config.path), self.targets, models=self.models
        )
        report.summary.model_regressions = sum(m.verdict == "regression" for m in self.models)
        folder = self.config.getoption("perfguard_report_dir")
        report_dir = Path(folder) if folder else config.storage.report_dir
        write_report(report, report_dir / "perfguard.json")
        write_pages(report, report_dir)
        self.report_path = report_dir / "perfguard.json"
        self.report = report

    def _orphans(self) -> list[Any]:
        """After the run, the baselines no configured kernel has and no test of this session checked
        (a test's own kernel, perfguard_check with a KernelSpec or a mapping, has a baseline that
        perfguard.toml does not name). None when the run was a selection (-k, -m, --perfguard-kernels):
        a kernel left out of it is not orphaned."""
        option = self.config.getoption
        if (
            self.deselected
            or option("keyword")
            or option("markexpr")
            or option("perfguard_kernels")
            or option("perfguard_native")
        ):  # (under xdist only the workers see what -k deselected)
            return []
        checked = {(r.kernel, r.target) for r in self.results}
        return [
            case
            for case in self.runner().orphans(_names(self.config.getoption("perfguard_targets")))
            if (case.kernel, case.target) not in checked
        ]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.results or hasattr(self.config, "workerinput"):
            return
        # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
        from perfguard.document.verdicts import VERDICTS
        from perfguard.judge.merge import summarize

        summary = summarize(self.results, 0)
        counts = ", ".join(f"{summary.count(name)} {name}" for name in VERDICTS if summary.count(name))
        terminalreporter.write_sep("-", "perfguard")
        if self.report is not None:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.report.failures import failures

            for failure in failures(self.report):  # as every report opens: one line per failing result
                terminalreporter.write_line(f"FAIL {failure.line()}", red=True)
        terminalreporter.write_line(f"{len(self.results)} kernel check(s): {counts}")
        if self.report is not None:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.report.text import machine_lines

            for line in machine_lines(self.report.results):  # what every time above stands for
                terminalreporter.write_line(line)
        if self.models:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.report.model_view import terminal_lines

            for line in terminal_lines(self.models):
                terminalreporter.write_line(line)
        if summary.toolchain_changed:
            # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
            from perfguard.report.text import toolchain_headline

            terminalreporter.write_line(toolchain_headline(summary.toolchain_changed, summary.toolchain))
        if self.updated:
            terminalreporter.write_line(f"rewrote {self.updated} baseline(s)")
        for case in self.orphans:
            terminalreporter.write_line(case.explain(), red=not case.ok)
        if self.report_path is not None:
            terminalreporter.write_line(f"report: {self.report_path}")


def _record(node: pytest.Item, result) -> None:
    """Attach a result to the test report (as JSON data: that is how it reaches the xdist controller);
    a model's: each of its kernels' results, and its total."""
    # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
    from perfguard.document.codec import to_json

    model = getattr(result, "total", None)
    for one in result.kernels if model is not None else [result]:
        updated = one.updated if model is None else (result.updated[0] if result.updated else None)
        node.user_properties.append(
            (
                _PROPERTY,
                {
                    "result": to_json(one.report),
                    "exit_code": one.exit_code,
                    "target": to_json(one.target_summary),
                    "updated": None if updated is None else str(updated),
                },
            )
        )
    if model is not None:
        node.user_properties.append((_MODEL_PROPERTY, {"total": to_json(model), "exit_code": result.exit_code}))


def _files_only(config: pytest.Config) -> bool:
    """The command line names test files or tests (`pytest --perfguard tests/test_x.py`,
    `test_x.py::test_y`), not a folder: the session is what they hold."""
    if config.args_source != pytest.Config.ArgsSource.ARGS or not config.args:
        return False
    here = config.invocation_params.dir
    return all((here / arg.split("::")[0]).is_file() for arg in config.args)


def _explicit_checks(items: list[pytest.Item]) -> set[tuple[str, str | None]]:
    """(kernel, target) of every `perfguard_check("kernel", "target")` call with literal names in
    the collected tests' code; target None when it is not a literal (every target of the kernel).
    Such a test is the kernel's check: its auto-collected item is not added beside it."""
    found: set[tuple[str, str | None]] = set()
    functions = {
        getattr(item, "function", None) for item in items if "perfguard_check" in getattr(item, "fixturenames", ())
    }
    for function in functions:
        if function is None:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError):
            continue  # no source to read: its checks are not known before it runs
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "perfguard_check"
            ):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            kernel, target = (
                node.args[i] if len(node.args) > i else keywords.get(name)
                for i, name in enumerate(("kernel", "target"))
            )
            if isinstance(kernel, ast.Constant) and isinstance(kernel.value, str):
                literal = target.value if isinstance(target, ast.Constant) and isinstance(target.value, str) else None
                found.add((kernel.value, literal))
    return found


def _find_config_or_none(start: Path):
    # lazy: pytest loads this plugin in every session; the rest of perfguard only with --perfguard
    from perfguard.config import find_config

    try:
        return find_config(start)
    except InputError:
        return None


class PerfguardCollector(pytest.Collector):
    """The virtual parent of the kernel items: node id 'perfguard'."""

    def collect(self):
        return []


def _simulated_case() -> None:
    """Placeholder callable: KernelItem.runtest does the work (it has no fixtures)."""


def _native_case(benchmark) -> None:
    """Placeholder callable whose signature requests pytest-benchmark's fixture."""


class KernelItem(pytest.Function):
    """perfguard::<kernel>[<target>]: fails on a regression (or an error) with the delta and stats."""

    def __init__(self, *, spec, target: str, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec
        self.target = target

    @property
    def session_state(self) -> PerfguardSession:
        plugin = self.config.pluginmanager.get_plugin("perfguard-session")
        assert plugin is not None  # registered by pytest_configure under --perfguard
        return plugin

    def setup(self) -> None:
        if "benchmark" in self.fixturenames:
            profile = self.session_state.perfguard_config().profile(self.target)
            if not profile.native():
                pytest.skip(f"{self.target} is not this machine's ISA: cannot time it natively")
        super().setup()

    def runtest(self) -> None:
        runner = self.session_state.runner()
        try:
            if "benchmark" in self.fixturenames:
                case = runner.native(self.spec, self.target)
                benchmark: Any = self.funcargs["benchmark"]  # pytest-benchmark's fixture
                benchmark.extra_info.update(case.extra_info)
                benchmark(case.call)
                return
            result = runner.run(self.spec, self.target)
        except PerfguardError as exc:
            raise PerfguardFailure(f"{self.name}: error: {exc.message}") from None
        _record(self, result)
        if not result.ok:
            raise PerfguardFailure(result.explain())

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, PerfguardFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        path = self.session_state.perfguard_config().path
        return path, None, f"perfguard::{self.name}"
