"""The judge's share of the reward's variance (pytest_gym_eval.stats.judge_noise): hand-worked values, the edge
cases, the interval of the judge's share of the mean reward interval's variance without normal errors (its level on
0/1 judges at a skewed margin), and a cross-check of the mean squares, the F quantiles and the bounds against
scipy."""

from __future__ import annotations

import math
import random

import pytest

from pytest_gym_eval.stats.intervals import clustered_proportion_interval
from pytest_gym_eval.stats.judge_noise import dominance, f_cdf, f_ppf, interval_share_bounds, judge_noise

# One task per answer: answer A judged 1, 0, 1; B 0, 0; C 1 (worked by hand in judge_noise's docstring).
HAND = [[[1.0, 0.0, 1.0]], [[0.0, 0.0]], [[1.0]]]


def test_the_hand_worked_split() -> None:
    noise = judge_noise(HAND)
    assert noise is not None
    # N = 6, g = 3, grand mean 1/2; SSB = 3 (1/6)² + 2 (1/2)² + (1/2)² = 5/6, SSW = 2/3.
    assert noise.judge_variance == pytest.approx(2 / 9)  # MSW = (2/3) / 3
    # n0 = (6 - 14/6) / 2 = 11/6; (MSB - MSW) / n0 = (5/12 - 2/9) / (11/6) = 7/66
    assert noise.answer_variance == pytest.approx(7 / 66)
    assert noise.judge_share == pytest.approx(44 / 65)  # (2/9) / (7/66 + 2/9)
    assert (noise.tasks, noise.answers, noise.judgments, noise.repeated, noise.rejudged) == (3, 3, 6, 2, 5)
    assert noise.agreement == pytest.approx(2 / 4)  # A: 1 of 3 pairs agrees, B: its one pair
    # SE² (CR1 over the 3 tasks) = 3/2 · (0.5² + 1² + 0.5²) / 36 = 1/16; (MSW / N) / SE² = (1/27) / (1/16)
    assert noise.interval_share == pytest.approx(16 / 27)
    assert noise.share_low <= noise.judge_share <= noise.share_high
    assert noise.interval_low is not None and noise.interval_high is not None
    assert noise.interval_low <= noise.interval_share <= noise.interval_high
    assert noise.dominated_by == "neither"  # 3 answers tell nothing for sure


def test_one_answer_a_task_makes_the_interval_share_msw_over_msb() -> None:
    """Equal repeats of one answer a task: the mean reward interval's variance is MSB / N, so the judge's share of
    it is MSW / MSB exactly (1 - ICC(1, k))."""
    rewards = [[[1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0]], [[1.0, 1.0, 1.0]], [[0.0, 1.0, 0.0]]]
    noise = judge_noise(rewards)
    assert noise is not None
    means = [2 / 3, 0.0, 1.0, 1 / 3]
    msb = 3 * sum((m - 0.5) ** 2 for m in means) / 3
    msw = (2 * (1 / 3) ** 2 + (2 / 3) ** 2) * 2 / 8
    assert noise.judge_variance == pytest.approx(msw)
    assert noise.interval_share == pytest.approx(msw / msb)
    assert noise.judge_share == pytest.approx(msw / ((msb - msw) / 3 + msw))


def test_a_consistent_judge_has_no_share_and_the_policy_dominates_given_enough_tasks() -> None:
    """40 tasks x 2 judgments that all agree, half at 1 and half at 0 (worked in interval_share_bounds' docstring):
    0/1 rewards, one answer a task, so two bounds at 0.05/4 a side: w_high = (1/2) (1 - 0.0125^(1/40)),
    μ >= 0.30838 (the clustered Clopper-Pearson interval at 97.5 %), high = w_high / (2 μ (1 - μ) - w_high)."""
    noise = judge_noise([[[float(t % 2)] * 2] for t in range(40)])
    assert noise is not None
    assert (noise.judge_share, noise.share_low, noise.share_high) == (0.0, 0.0, 0.0)
    assert (noise.interval_share, noise.interval_low, noise.dominated_by, noise.agreement) == (0.0, 0.0, "policy", 1.0)
    w_high = 0.5 * (1.0 - 0.0125 ** (1 / 40))
    assert w_high == pytest.approx(0.0518816, abs=1e-7)
    least_pq = 0.30838035 * (1.0 - 0.30838035)
    assert noise.interval_high == pytest.approx(w_high / (2.0 * least_pq - w_high), rel=1e-6)
    assert noise.interval_high == pytest.approx(0.1385, abs=1e-4)
    # Four such tasks (and 12) cannot say so: no disagreement among a few answers leaves the judge's rate open.
    for tasks in (4, 12):
        few = judge_noise([[[float(t % 2)] * 2] for t in range(tasks)])
        assert few is not None and (few.interval_high, few.dominated_by) == (1.0, "neither")


