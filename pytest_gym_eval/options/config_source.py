"""Where pytest's configuration came from: a session whose ini file is, by accident, a Gym checkout's own
``pyproject.toml`` is refused before anything else happens (:func:`check_config_source`, run by the plugin's
``pytest_configure`` on every pytest run, so it imports only the standard library and pytest).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest


def check_config_source(config: pytest.Config) -> None:
    """Refuse a session whose pytest configuration came, by accident, from a Gym checkout's own
    ``pyproject.toml``.

    pytest takes its rootdir and ini file from the common ancestor of the paths on the command line, before any
    plugin loads: a dataset inside a Gym checkout (``.../resources_servers/mcqa/data/example.jsonl``) named from
    elsewhere makes Gym's ``pyproject.toml`` the configuration (its ``addopts``, ``--strict-markers`` and cache
    then apply) even when the current folder has one of its own. Raises :class:`pytest.UsageError` saying so and
    how to name a configuration (``-c``), when a ``.jsonl`` argument lies in a Gym checkout whose files configure
    pytest, pytest was started outside that checkout, and no ``-c``/``--config-file``/``--rootdir`` was given.
    The same for ``--gym-checkout PATH`` (a space, not ``=``): pytest took ``PATH`` for a path to test, and the
    message says to write ``--gym-checkout=PATH``.
    """
    inipath = config.inipath
    if inipath is None or not _is_gym_checkout(inipath.parent):
        return
    checkout = inipath.parent.resolve()
    params = config.invocation_params
    if _inside(Path(params.dir).resolve(), checkout):
        return
    explicit = ("-c", "--config-file", "--rootdir", "--inifile")
    if any(arg == flag or arg.startswith(flag + "=") for arg in params.args for flag in explicit):
        return
    spaced = _spaced_path_option(params.args, Path(params.dir), checkout)
    if spaced is not None:
        raise pytest.UsageError(
            f"pytest read its configuration from Gym's own {inipath} (rootdir {checkout}: Gym's addopts and "
            f"markers apply, and pytest's cache goes into the checkout) because `{spaced} {checkout}` was given "
            "with a space: pytest chooses its configuration before it knows this plugin's options, and took the "
            f"checkout for a path to test. Write `{spaced}={checkout}`."
        )
    datasets = [arg for arg in config.args if arg.split("::")[0].endswith(".jsonl")]
    if not any(_inside((Path(params.dir) / arg.split("::")[0]).resolve(), checkout) for arg in datasets):
        return
    raise pytest.UsageError(
        f"pytest read its configuration from Gym's own {inipath} (rootdir {checkout}: Gym's addopts and "
        "markers apply, and pytest's cache goes into the checkout) because the datasets on the command line lie "
        "inside that Gym checkout. Name your configuration: `pytest -c pytest.ini ...` (your project's ini file; "
        "`-c /dev/null` for none); a dataset outside the rootdir keeps its path, with ../, in its node ids."
    )


def _spaced_path_option(args: Sequence[str], cwd: Path, checkout: Path) -> str | None:
    """The ``--gym-*`` option given with a space before a path inside ``checkout`` (``--gym-checkout PATH``,
    ``--gym-replay PATH``), which pytest's first reading of the command line took for a path to test; None
    when there is none."""
    for option, value in itertools.pairwise(args):
        if option.startswith("--gym-") and "=" not in option and _inside((cwd / value).resolve(), checkout):
            return option
    return None


def _is_gym_checkout(folder: Path) -> bool:
    return (folder / "nemo_gym").is_dir() and (folder / "resources_servers").is_dir()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
