"""``pytest_gym_eval.tasks.python_dataset``: a Dataset's checks, its label, its file's text and path, and the label told
back from the path (which ``gym_dataset_settings`` globs match)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.settings import matches_no_file, parse_dataset_settings
from pytest_gym_eval.session.collect import dataset_default_agent
from pytest_gym_eval.tasks.python_dataset import FOLDER, Dataset, label_of, materialise

ROW = {"responses_create_params": {"input": "hi"}}


def test_rows_get_their_id_or_their_index_and_the_same_text_whatever_the_key_order(tmp_path: Path) -> None:
    one = Dataset("cases", [{"b": 1, **ROW}, {**ROW, "id": "named"}], module=tmp_path / "test_x.py")
    two = Dataset("cases", [{**ROW, "b": 1}, {"id": "named", **ROW}], module=tmp_path / "test_x.py")
    assert [row["id"] for row in one.rows] == ["0", "named"]
    assert one.text() == two.text()
    assert [json.loads(line)["id"] for line in one.text().splitlines()] == ["0", "named"]


def test_the_label_names_the_defining_module_relative_to_the_rootdir(tmp_path: Path) -> None:
    here = Dataset("cases", [ROW])  # module: this file
    assert here.label(Path(__file__).parent) == "test_python_dataset.py:cases"
    assert Dataset("cases", [ROW], module=tmp_path / "t" / "test_x.py").label(tmp_path) == "t/test_x.py:cases"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([ROW, "text"], "row 1 is str, not a dict"),
        ([ROW, {"input": "hi"}], "row 1 has no 'responses_create_params' dict"),
        ([{**ROW, "when": object()}], "row 0 is not JSON-serialisable"),
        ([{**ROW, "x": float("nan")}], "row 0 is not JSON-serialisable"),
        ([], "has no row"),
    ],
)
def test_a_bad_row_is_an_error_naming_the_module_and_the_row(rows: list[object], message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        Dataset("cases", rows, module=tmp_path / "test_x.py")  # type: ignore[arg-type]
    assert str(raised.value).startswith(f"{tmp_path / 'test_x.py'}: Dataset 'cases'")


@pytest.mark.parametrize("name", ["", "a b", "a/b", "a:b", ".hidden", "-x", "x" * 101])
def test_a_bad_name_is_an_error(name: str) -> None:
    with pytest.raises(ValueError, match="Dataset name"):
        Dataset(name, [ROW])


def test_the_file_is_written_once_and_tells_its_label_back(tmp_path: Path) -> None:
    dataset = Dataset("weather-cases", [ROW], module=tmp_path / "tests" / "test_weather.py")
    path = materialise(dataset, tmp_path / "run", tmp_path)
    assert path.parent == tmp_path / "run" / FOLDER
    assert path.read_text() == dataset.text()
    stamp = path.stat().st_mtime_ns
    assert materialise(dataset, tmp_path / "run", tmp_path) == path and path.stat().st_mtime_ns == stamp
    assert label_of(path) == "tests/test_weather.py:weather-cases"
    assert label_of(tmp_path / "weather.jsonl") is None
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_settings_globs_match_the_label_and_the_agent_falls_back_to_its_name(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_weather.py").write_text("")
    dataset = Dataset("weather-cases", [ROW], module=tmp_path / "tests" / "test_weather.py")
    path = materialise(dataset, tmp_path / "run", tmp_path)
    lines = ["tests/test_weather.py:weather-*: min_mean_reward=0.9 repeats=3"]
    options = GymOptions(rootdir=tmp_path, datasets=tuple(parse_dataset_settings(lines)))
    assert options.dataset_settings(path).repeats == 3
    assert options.dataset_settings(tmp_path / dataset.label(tmp_path)).repeats == 3  # as the summary asks
    assert dataset_default_agent(GymOptions(rootdir=tmp_path), path) == "weather-cases_simple_agent"
    assert not matches_no_file("tests/test_weather.py:weather-*", tmp_path)
    assert matches_no_file("tests/test_rain.py:weather-*", tmp_path)