def test_no_disagreement_at_a_skewed_mean_is_not_a_steady_judge() -> None:
    """12 tasks x 2 judgments at a mean near 0.9, none disagreeing: MSW = 0, so the F interval was [0, 0] and said
    "dominated by the policy" (a 0/1 judge at the margin with answers right with probability ~ Beta(1.8, 0.2) shows
    no disagreement on 12 tasks about one run in five)."""
    noise = judge_noise([[[1.0, 1.0]]] * 11 + [[[0.0, 0.0]]])
    assert noise is not None and noise.interval_share == 0.0
    assert (noise.interval_low, noise.interval_high, noise.dominated_by) == (0.0, 1.0, "neither")


def test_wrong_statements_at_a_skewed_margin_keep_the_level() -> None:
    """At the margin (the judge exactly half of the mean reward interval's variance: 0/1 judgments of answers right
    with probability p ~ Beta(0.9 k, 0.1 k)), each wrong statement should happen at most 2.5 % of the time; the F
    interval said "by the policy" about 13 % of the time at 12 tasks x 2 judgments (benchmarks/error_rates.py)."""
    rng = random.Random(38)
    said = {"judge": 0, "policy": 0, "neither": 0}
    runs = 200
    for _ in range(runs):
        probabilities = [rng.betavariate(1.8, 0.2) for _ in range(12)]
        noise = judge_noise([[[float(rng.random() < p) for _ in range(2)]] for p in probabilities])
        if noise is not None and noise.dominated_by is not None:
            said[noise.dominated_by] += 1
    assert said["policy"] <= runs * 0.025 and said["judge"] <= runs * 0.025, said


def test_the_bounds_do_not_depend_on_the_reward_scale() -> None:
    """Rewards outside [0, 1] are rescaled by their own range: -5 + 10 y gives the bounds of y (whose range is
    [0, 1]); too few tasks or no answer judged twice is an error."""
    rng = random.Random(3)
    design = [[[float(rng.random() < 0.5) for _ in range(3)]] for _ in range(30)] + [[[0.0, 1.0, 0.5]]]
    scaled = [[[10.0 * y - 5.0 for y in answer] for answer in task] for task in design]
    low, high = interval_share_bounds(design)
    assert interval_share_bounds(scaled) == pytest.approx((low, high))
    assert 0.0 <= low <= high <= 1.0
    assert interval_share_bounds([[[2.0, 2.0]], [[2.0, 2.0]]]) == (0.0, 1.0)  # no spread at all: nothing told
    with pytest.raises(ValueError, match="two tasks"):
        interval_share_bounds([[[1.0, 0.0]]])
    with pytest.raises(ValueError, match="judged twice"):
        interval_share_bounds([[[1.0]], [[0.0]]])


def test_a_judge_that_is_all_the_variance_dominates() -> None:
    """Answers judged 0, 1, 1 and 0, 0, 1 by turns: less variance between answers than a judge alone makes."""
    noise = judge_noise([[[0.0, 1.0, 1.0]] if t % 2 else [[0.0, 0.0, 1.0]] for t in range(30)])
    assert noise is not None
    assert (noise.answer_variance, noise.judge_share, noise.share_low, noise.share_high) == (0.0, 1.0, 1.0, 1.0)
    assert (noise.interval_share, noise.dominated_by) == (1.0, "judge")
    assert noise.agreement == pytest.approx(1 / 3)
    # Every answer judged 0 and 1: the mean reward interval has no width, so nothing dominates it.
    even = judge_noise([[[0.0, 1.0]] for _ in range(30)])
    assert even is not None and even.judge_share == 1.0 and even.interval_share is None and even.dominated_by is None


def test_nothing_to_split() -> None:
    assert judge_noise([[[1.0]], [[0.0]], [[1.0]]]) is None  # no answer judged twice
    assert judge_noise([[[1.0, 0.0, 1.0]]]) is None  # one answer
    assert judge_noise([[[], []], []]) is None
    flat = judge_noise([[[1.0, 1.0]], [[1.0, 1.0]]])  # no variance at all
    assert flat is not None and math.isnan(flat.judge_share) and flat.interval_share is None
    # Several answers of one task: the split is there, the interval (one task) is not.
    one_task = judge_noise([[[1.0, 0.0], [0.0, 0.0]]])
    assert one_task is not None and one_task.answers == 2 and one_task.interval_share is None
    assert one_task.dominated_by is None


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        judge_noise([[[1.0, math.nan]], [[0.0]]])
    with pytest.raises(ValueError, match="confidence"):
        judge_noise(HAND, confidence=1.0)
    with pytest.raises(ValueError, match="p must"):
        f_ppf(1.0, 2, 3)
    with pytest.raises(ValueError, match="degrees"):
        f_cdf(1.0, 0, 3)


def test_dominance_needs_the_whole_interval_on_one_side() -> None:
    assert dominance(0.51, 0.9) == "judge"
    assert dominance(0.1, 0.49) == "policy"
    assert dominance(0.3, 0.7) == "neither"
    assert dominance(0.5, 0.5) == "neither"


def test_f_quantiles_known_values() -> None:
    """F_{0.95}(1, 1) = tan²(0.95 π / 2) (F(1, 1) is the square of a Cauchy); F_{0.5}(d, d) = 1 by symmetry."""
    assert f_ppf(0.95, 1, 1) == pytest.approx(math.tan(0.95 * math.pi / 2) ** 2, rel=1e-9)
    assert f_ppf(0.5, 7, 7) == pytest.approx(1.0, rel=1e-9)
    assert f_cdf(f_ppf(0.025, 3, 40), 3, 40) == pytest.approx(0.025, rel=1e-9)


