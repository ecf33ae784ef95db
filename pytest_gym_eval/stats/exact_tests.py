"""Exact tests on counts of binary outcomes (standard library only): McNemar's test of paired outcomes and Fisher's
one-sided test of a 2x2 table."""

from __future__ import annotations

import math


def mcnemar_exact(worse: int, better: int) -> float:
    """Two-sided p-value of McNemar's exact test (McNemar 1947, "Note on the sampling error of the difference
    between correlated proportions or percentages", Psychometrika 12(2); the exact form is the binomial test of
    the discordant pairs): ``worse`` paired units went from pass to fail, ``better`` from fail to pass; under no
    change each discordant pair is equally likely to go either way, so p = min(1, 2 P(X <= min(worse, better)))
    with X ~ Binomial(worse + better, 1/2). No discordant pair gives 1.0. Raises ValueError for a negative count.
    """
    if worse < 0 or better < 0:
        raise ValueError(f"counts must be >= 0, got {worse} and {better}")
    n = worse + better
    if n == 0:
        return 1.0
    tail = math.fsum(math.comb(n, i) for i in range(min(worse, better) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def fisher_exact_less(before: tuple[int, int], after: tuple[int, int]) -> float:
    """One-sided p-value of Fisher's exact test that the pass probability ``after`` is lower than ``before``, each
    ``(passed, trials)``: conditional on the total passes, the passes after follow the hypergeometric law, and p =
    P(X <= passes after) (R. A. Fisher, *Statistical Methods for Research Workers*, 1934, §21.02; scipy's
    ``fisher_exact(..., alternative="less")`` on the table ``[[after passes, after fails], [before passes, before
    fails]]``). The other direction is ``fisher_exact_less(after, before)``. Raises ValueError for a count outside
    ``0 <= passed <= trials``."""
    (a, na), (b, nb) = before, after
    if not (0 <= a <= na and 0 <= b <= nb):
        raise ValueError(f"need 0 <= passed <= trials, got {before} and {after}")
    total, passes = na + nb, a + b
    if total == 0:
        return 1.0
    lowest = max(0, nb - (total - passes))
    tail = sum(math.comb(passes, x) * math.comb(total - passes, nb - x) for x in range(lowest, b + 1))
    return min(1.0, tail / math.comb(total, nb))
