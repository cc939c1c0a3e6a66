"""The model view's terminal lines for a model with more kernels than it lists."""

from __future__ import annotations

from perfguard.guard.models import total
from perfguard.guard.report import ModelKernel
from perfguard.report.model_view import TOP_KERNELS, terminal_lines


def test_a_model_with_more_kernels_than_shown_names_how_many_more():
    n = TOP_KERNELS + 3
    rows = [ModelKernel(f"m.op.{i:06x}", "op", "unchanged", 1, 1, 1e-6 * (i + 1), 1e-6 * (i + 1),
                        current_total_s=1e-6 * (i + 1), baseline_total_s=1e-6 * (i + 1)) for i in range(n)]
    view = total("m", "x86_64", 1.0, rows)
    lines = terminal_lines([view])
    assert view.verdict == "unchanged" and view.current_total_s == sum(1e-6 * (i + 1) for i in range(n))
    assert lines[1].split()[2] == f"m.op.{n - 1:06x}"  # largest share first
    assert f"  ... 3 more kernel(s) in perfguard.json" in lines
