"""The benchmark's verdicts (benchmarks/verdicts.py): paired bootstrap intervals, the met/unclear/not met rule,
and the tables it writes between markers."""

from __future__ import annotations

import importlib
import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_verdicts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verdicts", ROOT / "benchmarks" / "verdicts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


verdicts = load_verdicts()


def test_pairing_cancels_noise_common_to_a_round() -> None:
    # Every round's pytest time is exactly 1.02x its raw time, while the raw times vary by 40%: resampling
    # whole rounds keeps the ratio exact; resampling each side on its own would not.
    raw = [10.0, 14.0, 11.0, 12.5, 10.2, 13.1, 11.7]
    plugin = [1.02 * t for t in raw]
    ratio = verdicts.median_ratio(plugin, raw)
    assert ratio.value == pytest.approx(1.02)
    assert ratio.low == pytest.approx(1.02) and ratio.high == pytest.approx(1.02)
    assert ratio.verdict(1.05) == "met"


def test_interval_spans_the_rounds_spread_and_is_reproducible() -> None:
    plugin = [12.1, 13.9, 12.4, 12.0, 14.8, 12.2, 12.6]
    raw = [12.0, 12.1, 12.3, 11.9, 12.2, 12.0, 12.4]
    first, again = verdicts.median_ratio(plugin, raw), verdicts.median_ratio(plugin, raw)
    assert first == again  # fixed seed
    assert first.value == pytest.approx(statistics.median(plugin) / statistics.median(raw))
    assert first.low <= first.value <= first.high
    assert first.high > 1.05 >= first.value  # the slow rounds widen it past the goal
    assert first.verdict(1.05) == "unclear"
    assert first.verdict(1.0) == "not met"
    assert first.text() == f"{first.value:.3f} ({first.low:.3f}-{first.high:.3f})"


def test_too_few_rounds_are_never_met() -> None:
    assert verdicts.median_ratio([1.0, 1.0], [1.0, 1.0]).verdict(1.05) == "unclear"
    single = verdicts.median_of([0.2])
    assert (single.value, single.low, single.high, single.rounds) == (0.2, 0.2, 0.2, 1)
    assert single.verdict(0.3) == "unclear"
    assert single.text(2) == "0.20"


def test_sides_must_pair() -> None:
    with pytest.raises(ValueError, match="same number of rounds"):
        verdicts.median_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least one side"):
        verdicts.bootstrap([], statistics.median)


def test_table_replaced_between_markers_only(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nbefore\n{verdicts.TABLE_BEGIN}\nold table\n{verdicts.TABLE_END}\nafter\n")
    assert verdicts.replace_between_markers(readme, "| new | table |\n")
    assert readme.read_text() == (
        f"# Title\n\nbefore\n{verdicts.TABLE_BEGIN}\n| new | table |\n{verdicts.TABLE_END}\nafter\n"
    )
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not verdicts.replace_between_markers(plain, "x")
    assert plain.read_text() == "no markers\n"


def block(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    begin, end = text.index(verdicts.TABLE_BEGIN), text.index(verdicts.TABLE_END)
    return text[begin:end]


def test_readmes_show_the_table_of_the_same_full_run() -> None:
    """The READMEs' tables come from the run that wrote results.md (one command line, one date)."""
    files = [ROOT / "docs" / "benchmarks.md", ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "results.md"]
    commands = {next((line for line in block(path).splitlines() if line.startswith("Command:")), "") for path in files}
    assert len(commands) == 1


def test_the_scale_slope_is_the_plugins_cost_per_rollout_beyond_raw_gym_and_bare_pytest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # benchmarks/scale.py: per size the rounds' session, raw and bare times; the slope of median(session - raw -
    # bare) over the size, in us. Raw Gym and bare pytest grow and vary, the plugin adds 0.2 s + 15 us a rollout.
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    scale = importlib.import_module("scale")
    sizes = [200, 2000, 20000]
    sides: list[list[float]] = []
    for size in sizes:
        raw = [size * 1e-3 * factor for factor in (1.0, 1.3, 0.8)]
        bare = [0.3 + size * 5e-5 * factor for factor in (1.1, 0.9, 1.0)]
        sides += [[r + b + 0.2 + size * 15e-6 for r, b in zip(raw, bare, strict=True)], raw, bare]
    assert scale.slope_us(sizes)(*sides) == pytest.approx(15.0)
    estimate = verdicts.bootstrap(sides, scale.slope_us(sizes), resamples=200)
    assert estimate.low == pytest.approx(15.0) and estimate.high == pytest.approx(15.0)
    assert estimate.verdict(20.0) == "met" and estimate.verdict(10.0) == "not met"
