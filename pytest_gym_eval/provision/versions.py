"""Versions: the Gym releases the plugin supports, and a project's ``requires-python`` against an interpreter's
``(major, minor, patch)``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_gym_eval.provision.errors import ProvisionError

DEFAULT_GYM_VERSION = "0.7.0"
OLDEST_GYM_VERSION = "0.6.0"
"""The oldest Gym release the plugin supports: ``.ci/run`` runs the main job on it as on the default release
(measured: the mcqa example's mean reward 0.75 on both). Gym 0.5.1 ran that example alike too, but 0.5.x routes
rows differently under ``--agent`` and retries a 429 answer without bound, unlike what the plugin is built and
tested on, so it is outside the range."""
NEWEST_GYM_SERIES = (0, 7)
"""The newest Gym minor series the plugin supports (every 0.7.x release)."""
SUPPORTED_GYM_VERSIONS = f">={OLDEST_GYM_VERSION}, <{NEWEST_GYM_SERIES[0]}.{NEWEST_GYM_SERIES[1] + 1}"
"""The supported Gym releases as a version specifier (``>=0.6.0, <0.8``): 0.6.0 to 0.7.x."""
Version3 = tuple[int, int, int]


class _Clause(NamedTuple):
    op: str
    release: tuple[int, ...]
    wildcard: bool


_GYM_RELEASE_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(.*)$")


def _supported_range_text() -> str:
    newest = f"{NEWEST_GYM_SERIES[0]}.{NEWEST_GYM_SERIES[1]}.x"
    return f"NeMo Gym {OLDEST_GYM_VERSION} to {newest} ({SUPPORTED_GYM_VERSIONS})"


def gym_version_problem(version: str) -> str | None:
    """Why Gym ``version`` (e.g. ``"0.5.1"``, ``"0.7.1rc2"``) is outside :data:`SUPPORTED_GYM_VERSIONS`, or None
    when it is inside. A pre-release counts as below its release (``0.6.0rc1`` is older than 0.6.0); a version
    that is no ``MAJOR.MINOR[.PATCH]...`` string is outside."""
    match = _GYM_RELEASE_RE.match(version.strip())
    oldest = tuple(int(part) for part in OLDEST_GYM_VERSION.split("."))
    if match is None:
        return f"{version!r} is no Gym release number; supported: {_supported_range_text()}"
    release = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    suffix = match.group(4).lstrip(".-_").lower()
    pre = bool(suffix) and not suffix.startswith(("post", "+"))
    too_old = release < oldest or (release == oldest and pre)
    too_new = release[:2] > NEWEST_GYM_SERIES
    if too_old or too_new:
        return f"Gym {version} is not supported: this pytest-gym-eval supports {_supported_range_text()}"
    return None


def require_supported_gym(version: str | None, where: str) -> None:
    """Raise ``ProvisionError`` when Gym ``version`` is outside :data:`SUPPORTED_GYM_VERSIONS`, naming ``where``
    it came from (``--gym-version``, a checkout's path) and the supported range. ``None`` (a checkout whose
    version cannot be read) passes."""
    if version is None:
        return
    problem = gym_version_problem(version)
    if problem is not None:
        raise ProvisionError(
            f"{where}: {problem}. Provision a supported one: `python -m pytest_gym_eval provision "
            f"--gym-version {DEFAULT_GYM_VERSION}` (or --gym-version {OLDEST_GYM_VERSION})"
        )


def parse_requires_python(spec: str) -> list[_Clause]:
    """Parse a simple ``requires-python`` such as ``">=3.13.14"`` or ``">=3.10, <4"``.

    Returns ``(op, release, wildcard)`` clauses, e.g. ``[(">=", (3, 13, 14), False)]``. Supports the operators
    ``>= > <= < == != ~=`` (and ``==X.Y.*`` / ``!=X.Y.*``) on purely numeric versions.
    Raises ``ValueError`` for anything else (pre-releases, ``===``, empty clauses).
    """
    clauses: list[_Clause] = []
    for raw in spec.split(","):
        text = raw.strip()
        match = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?", text)
        if not match:
            raise ValueError(f"cannot parse requires-python clause {text!r} in {spec!r}")
        op, release, star = (
            match.group(1),
            tuple(int(p) for p in match.group(2).split(".")),
            bool(match.group(3)),
        )
        if star and op not in ("==", "!="):
            raise ValueError(f"wildcard only allowed with == or != in {spec!r}")
        if op == "~=" and len(release) < 2:
            raise ValueError(f"~= needs at least two version components in {spec!r}")
        clauses.append(_Clause(op, release, star))
    return clauses


def _pad(release: Sequence[int], length: int = 3) -> tuple[int, ...]:
    return tuple(release) + (0,) * max(0, length - len(release))


def _clause_ok(version: Version3, clause: _Clause) -> bool:
    op, release, wildcard = clause
    if wildcard:
        prefix_match = version[: len(release)] == release
        return prefix_match if op == "==" else not prefix_match
    length = max(len(release), 3)
    have, want = _pad(version, length), _pad(release, length)
    if op == "~=":
        return have >= want and version[: len(release) - 1] == release[:-1]
    return {
        ">=": have >= want,
        ">": have > want,
        "<=": have <= want,
        "<": have < want,
        "==": have == want,
        "!=": have != want,
    }[op]


def python_satisfies(version: Sequence[int], spec: str | None) -> bool:
    """Whether ``version`` (``(major, minor, patch)``) satisfies ``spec``; ``None`` or ``""`` allows all.

    Raises ``ValueError`` when ``spec`` cannot be parsed (see ``parse_requires_python``)."""
    if not spec or not spec.strip():
        return True
    v = tuple(_pad(version))[:3]
    version3: Version3 = (v[0], v[1], v[2])
    return all(_clause_ok(version3, clause) for clause in parse_requires_python(spec))


def read_requires_python(pyproject: Path) -> str | None:
    """The ``[project] requires-python`` of a ``pyproject.toml`` (``None`` when absent).

    Uses ``tomllib`` when the running Python has it, else a regex on the line. Raises ``OSError`` when the
    file cannot be read."""
    text = pyproject.read_text(encoding="utf-8")
    return project_field(text, "requires-python")


def project_field(pyproject_text: str, key: str) -> str | None:
    try:
        tomllib: Any = importlib.import_module("tomllib")
    except ImportError:  # Python 3.10: a regex on the line is enough for simple string fields
        match = re.search(rf"""^\s*{re.escape(key)}\s*=\s*["']([^"']*)["']""", pyproject_text, re.M)
        return match.group(1) if match else None
    try:
        project = tomllib.loads(pyproject_text).get("project", {})
    except ValueError:  # tomllib.TOMLDecodeError
        return None
    value = project.get(key) if isinstance(project, dict) else None
    return value if isinstance(value, str) else None


def lower_bound(clauses: Sequence[_Clause]) -> Version3 | None:
    bounds = [_pad(c.release) for c in clauses if c.op in (">=", "~=") and not c.wildcard]
    if not bounds:
        return None
    best = max(bounds)
    return (best[0], best[1], best[2])


def format_version(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)