def _random_design(rng: random.Random) -> list[list[list[float]]]:
    tasks = []
    for _ in range(rng.randint(2, 12)):
        level = rng.random()
        tasks.append(
            [[float(rng.random() < level) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 3))]
        )
    return tasks


def test_against_scipy_one_way_anova_and_f_quantiles() -> None:
    """The mean squares are a one-way ANOVA's (scipy's f_oneway gives F = MSB / MSW), the F quantiles scipy's, and
    the intervals follow from them as the docstring says."""
    stats = pytest.importorskip("scipy.stats", reason="scipy is a dev extra (pip install -e '.[dev]')")
    for d1, d2, p in [(1, 1, 0.975), (2, 3, 0.025), (11, 40, 0.975), (39, 120, 0.025), (3, 1000, 0.9)]:
        assert f_ppf(p, d1, d2) == pytest.approx(float(stats.f.ppf(p, d1, d2)), rel=1e-8)
        assert f_cdf(2.0, d1, d2) == pytest.approx(float(stats.f.cdf(2.0, d1, d2)), rel=1e-10)
    rng = random.Random(7)
    checked = 0
    for _ in range(200):
        design = _random_design(rng)
        noise = judge_noise(design)
        answers = [answer for task in design for answer in task]
        if noise is None or noise.judge_variance == 0.0 or len({sum(a) / len(a) for a in answers}) == 1:
            continue
        f_scipy = float(stats.f_oneway(*answers).statistic)
        n, g = sum(len(a) for a in answers), len(answers)
        n0 = (n - sum(len(a) ** 2 for a in answers) / n) / (g - 1)
        msb = f_scipy * noise.judge_variance
        assert noise.answer_variance == pytest.approx(max(0.0, (msb - noise.judge_variance) / n0))
        f_low = f_scipy / float(stats.f.ppf(0.975, g - 1, n - g))
        f_high = f_scipy / float(stats.f.ppf(0.025, g - 1, n - g))
        assert noise.share_low == pytest.approx(min(1.0, n0 / (f_high + n0 - 1)))
        assert noise.share_high == pytest.approx(min(1.0, n0 / (f_low + n0 - 1)))
        if noise.interval_share is not None:
            low, high = _bounds_by_scipy(design, stats)
            assert noise.interval_low == pytest.approx(min(low, noise.interval_share), abs=1e-9)
            assert noise.interval_high == pytest.approx(max(high, noise.interval_share), abs=1e-9)
        checked += 1
    assert checked > 100


def _bounds_by_scipy(design: list[list[list[float]]], stats: object) -> tuple[float, float]:
    """interval_share_bounds as its docstring states it, with scipy's Beta quantiles (0/1 rewards: no rescaling)."""
    single = all(len(task) == 1 for task in design) and len({len(task[0]) for task in design}) == 1
    beta = 0.05 / (4 if single else 6)
    tasks = [[y for answer in task for y in answer] for task in design]
    means = [sum(task) / len(task) for task in tasks]
    within, top = [], 0.0
    for task in design:
        repeated = [answer for answer in task if len(answer) > 1]
        df = sum(len(answer) - 1 for answer in repeated)
        if df:
            within.append(sum((y - sum(a) / len(a)) ** 2 for a in repeated for y in a) / df)
            top = max(top, sum(len(a) for a in repeated) / (4 * df))

    def bounds(values: list[float], scale: float) -> tuple[float, float]:
        x, n = sum(values) / scale, len(values)
        low = 0.0 if x <= 0 else float(stats.beta.ppf(beta, x, n - x + 1))  # type: ignore[attr-defined]
        high = 1.0 if x >= n else float(stats.beta.ppf(1 - beta, x + 1, n - x))  # type: ignore[attr-defined]
        return low * scale, high * scale

    w_low, w_high = bounds(within, top)
    mu = clustered_proportion_interval(tasks, 1 - 2 * beta)
    mu_low, mu_high = max(0.0, mu.low), min(1.0, mu.high)
    pqs = (mu_low * (1 - mu_low), mu_high * (1 - mu_high))
    most = 0.25 if mu_low <= 0.5 <= mu_high else max(pqs)
    if single:  # 0/1 rewards: e = 0
        k = len(design[0][0])
        high_den, low_den = k * min(pqs) - (k - 1) * w_high, k * most - (k - 1) * w_low
        high = 1.0 if high_den <= 0 else min(1.0, w_high / high_den)
        low = 1.0 if low_den <= 0 else min(1.0, w_low / low_den)
        return min(low, high), high
    u_low, u_high = bounds([m * (1 - m) for m in means], 0.25)
    n = sum(len(task) for task in tasks) / len(tasks)
    high = 1.0 if min(pqs) - u_high <= 0 else min(1.0, w_high / (n * (min(pqs) - u_high)))
    low = 1.0 if most - u_low <= 0 else min(1.0, w_low / (n * (most - u_low)))
    return min(low, high), high
