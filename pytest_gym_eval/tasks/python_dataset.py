"""Datasets built in Python: :class:`Dataset` holds rows a test module writes, and :func:`materialise` turns it into
a ``.jsonl`` file of the run directory, which the ``gym_rollouts`` mark then treats as any dataset file (planned into
the session's one ``gym eval run``, with its own summary, gates, custom metrics, reports and history).

A Python dataset's name in every report is ``<module>:<name>`` (:attr:`Dataset.label`: the defining module's path
relative to the rootdir, a colon, the name it was given), e.g. ``tests/test_weather.py:weather-cases``;
``gym_dataset_settings`` globs match it. Its file is ``<run dir>/gym-python-datasets/<label, %-quoted>.jsonl``, so
:func:`label_of` can tell the name back from the path alone (in any process, the pytest-xdist controller's
included). A leaf module: standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from pytest_gym_eval.core.rundir import RunPaths

FOLDER = RunPaths(Path()).python_datasets.name
"""The run directory's folder of materialised Python datasets (:attr:`RunPaths.python_datasets`)."""

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Rows written in Python, to be rolled out as a dataset of their own:
    ``@pytest.mark.gym_rollouts(Dataset("weather-cases", rows, agent="weather_simple_agent"))``.

    ``name``: letters, digits, ``_``, ``.``, ``-`` (up to 100, not starting with ``.`` or ``-``). ``rows``: dicts as a
    dataset line holds them (``responses_create_params`` and the environment's own fields), JSON-serialisable; a row
    without an ``id`` key gets its index (``"0"``, ``"1"``, ...) as its id. ``agent``: the agent its rows are rolled
    out by unless a row names one (``agent_ref``) or a ``gym_dataset_settings`` line sets ``agent=``; None: as a
    dataset file's (``--gym-agent``, else ``<name>_simple_agent``). ``module``: the path of the module defining it
    (None: the caller's ``__file__``). Raises ValueError naming the module and the row index for a bad row or name.
    """

    name: str
    rows: tuple[dict[str, Any], ...]
    agent: str | None = None
    module: Path | None = None

    def __init__(
        self,
        name: str,
        rows: Iterable[Mapping[str, Any]],
        agent: str | None = None,
        module: str | os.PathLike[str] | None = None,
    ) -> None:
        if module is None:
            caller = sys._getframe(1).f_globals.get("__file__")
            module = caller if isinstance(caller, str) else None
        where = Path(os.path.abspath(module)) if module is not None else None
        place = f"{where}: " if where is not None else ""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"{place}Dataset name {name!r}: use letters, digits, '_', '.', '-' (up to 100, not starting with '.' "
                "or '-')"
            )
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise ValueError(f"{place}Dataset {name!r}: agent must be an agent's name, got {agent!r}")
        checked = tuple(_checked_row(row, index, f"{place}Dataset {name!r}") for index, row in enumerate(rows))
        if not checked:
            raise ValueError(f"{place}Dataset {name!r} has no row")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "rows", checked)
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "module", where)

    def label(self, rootdir: Path) -> str:
        """Its name in reports and node ids: ``<module relative to rootdir>:<name>`` (just ``name`` without a
        module)."""
        if self.module is None:
            return self.name
        module = Path(os.path.relpath(self.module, os.path.abspath(rootdir))).as_posix()
        return f"{module}:{self.name}"

    def text(self) -> str:
        """The ``.jsonl`` text of its rows: one compact JSON object per line, keys sorted (the same bytes in every
        process, so pytest-xdist workers write the same file)."""
        return "".join(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n" for row in self.rows)


def _checked_row(row: object, index: int, where: str) -> dict[str, Any]:
    """``row`` as a plain dict with its id (its ``id``, else ``str(index)``); raises ValueError naming ``where`` and
    the row index for a row that is no mapping, lacks ``responses_create_params`` or is not JSON-serialisable."""
    if not isinstance(row, Mapping):
        raise ValueError(f"{where}: row {index} is {type(row).__name__}, not a dict")
    if not isinstance(row.get("responses_create_params"), Mapping):
        raise ValueError(f"{where}: row {index} has no 'responses_create_params' dict")
    try:
        plain: dict[str, Any] = json.loads(json.dumps(dict(row), allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: row {index} is not JSON-serialisable: {error}") from None
    plain.setdefault("id", str(index))
    return plain


def materialise(dataset: Dataset, run_dir: Path, rootdir: Path) -> Path:
    """Write ``dataset``'s rows to ``<run_dir>/gym-python-datasets/<label>.jsonl`` (once: a file already holding the
    same text is left alone; otherwise written atomically, so concurrent pytest-xdist workers never read half a
    file) and return its path. Raises OSError when it cannot be written."""
    path = file_of(run_dir, dataset.label(rootdir))
    folder = path.parent
    text = dataset.text()
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except OSError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def file_of(run_dir: Path, label: str) -> Path:
    """Where :func:`materialise` writes the Python dataset of this label in the run directory ``run_dir``."""
    return RunPaths(run_dir).python_datasets / (quote(label, safe="") + ".jsonl")


def label_of(path: Path) -> str | None:
    """The label of the Python dataset materialised at ``path`` (:func:`materialise`), or None for any other file."""
    if path.parent.name != FOLDER or path.suffix != ".jsonl":
        return None
    return unquote(path.name[: -len(".jsonl")])
