"""Verdicts a reader can trust on a noisy machine: every ratio with its spread over the rounds, and the tables
the benchmark writes itself (``benchmarks/run.py`` imports this; nothing here starts a process).

The spread is a **95% percentile bootstrap interval** (Efron & Tibshirani, *An Introduction to the Bootstrap*,
1993, ch. 13): the rounds are drawn with replacement :data:`RESAMPLES` times with a fixed seed (so a run's
table can be recomputed from its raw times), the statistic is computed on each draw, and the interval runs from
the 2.5th to the 97.5th percentile of those values. Rounds are *paired*: one draw takes whole rounds, every side's
time of a drawn round together, so noise that hits all sides of a round alike (the machine's load then) cancels
in a ratio. A goal is **met** only when the interval's upper end is within it (and there were at least
:data:`MIN_ROUNDS` rounds); **unclear** when the estimate is
within it but the upper end is not; **not met** otherwise.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

RESAMPLES = 10_000
"""Bootstrap draws per interval."""
SEED = 2026
"""The bootstrap's fixed seed."""
CONFIDENCE = 0.95
MIN_ROUNDS = 3
"""Fewer rounds than this give no "met": two rounds have only three distinct resamples of a median."""
METHOD = (
    f"95% percentile bootstrap over the rounds ({RESAMPLES:,} paired resamples of whole rounds, seed {SEED}; "
    "Efron & Tibshirani 1993, ch. 13)"
)
"""How the intervals were computed, as the tables say it."""
TABLE_BEGIN = "<!-- benchmark table: written by benchmarks/run.py, do not edit -->"
TABLE_END = "<!-- end of benchmark table -->"


@dataclass(frozen=True)
class Estimate:
    """A statistic of the rounds (``value``) with its bootstrap interval ``[low, high]``; ``rounds`` counts
    the rounds it came from (1: no interval, ``low == high == value``)."""

    value: float
    low: float
    high: float
    rounds: int

    def text(self, digits: int = 3) -> str:
        """``1.003 (0.981-1.041)``; the value alone for a single round."""
        if self.rounds < 2:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"

    def verdict(self, goal: float) -> str:
        """``met`` when the upper end is at most ``goal``, ``unclear`` when only the value is, else ``not met``.
        Fewer than :data:`MIN_ROUNDS` rounds give at most ``unclear``."""
        if self.rounds >= MIN_ROUNDS and self.high <= goal:
            return "met"
        return "unclear" if self.value <= goal else "not met"


def bootstrap(
    samples: Sequence[Sequence[float]],
    statistic: Callable[..., float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """The percentile bootstrap of ``statistic(*samples)`` over paired rounds.

    ``samples`` holds one sequence per side, all of the same length (round ``i`` of each side belongs
    together); ``statistic`` takes the sides' sequences (resampled alike) and returns a float. Returns the
    statistic of the measured rounds with the 2.5th and 97.5th percentiles (nearest rank) of ``resamples``
    draws. Raises :class:`ValueError` for no sides, sides of different lengths, or no rounds.
    """
    if not samples:
        raise ValueError("bootstrap needs at least one side")
    rounds = len(samples[0])
    if rounds == 0 or any(len(side) != rounds for side in samples):
        raise ValueError(f"every side needs the same number of rounds, not {[len(side) for side in samples]}")
    value = statistic(*samples)
    if rounds == 1:
        return Estimate(value, value, value, 1)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        picked = [rng.randrange(rounds) for _ in range(rounds)]
        draws.append(statistic(*([side[i] for i in picked] for side in samples)))
    draws.sort()
    tail = (1 - CONFIDENCE) / 2
    low = draws[max(0, round(tail * resamples) - 1)]
    high = draws[min(resamples - 1, round((1 - tail) * resamples) - 1)]
    return Estimate(value, low, high, rounds)


def median_ratio(plugin: Sequence[float], baseline: Sequence[float]) -> Estimate:
    """``median(plugin) / median(baseline)`` over paired rounds, with its bootstrap interval."""
    return bootstrap([plugin, baseline], lambda p, b: statistics.median(p) / statistics.median(b))


def median_of(values: Sequence[float]) -> Estimate:
    """The median of the rounds with its bootstrap interval (for an absolute goal: seconds, milliseconds)."""
    return bootstrap([values], statistics.median)


def replace_between_markers(path: Path, block: str) -> bool:
    """Replace the text between :data:`TABLE_BEGIN` and :data:`TABLE_END` in ``path`` with ``block``; whether
    the file has the markers (a file without them is left alone). Raises :class:`OSError` when it cannot be
    read or written."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        return False
    head = text[: begin + len(TABLE_BEGIN)]
    path.write_text(f"{head}\n{block.strip()}\n{text[end:]}", encoding="utf-8")
    return True


def stamp() -> str:
    """The date and time a table was written (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def merge_rows(path: Path, rows: Sequence[str], note: str) -> bool:
    """Put the table rows ``rows`` (``| first cell | ... |`` lines) of a partial run (``run.py --only NAME
    --write-rows``) into the table between the markers of ``path``, the rest of it kept: a row whose first cell is
    one of the table's (:func:`row_key`: the measured values some labels quote left out) replaces it; any other goes
    after the last row whose first cell starts with the same first word (``adaptive``, punctuation aside), else at
    the table's end. ``note``, one line saying which run wrote them, goes below the table after a blank line, in
    place of an earlier note that starts with the same text up to its first ``:``. A full run rewrites the whole
    block, notes included. Whether ``path`` has the markers (else it is left alone). Raises :class:`OSError` when it
    cannot be read or written."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        return False
    lines = text[begin + len(TABLE_BEGIN) : end].strip("\n").split("\n")
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    last = table[-1] if table else len(lines) - 1
    for row in rows:
        first = row_key(row)
        same = [i for i in table if row_key(lines[i]) == first]
        if same:
            lines[same[0]] = row
            continue
        kin = [i for i in table if _first_word(lines[i]) == _first_word(row)]
        at = (kin[-1] if kin else last) + 1
        lines.insert(at, row)
        table = [i for i, line in enumerate(lines) if line.startswith("|")]
        last = table[-1]
    key = note.split(":", 1)[0]
    lines = [line for line in lines if not line.startswith(key)]
    while lines and not lines[-1].strip():
        lines.pop()
    block = "\n".join(lines) + f"\n\n{note}"
    path.write_text(f"{text[: begin + len(TABLE_BEGIN)]}\n{block}\n{text[end:]}", encoding="utf-8")
    return True


MEASURED = re.compile(r" ?\((?=[^()]*\d\.\d\d)[^()]*\)")
"""A parenthesis in a label quoting measured values (a number with two decimals or more: ``(rows 5.53, 5.88 s)``)."""


def row_key(row: str) -> str:
    """What makes two table rows the same row: the first cell without the parentheses that quote measured values
    (:data:`MEASURED`), which change from run to run while the label stays (``... time (rows 5.53, 5.88 s)`` and
    ``... time (rows 6.01, 6.20 s)`` are one row); a parenthesis of sizes (``(50 tasks x 4)``, ``(waves to [2, 4,
    8])``) stays part of the key."""
    return MEASURED.sub("", _first_cell(row))


def _first_cell(row: str) -> str:
    return row.strip().strip("|").split(" | ", 1)[0].strip()


def _first_word(row: str) -> str:
    return re.split(r"[^\w-]", _first_cell(row), maxsplit=1)[0]
