"""Every ``python -m pytest_gym_eval COMMAND`` words its errors one way: ``python -m pytest_gym_eval COMMAND: error:
MESSAGE`` on standard error, as argparse words a usage error (exit status 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.__main__ import COMMANDS, main

MISSING = "/nonexistent/pytest-gym-eval/x"

ERRORS: dict[str, tuple[list[str], int]] = {
    "provision": (["--dest", MISSING], 1),  # (provision itself is replaced by one that fails at once)
    "replay": ([f"{MISSING}.jsonl"], 2),
    "html": ([f"{MISSING}.json"], 2),
    "cleanup": (["--run-dir", MISSING], 2),
    "local-model": ([f"{MISSING}.gguf"], 2),
    "merge": ([f"{MISSING}.json", f"{MISSING}2.json"], 2),
    "plan": ([f"{MISSING}.json", "--detect-drop", "0.1"], 2),
    "status": (["--no-such-option"], 2),
    "stop": (["0123abcd"], 1),  # no warm Gym's key starts so
    "history": ([f"{MISSING}.db"], 2),
    "record": (["--upstream", "http://127.0.0.1:9/v1", "--output", f"{MISSING}.jsonl"], 2),
    "judge-recordings": ([f"{MISSING}.jsonl", "--output", f"{MISSING}2.jsonl"], 2),
}
"""Per subcommand: arguments it refuses, and its exit status then."""


def test_every_subcommand_is_covered() -> None:
    assert set(ERRORS) == set(COMMANDS)


def test_every_subcommand_has_a_row_in_the_commands_table() -> None:
    page = (Path(__file__).parents[2] / "docs" / "hooks-and-api.md").read_text(encoding="utf-8")
    listed = {
        name.strip(" `")
        for line in page.splitlines()
        if line.startswith("| `")
        for name in line.split("|")[1].split(",")
    }
    assert set(COMMANDS) <= listed, set(COMMANDS) - listed


@pytest.mark.parametrize("command", sorted(ERRORS))
def test_every_subcommand_words_its_errors_one_way(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, warm_registry: Path
) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise provision.ProvisionError("no network here")

    monkeypatch.setattr(provision, "provision", failing)
    args, expected = ERRORS[command]
    try:
        status = main([command, *args])
    except SystemExit as exit:  # argparse's usage errors
        status = exit.code  # type: ignore[assignment]
    assert status == expected
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"python -m pytest_gym_eval {command}: error: "), err
    assert "Traceback" not in err


def test_an_unknown_command_is_worded_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert capsys.readouterr().err.startswith("python -m pytest_gym_eval: error: unknown command 'no-such-command'")
