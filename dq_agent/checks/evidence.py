"""How surprising a count or an extreme value is for clean data: the tail probabilities behind
"a status means the data deviates beyond chance".

The null model is a Student t distribution with 10 degrees of freedom: real sensors have mildly
heavier tails than a normal distribution, and a rule calibrated on the normal alone would call
every long clean series an outlier. A z of c (in units of the estimated standard deviation) is
compared with the t value of the same rank: `c * ROBUST_T_SCALE` when the spread was the MAD
scaled to sigma, `c * STD_T_SCALE` when it was the sample standard deviation.

Pure Python over a handful of numbers per tested group; no dependency for two closed forms.
"""

from __future__ import annotations

import functools
import math

from dq_agent.result import binomial_sf

NULL_DEGREES_OF_FREEDOM = 10
NULL_MODEL = f"student_t_{NULL_DEGREES_OF_FREEDOM}"
# The MAD of a normal sample is 0.6745 of its standard deviation.
NORMAL_MAD = 0.6744897501960817
# The MAD of a normal sample times this estimates its standard deviation.
MAD_TO_SIGMA = 1 / NORMAL_MAD


def t_tail(t: float, df: int = NULL_DEGREES_OF_FREEDOM) -> float:
    """P(|T| > t) for a Student t with an even number of degrees of freedom.

    With c = cos(atan(t / sqrt(df))) the closed form is sin * sum_{j < df/2} a_j c^2j with
    a_j = (2j - 1)!! / (2j)!!, and since the full series sums to 1 / sin, the tail is the rest of
    it: computed directly for large t, where 1 - cdf would lose every digit to cancellation.
    """
    if df % 2 or df <= 0:
        raise ValueError("t_tail needs an even, positive number of degrees of freedom")
    t = abs(t)
    if math.isinf(t):
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    coefficient, power, head = 1.0, 1.0, 0.0
    for j in range(df // 2):
        if j:
            coefficient *= (2 * j - 1) / (2 * j)
            power *= cos2
        head += coefficient * power
    if cos2 > 0.5:
        return max(0.0, 1.0 - sin * head)
    tail, j = 0.0, df // 2
    coefficient *= (2 * j - 1) / (2 * j)
    power *= cos2
    while True:
        term = coefficient * power
        tail += term
        if term < 1e-17 * tail or term == 0.0:
            break
        j += 1
        coefficient *= (2 * j - 1) / (2 * j)
        power *= cos2
    return sin * tail


@functools.cache
def _quantile_of_tail(target: float, df: int = NULL_DEGREES_OF_FREEDOM) -> float:
    low, high = 0.0, 1000.0
    for _ in range(200):
        middle = (low + high) / 2
        if t_tail(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


# The null's own MAD-based sigma and standard deviation, in t units: a robust z of c is a t of
# c * ROBUST_T_SCALE (about 1.04), a classical z of c a t of c * STD_T_SCALE (about 1.12).
ROBUST_T_SCALE = _quantile_of_tail(0.5) / NORMAL_MAD
STD_T_SCALE = math.sqrt(NULL_DEGREES_OF_FREEDOM / (NULL_DEGREES_OF_FREEDOM - 2))


# The MAD estimates a spread about as well as 37% as many values would with the standard
# deviation (its asymptotic efficiency for normal data).
MAD_EFFICIENCY = 0.37
# Beyond this many values' worth of information the spread counts as known.
_KNOWN_SPREAD = 5000.0
_GRID = 120


def _spread_ratio_grid(information: float) -> tuple[tuple[float, float], ...]:
    """Points and weights for the ratio of an estimated spread to the true one, estimated with
    `information` degrees of freedom (a chi distribution, sqrt(chi2_k / k)), on a log grid."""
    k = information
    log_norm = math.log(2.0) + (k / 2) * math.log(k / 2) - math.lgamma(k / 2)
    # The ratio's log spreads about 1/sqrt(2k): the grid covers 16 of those below (the heavy
    # side for the tail) and 8 above, within 1e-4 .. 10.
    width = math.sqrt(1 / (2 * k))
    low, high = max(math.log(1e-4), -16 * width), min(math.log(10.0), 8 * width)
    step = (high - low) / _GRID
    points = []
    for i in range(_GRID + 1):
        ratio = math.exp(low + i * step)
        # density of the ratio times d(ratio)/d(log ratio) = ratio
        log_density = log_norm + (k - 1) * math.log(ratio) - k * ratio * ratio / 2
        weight = math.exp(log_density) * ratio * step * (0.5 if i in (0, _GRID) else 1.0)
        points.append((ratio, weight))
    total = sum(w for _, w in points)
    return tuple((r, w / total) for r, w in points)


_GRIDS: dict[float, tuple[tuple[float, float], ...]] = {}


def z_tail(z: float, t_scale: float, information: float = math.inf) -> float:
    """P(|Z| > z) under the null, for a z standardised with the spread `t_scale` names, when
    that spread was estimated with `information` degrees of freedom (0.37 per value for a MAD,
    fewer for a slowly moving series; infinite when known). A spread from ten readings may be
    half the true one, so only a far larger deviation counts as evidence."""
    if information >= _KNOWN_SPREAD:
        return t_tail(z * t_scale)
    return _mixed_tail(round(z * t_scale, 4), round(max(information, 0.5), 1))


@functools.lru_cache(maxsize=65_536)
def _mixed_tail(t: float, information: float) -> float:
    grid = _GRIDS.get(information)
    if grid is None:
        grid = _GRIDS[information] = _spread_ratio_grid(information)
    return min(1.0, sum(w * t_tail(t * r) for r, w in grid))


def count_tail(
    k: int, n: int, cuts: tuple[tuple[float, int], ...], information: float = math.inf
) -> float:
    """P(at least k of n clean values are flagged) when a value is flagged beyond any of the
    `cuts` (t value, how many such tests), with a spread estimated with `information` degrees
    of freedom. The values share that one estimate: a spread that came out small flags many of
    them at once, so the count is a binomial mixed over the spread's error, not a binomial of
    the mixed rate (which would take 9 of 50 beyond 3 sigmas for evidence, when a MAD from 50
    values that came out 30% small gives that about once in a few thousand groups)."""
    if k <= 0:
        return 1.0
    if information >= _KNOWN_SPREAD:
        return binomial_sf(k, n, min(1.0, sum(m * t_tail(t) for t, m in cuts)))
    key = tuple((round(t, 4), m) for t, m in cuts)
    return _mixed_count(k, n, key, round(max(information, 0.5), 1))


@functools.lru_cache(maxsize=65_536)
def _mixed_count(k: int, n: int, cuts: tuple[tuple[float, int], ...], information: float) -> float:
    grid = _GRIDS.get(information)
    if grid is None:
        grid = _GRIDS[information] = _spread_ratio_grid(information)
    total = 0.0
    for r, w in grid:
        rate = min(1.0, sum(m * t_tail(t * r) for t, m in cuts))
        total += w * binomial_sf(k, n, rate)
    return min(1.0, total)


def max_tail(n: int, largest_z: float, t_scale: float, information: float = math.inf) -> float:
    """P(the largest |z| of n clean values reaches `largest_z`): a bound (the values share one
    estimated spread, so they are not independent), exact for a known spread."""
    if n <= 0:
        return 1.0
    if information < _KNOWN_SPREAD:
        # Cheap screen: with a known spread the chance is smaller; if even that is large, done.
        known = -math.expm1(n * math.log1p(-min(t_tail(largest_z * t_scale), 1 - 1e-16)))
        if known > 0.5:
            return known
    single = z_tail(largest_z, t_scale, information)
    if single >= 1.0:
        return 1.0
    return -math.expm1(n * math.log1p(-single))


# The second count's threshold, as a multiple of the rule's sigma (5 for the default 3).
FAR = 5 / 3
TESTS_PER_GROUP = 3


# The largest lag-1 autocorrelation a group's count of outliers is judged with
# (`group_p_value`'s rho). A process that moves by one step of its resolution every few
# hundred readings (a pressure read every second in tenths of a bar, wandering over the hours)
# has neighbours almost always equal: its estimate reaches 1. At 0.99 such a group still
# counted as 108 independent values in 21,600, and one slow wander below its median (3,162
# readings, |z| at most 4.2) came out "beyond chance" (2e-07) on clean data; at 0.999 it is 11.
MAX_RHO = 0.999
# The largest the spread's information is shrunk by (`group_p_value`): the spread of a slow
# process holds less information than as many independent values, but shrunk as far as the
# count, a reading 11 spreads out (NAB's machine cooling to 2 degrees in a labelled system
# failure) passed as chance.
SPREAD_MAX_RHO = 0.99


def group_p_value(
    n: int,
    flagged: int,
    largest_z: float,
    sigma: float,
    robust: bool,
    rho: float = 0.0,
    spread_values: float | None = None,
    far_flagged: int = 0,
    largest_local_z: float | None = None,
    threshold: float | None = None,
) -> float:
    """The smallest of three tail probabilities for one group: as many values beyond `sigma` as
    `flagged` (many moderate outliers), as many beyond `FAR * sigma` as `far_flagged` (a handful
    of clear ones, which the heavy-tailed null would let hide among the moderate count), and a
    value as far out as `largest_z` (one spike). The caller counts `TESTS_PER_GROUP` tests per
    group when it controls for the number of tests. `largest_local_z` is the largest deviation
    of a flagged value from its neighbours' median (in the null's units): a spike on a daily
    cycle is far from its neighbours though not from the series' centre. The spike test then
    takes the larger of the two and counts twice (either could have been the large one).

    `rho` is the lag-1 autocorrelation of the group's readings: outliers of a slowly moving
    process come in runs, so the count is judged on the effective number of independent values,
    n (1 - rho) / (1 + rho), and the flagged count shrunk alike. `spread_values` is how many
    values the spread came from (default n): its information is 0.37 per value, less for
    autocorrelated values.

    With a `threshold`, each chance is first worked out as if the spread were known (smaller,
    and cheap); only those at or below the threshold are worked out exactly.
    """
    share = 1.0 if rho <= 0 else max((1 - rho) / (1 + rho), 1 / max(n, 1))
    effective_n = max(1, round(n * share))
    effective_k = max(1, math.ceil(flagged * share)) if flagged else 0
    effective_far = max(1, math.ceil(far_flagged * share)) if far_flagged else 0
    # A spread from autocorrelated values holds less information: (1 - rho^2) / (1 + rho^2).
    spread_rho = min(rho, SPREAD_MAX_RHO)
    spread_share = (
        1.0 if spread_rho <= 0 else max((1 - spread_rho**2) / (1 + spread_rho**2), 1 / max(n, 1))
    )
    values = n if spread_values is None else spread_values
    information = MAD_EFFICIENCY * values * spread_share
    scale = ROBUST_T_SCALE if robust else STD_T_SCALE
    # With neighbours a value is also flagged beyond FAR * sigma from their median: the union.
    both = 1 if largest_local_z is None else 2

    near, beyond = sigma * scale, FAR * sigma * scale

    def count(info: float) -> float:
        return count_tail(effective_k, effective_n, ((near, 1), (beyond, both - 1)), info)

    def far(info: float) -> float:
        return count_tail(effective_far, effective_n, ((beyond, both),), info)

    def spike(info: float) -> float:
        # Either the level or the neighbours' test could have been the large one: twice.
        return both * max_tail(n, largest_z, scale, info)

    def local(info: float) -> float:
        return 2 * max_tail(n, largest_local_z or 0.0, ROBUST_T_SCALE, info)

    # Deviations from the neighbours barely move together however slow the process is, so
    # their spread counts every value.
    tests = [(count, information), (far, information), (spike, information)]
    if largest_local_z is not None:
        tests.append((local, MAD_EFFICIENCY * values))
    chances = []
    for test, info in tests:
        if threshold is not None:
            # As if the spread were known: a smaller chance, and cheap. If even that is above
            # the threshold, this test finds nothing and its exact chance does not matter.
            screen = test(math.inf)
            if screen > threshold:
                chances.append(screen)
                continue
        chances.append(test(info))
    return min(1.0, *chances)
