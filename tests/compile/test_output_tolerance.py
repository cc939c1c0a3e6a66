"""The output check's rule at its edges, on hand-made outputs (no build, no simulation):

    |kernel - reference| <= rtol * |reference| + atol   everywhere, else a wrong result

an error exactly at the tolerance passes, the next representable value above it fails; an
all-zero reference, a non-finite value on either side and a shape mismatch each get their own
answer. The same rule on real kernels is in test_output_check.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfguard.config import KernelSpec
from perfguard.errors import InputError, WrongResult
from perfguard.job.verify import DEFAULT_TOL, check_output, tolerances

WHERE = "kernel 'k' on x86_64"


def spec(rtol: float | None = None, atol: float | None = None) -> KernelSpec:
    return KernelSpec("k", "mykernels.ops:k", None, {}, rtol=rtol, atol=atol)


def check(got, want, dtype: str = "float32", rtol: float | None = None, atol: float | None = None) -> float:
    return check_output(spec(rtol, atol), "B", dtype, np.asarray(got), np.asarray(want), WHERE)


def up(x, dtype=np.float64):
    return np.nextafter(dtype(x), dtype(np.inf), dtype=dtype)


def down(x, dtype=np.float64):
    return np.nextafter(dtype(x), dtype(-np.inf), dtype=dtype)


# -- the tolerances themselves ---------------------------------------------------------------------


def test_default_tolerances_per_dtype():
    want = np.array([0.5, -4.0, 2.0])  # largest magnitude 4: atol scales with it
    assert tolerances(spec(), "float32", want) == (1e-5, 1e-5 * 4.0)
    assert tolerances(spec(), "float64", want) == (1e-12, 1e-12 * 4.0)
    assert tolerances(spec(), "float16", want) == (2e-2, 2e-2 * 4.0)
    assert tolerances(spec(), "int32", want) == (0.0, 0.0)  # integers: exact
    assert tolerances(spec(), "uint8", want) == (0.0, 0.0)
    assert DEFAULT_TOL == {"float32": 1e-5, "float64": 1e-12, "float16": 2e-2}


def test_a_kernels_own_tolerances_replace_the_defaults_each_on_its_own():
    want = np.array([0.5, -4.0, 2.0])
    assert tolerances(spec(rtol=1e-3), "float32", want) == (1e-3, 1e-5 * 4.0)
    assert tolerances(spec(atol=0.25), "float32", want) == (1e-5, 0.25)
    assert tolerances(spec(rtol=0.0, atol=0.0), "float32", want) == (0.0, 0.0)


def test_an_all_zero_or_empty_reference_gets_the_default_as_absolute_tolerance():
    # atol = default x max|reference|, and x 1 when the reference is all zeros (not 0: that would
    # demand bit-exact zeros of a float kernel)
    assert tolerances(spec(), "float32", np.zeros(5)) == (1e-5, 1e-5)
    assert tolerances(spec(), "float64", np.zeros((2, 3))) == (1e-12, 1e-12)
    assert tolerances(spec(), "float32", np.zeros(0)) == (1e-5, 1e-5)


# -- at, just under, just over ----------------------------------------------------------------------

# rtol 2^-10, atol 2^-12, reference 1: the bound 2^-10 + 2^-12 is exact in float32 and float64
RTOL, ATOL = 2.0**-10, 2.0**-12
BOUND = RTOL * 1.0 + ATOL


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_error_exactly_at_the_tolerance_passes_and_the_next_value_up_fails(dtype):
    at = dtype(1.0 + BOUND)
    assert check([at], [1.0], "float32", RTOL, ATOL) == BOUND
    assert check([down(at, dtype)], [1.0], "float32", RTOL, ATOL) < BOUND
    with pytest.raises(WrongResult) as info:
        check([up(at, dtype)], [1.0], "float32", RTOL, ATOL)
    assert "wrong result: output 'B'[0]" in info.value.message and "1 of 1 elements off" in info.value.message
    # the same on the other side of the reference
    assert check([dtype(1.0 - BOUND)], [1.0], "float32", RTOL, ATOL) == BOUND
    with pytest.raises(WrongResult, match="wrong result"):
        check([down(dtype(1.0 - BOUND), dtype)], [1.0], "float32", RTOL, ATOL)


def test_rtol_scales_with_each_elements_reference_and_atol_does_not():
    # reference 4: bound 4 x 2^-10 + 2^-12; reference 0.25: bound 0.25 x 2^-10 + 2^-12
    want = [4.0, 0.25]
    big, small = 4.0 * RTOL + ATOL, 0.25 * RTOL + ATOL
    assert check([4.0 + big, 0.25 + small], want, "float64", RTOL, ATOL) == big
    with pytest.raises(WrongResult) as info:  # the small element may not borrow the big one's allowance
        check([4.0 + big, up(0.25 + small)], want, "float64", RTOL, ATOL)
    assert (
        "output 'B'[1] = " in info.value.message
    )  # the element off is named (not [0], whose larger difference passes) ...
    assert "(1 of 2 elements off; rtol 0.000977, atol 0.000244)" in info.value.message  # ... and the count off


def test_the_default_float32_tolerance_at_its_edge_in_float32_outputs():
    """Reference [0.5, -4, 2]: element 0 may be off by 1e-5 x 0.5 + 1e-5 x 4 = 4.5e-5. The largest
    float32 within that passes, the next float32 fails."""
    want = np.array([0.5, -4.0, 2.0], dtype=np.float32)
    bound = 1e-5 * 0.5 + 1e-5 * 4.0
    inside = np.float32(0.5 + bound)
    while float(inside) - 0.5 > bound:
        inside = down(inside, np.float32)
    while float(up(inside, np.float32)) - 0.5 <= bound:
        inside = up(inside, np.float32)
    assert float(inside) - 0.5 <= bound < float(up(inside, np.float32)) - 0.5
    got = want.copy()
    got[0] = inside
    assert check(got, want) == float(inside) - 0.5
    got[0] = up(inside, np.float32)
    with pytest.raises(WrongResult) as info:
        check(got, want)
    assert "(1 of 3 elements off; rtol 1e-05, atol 4e-05)" in info.value.message


def test_an_all_zero_reference_accepts_the_default_and_no_more():
    assert check([0.0, 1e-12, -1e-12], [0.0, 0.0, 0.0], "float64") == 1e-12
    with pytest.raises(WrongResult) as info:
        check([0.0, up(1e-12)], [0.0, 0.0], "float64")
    assert (
        "output 'B'[1] = 1e-12, expected 0: off by 1e-12, 1x the tolerance 1e-12 (1 of 2 elements off; rtol 1e-12, atol 1e-12)"
        in info.value.message
    )


def test_integer_outputs_are_exact():
    assert check(np.array([3, -7], np.int32), np.array([3, -7], np.int32), "int32") == 0.0
    with pytest.raises(WrongResult) as info:
        check(np.array([3, -6], np.int32), np.array([3, -7], np.int32), "int32")
    assert (
        "output 'B'[1] = -6, expected -7: off by 1 (tolerance 0: exact) (1 of 2 elements off; rtol 0, atol 0)"
        in info.value.message
    )


def test_the_index_of_a_multi_dimensional_output_is_plain_numbers():
    want = np.zeros((2, 3))
    got = want.copy()
    got[1, 2] = 0.5
    with pytest.raises(WrongResult) as info:
        check(got, want, "float64")
    assert "output 'B'[1, 2] = 0.5, expected 0" in info.value.message


# -- non-finite values and shapes -------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_kernel_output_is_a_wrong_result(bad):
    with pytest.raises(WrongResult) as info:
        check([1.0, bad], [1.0, 2.0], "float32", 1.0, 1.0)  # whatever the tolerance
    assert info.value.message == (
        f"{WHERE}: wrong result: output 'B'[1] = {bad:.6g}, expected 2: not a finite number "
        f"(1 of 2 elements off; rtol 1, atol 1)"
    )
    assert info.value.mismatch["value"] is None and info.value.mismatch["index"] == [1]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_reference_is_the_references_fault_not_a_pass(bad):
    # NaN compares false with everything, and an infinite reference made atol infinite: either let
    # any kernel output pass
    for got in ([1.0, 2.0], [1.0, 123.0]):
        with pytest.raises(InputError) as info:
            check(got, [1.0, bad], "float32")
        assert info.value.message == f"{WHERE}: reference output 'B' has a non-finite value at [1]: {bad}"


@pytest.mark.parametrize("got, want", [((4,), (2, 2)), ((3,), (3, 1)), ((3, 1), (3,)), ((0,), (1,))])
def test_a_reference_of_another_shape_is_an_input_error_never_broadcast(got, want):
    with pytest.raises(InputError) as info:
        check(np.zeros(got), np.zeros(want), "float64", 1.0, 1.0)
    assert info.value.message == f"{WHERE}: reference output 'B' has shape {want}, kernel {got}"
    assert info.value.exit_code == 2
