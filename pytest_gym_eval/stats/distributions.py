"""Distribution functions the intervals and tests need (standard library only): the regularised incomplete beta
function, Student's t distribution and the Beta distribution's quantile."""

from __future__ import annotations

import math
from statistics import NormalDist

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITERATIONS = 10_000
# Above this many degrees of freedom t is replaced by the normal: |t - z| <= (z³ + z) / (4 df) < 1e-6
# (Abramowitz & Stegun 26.7.5), while the incomplete beta loses digits for such huge df/2.
_NORMAL_DF = 1e9


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    # Continued fraction of I_x(a, b) by the modified Lentz method (Numerical Recipes 3rd ed. §6.4, betacf).
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITERATIONS + 1):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def _log_gamma_ratio(a: float, b: float) -> float:
    """ln Γ(a+b) - ln Γ(a) - ln Γ(b); for a huge argument by Stirling's series (DLMF 5.11.1) in a form
    that avoids cancelling two lgamma values near 1e10 (keeps t tails accurate for very large df)."""
    big, small = max(a, b), min(a, b)
    if big < 1e6:
        return math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    total = big + small
    return (
        (big - 0.5) * math.log1p(small / big)
        + small * math.log(total)
        - small
        + (1.0 / total - 1.0 / big) / 12.0
        - math.lgamma(small)
    )


def regularized_beta(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b) with ``y = 1 - x`` passed separately to keep precision (DLMF 8.17.22, NR §6.4)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_x = math.log(x) if x <= 0.5 else math.log1p(-y)
    log_y = math.log(y) if y <= 0.5 else math.log1p(-x)
    front = math.exp(_log_gamma_ratio(a, b) + a * log_x + b * log_y)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, y) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: ½·I_{df/(df+t²)}(df/2, ½) (DLMF 8.17, Abramowitz & Stegun 26.7.1)."""
    if df > _NORMAL_DF:
        return NormalDist().cdf(-t)
    t2 = t * t
    return 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def _check_df(df: float) -> None:
    if not df > 0.0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")


def student_t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` > 0 degrees of freedom; x may be ±inf.

    P(T > |x|) = ½·I_{df/(df+x²)}(df/2, ½) from the regularised incomplete beta function (DLMF 8.17,
    Numerical Recipes §6.4); df > 1e9 (including ``math.inf``) uses the normal. Raises ValueError for
    df <= 0 or NaN x.
    """
    _check_df(df)
    if math.isnan(x):
        raise ValueError("x must not be NaN")
    tail = t_upper_tail(abs(x), df)
    return 1.0 - tail if x >= 0.0 else tail


def student_t_ppf(p: float, df: float) -> float:
    """Quantile ``t`` with P(T <= t) = p of Student's t with ``df`` > 0 degrees of freedom.

    Inverts :func:`student_t_cdf` by doubling a bracket and bisecting on the tail probability min(p, 1-p)
    (no cancellation near p = 1); accurate to ~1e-9 relative for df >= 1, far inside the 1e-6 needed.
    Raises ValueError when p is outside (0, 1) or df <= 0 (or is NaN).
    """
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")
    if p == 0.5:
        return 0.0
    if df > _NORMAL_DF:
        return NormalDist().inv_cdf(p)
    q = min(p, 1.0 - p)  # exact in binary floating point for p in [0.5, 1)
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > q:
        low, high = high, 2.0 * high
    for _ in range(200):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        if t_upper_tail(mid, df) > q:
            low = mid
        else:
            high = mid
    t = 0.5 * (low + high)
    return t if p > 0.5 else -t


def beta_ppf(p: float, a: float, b: float) -> float:
    """Quantile ``x`` with I_x(a, b) = p of the Beta(a, b) distribution (a, b > 0, any real; p in (0, 1)), by
    bisection on the regularised incomplete beta function (DLMF 8.17) to the last bit of x. Raises ValueError for
    p outside (0, 1) or a, b <= 0."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")
    if not (a > 0.0 and b > 0.0):
        raise ValueError(f"need a, b > 0, got a={a!r}, b={b!r}")
    low, high = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        if regularized_beta(a, b, mid, 1.0 - mid) < p:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)
