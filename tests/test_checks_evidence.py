"""The tail probabilities behind outlier_check's status, against closed forms and brute force."""

from __future__ import annotations

import math

import pytest

from dq_agent.checks.evidence import (
    ROBUST_T_SCALE,
    group_p_value,
    max_tail,
    t_tail,
    z_tail,
)
from dq_agent.result import binomial_sf


@pytest.mark.parametrize("t", [0.0, 0.5, 1.0, 3.0, 10.0, 100.0])
def test_t_tail_with_two_degrees_of_freedom_matches_its_closed_form(t: float) -> None:
    assert t_tail(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9, abs=1e-15)


def test_t_tail_with_ten_degrees_of_freedom_at_known_quantiles() -> None:
    assert t_tail(2.228138852) == pytest.approx(0.05, rel=1e-6)  # the 97.5% point
    assert t_tail(3.169272667) == pytest.approx(0.01, rel=1e-6)  # the 99.5% point
    # Far out the tail is computed directly, not as 1 - cdf: still positive and falling.
    assert 0 < t_tail(1e4) < t_tail(1e3) < 1e-20


@pytest.mark.parametrize(
    ("k", "n", "p"), [(1, 10, 0.1), (3, 10, 0.1), (5, 100, 0.01), (2, 57, 0.01)]
)
def test_binomial_tail_matches_the_sum_of_terms(k: int, n: int, p: float) -> None:
    exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
    if k <= n * p:
        assert binomial_sf(k, n, p) == 1.0  # no evidence either way at or below the mean
    else:
        assert binomial_sf(k, n, p) == pytest.approx(exact, rel=1e-9)


def test_an_uncertain_spread_makes_far_values_less_surprising() -> None:
    known = z_tail(8.0, ROBUST_T_SCALE)
    assert z_tail(8.0, ROBUST_T_SCALE, 1000.0) == pytest.approx(known, rel=0.05)
    assert z_tail(8.0, ROBUST_T_SCALE, 10.0) > 10 * known
    assert max_tail(100, 8.0, ROBUST_T_SCALE) == pytest.approx(
        -math.expm1(100 * math.log1p(-known))
    )


@pytest.mark.parametrize(
    ("n", "flagged", "largest", "rho", "local"),
    [
        (40, 2, 15.7, 0.0, None),
        (1440, 1, 6.1, 0.95, 78.0),
        (200, 12, 4.0, 0.0, 3.0),
        (30, 1, 3.2, 0.5, None),
    ],
)
def test_the_screen_never_changes_the_decision(
    n: int, flagged: int, largest: float, rho: float, local: float | None
) -> None:
    threshold = 1e-4
    exact = group_p_value(n, flagged, largest, 3.0, True, rho, None, 0, local)
    screened = group_p_value(n, flagged, largest, 3.0, True, rho, None, 0, local, threshold)
    assert (exact <= threshold) == (screened <= threshold)


def test_a_slow_process_needs_more_outliers_to_be_evidence() -> None:
    independent = group_p_value(1000, 35, 4.0, 3.0, True, rho=0.0)
    slow = group_p_value(1000, 35, 4.0, 3.0, True, rho=0.9)
    assert independent < 1e-4 < slow


def test_a_count_allows_for_a_spread_that_came_out_small() -> None:
    """9 of 50 values beyond 3 robust sigmas: with the spread known, about 1e-8 (a binomial of
    a 1% rate); with a MAD from those 50 values, about 1e-3, since a MAD 30% small happens one
    group in a few hundred and then flags many values at once (an iid t(10) sweep of 600
    groups of 50 gave up to 7). Far beyond, the count stays evidence."""
    from dq_agent.checks.evidence import ROBUST_T_SCALE, count_tail

    cut = ((3.0 * ROBUST_T_SCALE, 1),)
    known = count_tail(9, 50, cut)
    estimated = count_tail(9, 50, cut, information=0.37 * 50)
    assert known < 1e-7
    assert 1e-4 < estimated < 1e-2
    assert count_tail(25, 50, cut, information=0.37 * 50) < 1e-7
