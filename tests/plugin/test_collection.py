"""Collection: dataset rows as items, repeats as parametrization, every bad input a clear collection error."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from pytest_gym_eval.tasks.dataset import DatasetError, canonical_json, read_tasks


def row(text: str, **extra: object) -> dict[str, object]:
    return {"responses_create_params": {"input": text}, **extra}


def write_rows(path: Path, rows: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def collected_ids(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    return [line for line in result.outlines if "::" in line]


def test_rows_with_ids_become_items_per_repeat(pytester: pytest.Pytester) -> None:
    write_rows(pytester.path / "datasets" / "mcqa.jsonl", [row("a", id="q1"), row("b", id="q2")])
    ids = collected_ids(pytester, "datasets/mcqa.jsonl", "--gym-repeats", "2")
    assert ids == [
        "datasets/mcqa.jsonl::q1[r0]",
        "datasets/mcqa.jsonl::q1[r1]",
        "datasets/mcqa.jsonl::q2[r0]",
        "datasets/mcqa.jsonl::q2[r1]",
    ]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [({"id": "x", "uuid": "u", "task_id": "t"}, "x"), ({"uuid": "u", "task_id": "t"}, "u"), ({"task_id": 7}, "7")],
)
def test_default_id_fields_in_order(pytester: pytest.Pytester, fields: dict[str, object], expected: str) -> None:
    write_rows(pytester.path / "d.jsonl", [row("a", **fields)])
    assert collected_ids(pytester, "d.jsonl") == [f"d.jsonl::{expected}[r0]"]


def test_row_without_id_gets_hash_of_canonical_json_without_gym_keys(pytester: pytest.Pytester) -> None:
    first = row("a", options=[1, 2], _ng_task_index=4)
    write_rows(pytester.path / "d.jsonl", [first])
    expected = hashlib.sha256(
        json.dumps(
            {"options": [1, 2], "responses_create_params": {"input": "a"}}, sort_keys=True, separators=(",", ":")
        ).encode()
    ).hexdigest()[:12]
    assert collected_ids(pytester, "d.jsonl") == [f"d.jsonl::{expected}[r0]"]


def test_materialised_task_id_object_is_not_an_id(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", [{"task_input": {}, "task_id": {"taskset": "s", "id": 1}}])
    (task,), _ = read_tasks(path)
    assert task.task_id == task.digest[:12]


def test_node_ids_are_stable_when_rows_are_reordered(pytester: pytest.Pytester) -> None:
    rows = [row("a"), row("b", id="named"), row("c")]
    write_rows(pytester.path / "d.jsonl", rows)
    before = set(collected_ids(pytester, "d.jsonl"))
    write_rows(pytester.path / "d.jsonl", rows[::-1])
    after = set(collected_ids(pytester, "d.jsonl"))
    assert before == after and len(before) == 3


def test_ini_id_field_and_repeats(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngym_id_field = qid\ngym_repeats = 2\n")
    write_rows(pytester.path / "d.jsonl", [row("a", qid="first", id="ignored")])
    assert collected_ids(pytester, "d.jsonl") == ["d.jsonl::first[r0]", "d.jsonl::first[r1]"]


def test_task_id_hook_wins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("def pytest_gym_eval_task_id(row, path, line):\n    return f\"{path.stem}-{row['qid']}\"\n")
    write_rows(pytester.path / "d.jsonl", [row("a", qid=1, id="ignored")])
    assert collected_ids(pytester, "d.jsonl") == ["d.jsonl::d-1[r0]"]


def test_dataset_settings_set_repeats_and_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    data/*.jsonl: repeats=3 agent=other_agent\n")
    write_rows(pytester.path / "data" / "d.jsonl", [row("a", id="q")])
    assert len(collected_ids(pytester, "data/d.jsonl")) == 3
    assert len(collected_ids(pytester, "data/d.jsonl", "--gym-repeats", "1")) == 1


def test_only_named_or_matching_jsonl_files_are_datasets(pytester: pytest.Pytester) -> None:
    write_rows(pytester.path / "datasets" / "a.jsonl", [row("a", id="qa")])
    write_rows(pytester.path / "out" / "rollouts.jsonl", [{"reward": 1.0}])
    pytester.makeini("[pytest]\ngym_datasets = datasets/*.jsonl\n")
    assert collected_ids(pytester) == ["datasets/a.jsonl::qa[r0]"]
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "out")
    assert "no tests collected" in result.stdout.str() or "collected 0 items" in result.stdout.str()


def test_double_star_slash_in_a_glob_also_matches_no_folder(pytester: pytest.Pytester) -> None:
    """``datasets/**/*.jsonl`` matches ``datasets/a.jsonl`` too (as the shell's and pathlib's recursive globs do),
    in ``gym_datasets`` and in ``gym_dataset_settings``; it used to collect only the datasets in subfolders."""
    write_rows(pytester.path / "datasets" / "a.jsonl", [row("a", id="qa")])
    write_rows(pytester.path / "datasets" / "sub" / "deeper" / "b.jsonl", [row("b", id="qb")])
    pytester.makeini(
        "[pytest]\ngym_datasets = datasets/**/*.jsonl\n"
        "gym_dataset_settings =\n    **/a.jsonl: repeats=2\n    datasets/**/deeper/**/b.jsonl: repeats=3\n"
    )
    assert collected_ids(pytester, "datasets") == [
        "datasets/a.jsonl::qa[r0]",
        "datasets/a.jsonl::qa[r1]",
        "datasets/sub/deeper/b.jsonl::qb[r0]",
        "datasets/sub/deeper/b.jsonl::qb[r1]",
        "datasets/sub/deeper/b.jsonl::qb[r2]",
    ]


def test_k_and_deselect_select_task_repeat_pairs(pytester: pytest.Pytester) -> None:
    write_rows(pytester.path / "d.jsonl", [row("a", id="alpha"), row("b", id="beta")])
    ids = collected_ids(pytester, "d.jsonl", "--gym-repeats", "2", "-k", "alpha and r1")
    assert ids == ["d.jsonl::alpha[r1]"]
    ids = collected_ids(pytester, "d.jsonl", "--deselect", "d.jsonl::beta[r0]")
    assert ids == ["d.jsonl::alpha[r0]"]


def test_every_item_carries_the_gym_mark(pytester: pytest.Pytester) -> None:
    write_rows(pytester.path / "d.jsonl", [row("a", id="q")])
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    assert collected_ids(pytester, "d.jsonl", "test_plain.py", "-m", "gym") == ["d.jsonl::q[r0]"]
    assert collected_ids(pytester, "d.jsonl", "test_plain.py", "-m", "not gym") == ["test_plain.py::test_plain"]


def test_blank_lines_are_skipped_and_location_is_file_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "d.jsonl").write_text("\n" + json.dumps(row("a", id="q")) + "\n\n")
    pytester.makeconftest(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        print('LOCATION', item.location)\n"
    )
    result = pytester.runpytest("--collect-only", "-s", "-p", "no:cacheprovider", "d.jsonl")
    result.stdout.fnmatch_lines(["LOCATION ('d.jsonl', 1, 'q[[]r0[]]')"])


def test_identical_rows_collapse_with_a_warning(pytester: pytest.Pytester) -> None:
    write_rows(pytester.path / "d.jsonl", [row("same"), row("other"), row("same")])
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "d.jsonl")
    assert len([line for line in result.outlines if "::" in line]) == 2
    result.stdout.fnmatch_lines(["*/d.jsonl:3: PytestCollectionWarning: *lines 1, 3 are identical*repeats*"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"responses_create_params": {}}\n{"a": \n', "d.jsonl:2: malformed JSON*"),
        (
            b'{"responses_create_params": {"input": "Q\tA"}}\n',
            "d.jsonl:1: malformed JSON: Invalid control character at column 41",
        ),
        (
            b'{"responses_create_params": {"input": "Q',
            "d.jsonl:1: malformed JSON: Unterminated string starting at column 39",
        ),
        (b'{"responses_create_params": {}}\n[1, 2]\n', "d.jsonl:2: the row is an array, not a JSON object"),
        (b"\n\n", "d.jsonl: the dataset is empty*"),
        (b"", "d.jsonl: the dataset is empty*"),
        (b"\xef\xbb\xbf", "d.jsonl: the dataset is empty*"),  # a BOM alone
        (b"\xef\xbb\xbf\n \n\x1e\n", "d.jsonl: the dataset is empty*"),  # a BOM, blank lines, a record separator
        # What Python's json reads but JSON does not have: Gym's reader refuses the whole input file for it.
        (b'{"responses_create_params": {}, "score": NaN}\n', "d.jsonl:1: NaN is not JSON (RFC 8259)*null*"),
        (b'{"responses_create_params": {}}\n{"responses_create_params": {}, "s": -Infinity}\n', "d.jsonl:2: -Inf*"),
        (b'{"responses_create_params": {}, "s": 1e400}\n', "d.jsonl:1: the number 1e400 is beyond*"),
        (b'{"responses_create_params": {"input": "\\ud800"}}\n', "d.jsonl:1: a string holds a lone surrogate*"),
        (b'{"responses_create_params": {"input": "caf\xe9"}}\n', "d.jsonl:1: the line is not valid UTF-8*"),
        # A file of another encoding named .jsonl: the error names the likely cause.
        (
            gzip.compress(b'{"responses_create_params": {}}\n', mtime=0),
            "d.jsonl:1: *the file looks gzip-compressed (it starts with gzip's bytes 1f 8b): decompress it*",
        ),
        (
            '{"responses_create_params": {}}\n'.encode("utf-16"),
            "d.jsonl:1: *the file looks UTF-16-encoded (it starts with a UTF-16 byte-order mark): save it as UTF-8",
        ),
        (
            '{"responses_create_params": {}}\n'.encode("utf-16-le"),
            "d.jsonl:1: *the file looks UTF-16-encoded (NUL bytes between its characters): save it as UTF-8",
        ),
        ('{"responses_create_params": {}}\n'.encode("utf-32"), "d.jsonl:1: *the file looks UTF-32-encoded*"),
        (b'{"id": "x"}\n', "d.jsonl:1: the row has no 'responses_create_params'*"),
        (b'{"id": "a::b", "responses_create_params": {}}\n', "d.jsonl:1: the task id 'a::b' contains '::'*"),
        (b'{"id": "a\\tb", "responses_create_params": {}}\n', "d.jsonl:1: the task id 'a\\tb' contains '\\t'*"),
        (b'{"id": "a\\u2028b", "responses_create_params": {}}\n', "d.jsonl:1: the task id 'a\\u2028b' contains*"),
        (b'{"id": "a\\u0000b", "responses_create_params": {}}\n', "d.jsonl:1: the task id 'a\\x00b' contains*"),
        (
            b'{"id": "a[1]", "responses_create_params": {}}\n',
            "d.jsonl:1: the task id 'a[[]1[]]' contains '[[]'*gym_id_field*",
        ),
        (b'{"responses_create_params": "q"}\n', "d.jsonl:1: 'responses_create_params' must be a JSON object*"),
    ],
)
def test_bad_input_is_a_collection_error_naming_file_and_line(
    pytester: pytest.Pytester, content: bytes, message: str
) -> None:
    (pytester.path / "d.jsonl").write_bytes(content)
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", "d.jsonl")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status for collection errors
    result.stdout.fnmatch_lines(["*ERROR collecting d.jsonl*", f"*{message}"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("content", "options", "warning"),
    [
        (
            b'{"id": 1.5, "responses_create_params": {}}\n{"id": true, "responses_create_params": {}}\n'
            b'{"id": "ok", "responses_create_params": {}}\n',
            [],
            "*/d.jsonl:1: PytestCollectionWarning: */d.jsonl: the 'id' of line 1 is a number (1.5), not a string or an"
            " integer: its row and 1 more like it get a hash of the row as task id;*gym_id_field*",
        ),
        (
            b'{"id": null, "responses_create_params": {}}\n',
            [],
            "*/d.jsonl:1: PytestCollectionWarning: */d.jsonl: the 'id' of line 1 is null (null)*its row gets a hash*",
        ),
        (
            b'{"id": "x", "responses_create_params": {}}\n',
            ["-o", "gym_id_field=nonexistent"],  # a typo in the setting the user named
            "*/d.jsonl:1: PytestCollectionWarning: */d.jsonl: no row has 'nonexistent' (gym_id_field): every task id"
            " is a hash of its row",
        ),
    ],
)
def test_ids_that_cannot_be_task_ids_are_hashed_with_a_warning(
    pytester: pytest.Pytester, content: bytes, options: list[str], warning: str
) -> None:
    (pytester.path / "d.jsonl").write_bytes(content)
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *options, "d.jsonl")
    assert result.ret == 0
    result.stdout.fnmatch_lines([warning])


def test_rows_with_good_ids_or_a_task_id_object_warn_of_nothing(pytester: pytest.Pytester) -> None:
    rows = b'{"id": "a", "responses_create_params": {}}\n{"id": 7, "responses_create_params": {}}\n'
    rows += b'{"task_id": {"source": "gym"}, "responses_create_params": {}}\n'  # a Gym materialised row's object
    (pytester.path / "d.jsonl").write_bytes(rows)
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "d.jsonl")
    assert result.ret == 0 and "PytestCollectionWarning" not in result.stdout.str()


@pytest.mark.parametrize(
    "options",
    [["--gym-min-pass-at-k=5:0.1", "--gym-repeats=2"], ["-o", "gym_dataset_settings=d.jsonl: min_pass_at_k=3:0.5"]],
)
def test_a_pass_at_k_gate_past_the_repeats_is_a_collection_error(pytester: pytest.Pytester, options: list[str]) -> None:
    write_rows(pytester.path / "d.jsonl", [row("a"), row("b")])
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *options, "d.jsonl")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*d.jsonl: the pass@? gate needs at least ? repeats of each task, and this dataset runs *"]
    )


def test_same_id_on_different_rows_names_both_lines(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", [row("a", id="q"), row("b"), row("c", id="q")])
    with pytest.raises(DatasetError) as raised:
        read_tasks(path)
    assert str(raised.value) == f"{path}:3: task id 'q' is already used by a different row on line 1"


def test_canonical_json_ignores_key_order_and_gym_keys() -> None:
    assert canonical_json({"b": 1, "a": [2], "_ng_task_index": 3}) == canonical_json({"a": [2], "b": 1})


def test_collect_only_starts_nothing(pytester: pytest.Pytester, fake_gym: object) -> None:
    from tests.support.fakes import FakeGym

    assert isinstance(fake_gym, FakeGym)
    write_rows(pytester.path / "mcqa.jsonl", [row("a", id="q")])
    result = pytester.runpytest("--collect-only", *fake_gym.args, "mcqa.jsonl")
    assert result.ret == 0
    assert fake_gym.calls() == []
    assert not list(pytester.path.rglob("state.json"))


def test_datasets_outside_the_rootdir_keep_distinct_readable_names(pytester: pytest.Pytester, fake_gym: object) -> None:
    from tests.support.fakes import FakeGym
    from tests.support.junit import junit_suite_properties

    assert isinstance(fake_gym, FakeGym)
    project = pytester.mkdir("project")
    (project / "pytest.ini").write_text(
        "[pytest]\ngym_dataset_settings =\n    ../shared/b/*.jsonl: pass_threshold=0.0 min_mean_reward=0.0\n"
    )
    for folder in ("a", "b"):  # two datasets with one file name, both outside the rootdir
        write_rows(pytester.path / "shared" / folder / "mcqa.jsonl", [row("q", id="t1", fake={"reward": 0.5})])
    args = [*fake_gym.args, "-c", str(project / "pytest.ini"), "--rootdir", str(project)]
    datasets = [str(pytester.path / "shared" / folder / "mcqa.jsonl") for folder in ("a", "b")]
    import os

    os.chdir(project)  # (pytest shows node ids relative to where it runs; pytester restores the folder)
    result = pytester.runpytest(*args, *datasets, "-rA", "--junitxml=junit.xml", "--gym-report=report.json")
    passed = sorted(line for line in result.outlines if line.startswith(("PASSED", "FAILED")))
    assert passed == ["FAILED ../shared/a/mcqa.jsonl::t1[r0] - reward 0.5 is below the pass threshold 1",
                      "PASSED ../shared/b/mcqa.jsonl::gym-gate", "PASSED ../shared/b/mcqa.jsonl::t1[r0]"]  # fmt: skip
    suite = junit_suite_properties(project / "junit.xml")
    assert suite["gym::../shared/a/mcqa.jsonl::threshold"] == "1"
    assert suite["gym::../shared/b/mcqa.jsonl::threshold"] == "0"  # the settings matched the path as written
    report = json.loads((project / "report.json").read_text())
    assert [d["dataset"] for d in report["datasets"]] == ["../shared/a/mcqa.jsonl", "../shared/b/mcqa.jsonl"]
    # -k and --deselect select them like any item.
    result = pytester.runpytest(
        *args, *datasets, "--collect-only", "-q", "--deselect", "../shared/a/mcqa.jsonl::t1[r0]"
    )
    assert [line for line in result.outlines if "::" in line] == [
        "../shared/b/mcqa.jsonl::t1[r0]", "../shared/b/mcqa.jsonl::gym-gate"
    ]  # fmt: skip


def test_a_symlinked_dataset_is_collected_and_keeps_its_settings(pytester: pytest.Pytester) -> None:
    real = write_rows(pytester.path / "store" / "real.jsonl", [row("a", id="q")])
    (pytester.path / "datasets").mkdir()
    (pytester.path / "datasets" / "linked.jsonl").symlink_to(real)
    pytester.makeini(
        "[pytest]\ngym_datasets = datasets/*.jsonl\ngym_dataset_settings =\n    datasets/linked.jsonl: repeats=2\n"
    )
    assert collected_ids(pytester, "datasets") == ["datasets/linked.jsonl::q[r0]", "datasets/linked.jsonl::q[r1]"]
    assert collected_ids(pytester, "datasets/linked.jsonl") == [
        "datasets/linked.jsonl::q[r0]", "datasets/linked.jsonl::q[r1]"
    ]  # fmt: skip


def test_a_dataset_inside_a_gym_checkout_does_not_silently_take_gyms_configuration(
    pytester: pytest.Pytester,
) -> None:
    checkout = pytester.mkdir("gym")
    for folder in ("nemo_gym", "resources_servers/mcqa/data"):
        (checkout / folder).mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--strict-markers -x"\n')
    write_rows(checkout / "resources_servers" / "mcqa" / "data" / "example.jsonl", [row("a", id="q")])
    project = pytester.mkdir("project")
    (project / "pytest.ini").write_text("[pytest]\n")
    dataset = str(checkout / "resources_servers" / "mcqa" / "data" / "example.jsonl")
    import os

    os.chdir(project)
    result = pytester.runpytest("--collect-only", "-q", dataset)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*pytest read its configuration from Gym's own {checkout}/pyproject.toml*-c pytest.ini*"]
    )
    # Naming a configuration is the way out; so is working inside the checkout.
    result = pytester.runpytest("--collect-only", "-q", "-c", "pytest.ini", dataset)
    assert result.ret == 0 and "../gym/resources_servers/mcqa/data/example.jsonl::q[r0]" in result.outlines
    os.chdir(checkout)
    assert pytester.runpytest("--collect-only", "-q", dataset).ret == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'{"responses_create_params": {"input": "q"}, "n": 1.5e300}\n',
        b'\xef\xbb\xbf{"responses_create_params": {}}\n',  # a UTF-8 BOM, which jsonlines drops
        b'\x1e{"responses_create_params": {}}\n',  # RFC 7464's record separator, likewise
        b'  {"responses_create_params": {"input": "caf\xc3\xa9 \\u00e9"}}  \r\n',
        b"{}\n",
        b"[1, 2]\n",
        b"null\n",
        b'"text"\n',
        b'{"responses_create_params": {"input": "caf\xe9"}}\n',
        b'{"a": 1}{"b": 2}\n',
        b"{'a': 1}\n",
        b'{"a": NaN}\n',
        b'{"a": [1, Infinity]}\n',
        b'{"a": "\\ud83d\\ude00 \\\\ud800"}\n',  # a surrogate pair, and an escaped backslash before "ud800"
    ],
)
def test_rows_parse_exactly_as_jsonlines_reads_them(tmp_path: Path, raw: bytes) -> None:
    """The fast path of dataset parsing gives jsonlines' row or jsonlines' error, line for line (jsonlines
    with the dataset reader's JSON decoder, which refuses what is not JSON)."""
    import jsonlines

    from pytest_gym_eval.tasks.dataset import _describe_invalid_line, _loads, parse_row

    path = tmp_path / "d.jsonl"
    try:
        expected: object = jsonlines.Reader([raw], loads=_loads).read(type=dict)
    except jsonlines.InvalidLineError as error:
        expected = DatasetError(path, 7, _describe_invalid_line(error))
    try:
        got: object = parse_row(raw, path, 7)
    except DatasetError as error:
        got = error
    if isinstance(expected, DatasetError):
        assert isinstance(got, DatasetError) and str(got) == str(expected)
    else:
        assert got == expected


def test_task_ids_of_rows_without_ids_never_change(tmp_path: Path) -> None:
    """Pinned values: a task id is a row's identity across versions (README: sorted keys, compact, no `_ng_*`
    keys, the first 12 hex digits of sha256)."""
    rows = [
        {"responses_create_params": {"input": [{"role": "user", "content": "2 + 2 = ?"}]}, "expected_answer": "4"},
        {"_ng_task_index": 9, "b": ["é", 1.0, None, True], "responses_create_params": {"input": "q"}, "a": {"z": 1}},
    ]
    tasks, _ = read_tasks(write_rows(tmp_path / "d.jsonl", rows))
    expected = [
        hashlib.sha256(
            json.dumps(
                {k: v for k, v in r.items() if not k.startswith("_ng_")},
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode()
        ).hexdigest()[:12]
        for r in rows
    ]
    assert [t.task_id for t in tasks] == expected
    assert expected == ["38d2850e2083", "51292d3a5fac"]  # computed by the code of 0.1.0
