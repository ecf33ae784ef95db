"""Versions: the Gym releases the plugin supports, and a project's ``requires-python`` against an interpreter's
``(major, minor, patch)``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_gym_eval.provision.errors import ProvisionError

if TYPE_CHECKING:
    from packaging.specifiers import Specifier, SpecifierSet

# `packaging` is imported by the functions that use it: the plugin imports this module when it loads (for the
# default Gym version), and packaging.specifiers alone took ~16 ms to import.

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
"""An interpreter's ``(major, minor, patch)``."""


class Clause(NamedTuple):
    """One clause of a ``requires-python``: its operator, its release numbers and whether it ends in ``.*``
    (``"==3.13.*"`` is ``("==", (3, 13), True)``)."""

    op: str
    release: tuple[int, ...]
    wildcard: bool


def _supported_range_text() -> str:
    newest = f"{NEWEST_GYM_SERIES[0]}.{NEWEST_GYM_SERIES[1]}.x"
    return f"NeMo Gym {OLDEST_GYM_VERSION} to {newest} ({SUPPORTED_GYM_VERSIONS})"


def gym_version_problem(version: str) -> str | None:
    """Why Gym ``version`` (e.g. ``"0.5.1"``, ``"0.7.1rc2"``) is outside :data:`SUPPORTED_GYM_VERSIONS`, or None
    when it is inside, as ``packaging`` compares versions (PEP 440): a pre-release counts as below its release
    (``0.6.0rc1`` is older than 0.6.0) and a pre-release of a supported release is inside (``0.7.1rc2``); a
    version that is no PEP 440 version (``main``) is outside."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        return f"{version!r} is no Gym release number; supported: {_supported_range_text()}"
    if not SpecifierSet(SUPPORTED_GYM_VERSIONS).contains(parsed, prereleases=True):
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


ENVIRONMENT_SERVERS_SINCE = (0, 7)
"""The first Gym release series with environment servers (``environment_servers/legacy_agent``, ...). Gym 0.6.x has
none: there the agent server's own ``POST /run`` takes a row (what that release's ``gym eval run`` posts to), and a
config block naming an environment server fails ``gym env start``."""


def has_environment_servers(version: str | None) -> bool:
    """Whether Gym ``version`` (a checkout's, :class:`GymCheckout` ``.version``) has environment servers
    (:data:`ENVIRONMENT_SERVERS_SINCE`, pre-releases of 0.7.0 included). A version that cannot be read (None, or no
    release number) counts as the newest, as :func:`require_supported_gym` lets such a checkout through."""
    from packaging.version import InvalidVersion, Version

    if version is None:
        return True
    try:
        release = Version(version).release
    except InvalidVersion:
        return True
    return release[:2] >= ENVIRONMENT_SERVERS_SINCE


def _specifiers(spec: str) -> list[Specifier]:
    """The clauses of ``spec`` in order, parsed by ``packaging``; raises ``ValueError`` for a clause it cannot
    parse (an empty one among them) and for one an interpreter's ``(major, minor, patch)`` cannot be judged by:
    ``===``, or a version with an epoch, a pre-, post- or dev-release or a local part."""
    from packaging.specifiers import InvalidSpecifier, Specifier
    from packaging.version import InvalidVersion, Version

    specifiers = []
    for raw in spec.split(","):
        text = raw.strip()
        try:
            specifier = Specifier(text)
            version = Version(specifier.version.removesuffix(".*"))
        except (InvalidSpecifier, InvalidVersion):
            version = None
        numeric = version is not None and not (
            version.epoch or version.is_prerelease or version.is_postrelease or version.local
        )
        if not numeric or specifier.operator == "===":
            raise ValueError(f"cannot parse requires-python clause {text!r} in {spec!r}")
        specifiers.append(specifier)
    return specifiers


def requires_python_specifiers(spec: str) -> SpecifierSet:
    """A ``requires-python`` such as ``">=3.13.14"`` or ``">=3.10, <4"`` as a ``packaging`` specifier set.

    Raises ``ValueError`` for what ``packaging`` cannot parse and for what an interpreter's ``(major, minor,
    patch)`` cannot be judged by (``===``, pre-releases, empty clauses; see :func:`parse_requires_python`)."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(",".join(str(specifier) for specifier in _specifiers(spec)))


def parse_requires_python(spec: str) -> list[Clause]:
    """The clauses of a ``requires-python`` in order, e.g. ``[(">=", (3, 10), False), ("<", (4,), False)]`` for
    ``">=3.10, <4"``: the operators ``>= > <= < == != ~=`` (and ``==X.Y.*`` / ``!=X.Y.*``) on numeric versions,
    parsed by ``packaging``. Raises ``ValueError`` for anything else (pre-releases, ``===``, empty clauses)."""
    from packaging.version import Version

    return [
        Clause(s.operator, Version(s.version.removesuffix(".*")).release, s.version.endswith(".*"))
        for s in _specifiers(spec)
    ]


def satisfies(version: Sequence[int], specifiers: SpecifierSet) -> bool:
    """Whether an interpreter's ``version`` (``(major, minor, patch)``, missing parts 0) is in ``specifiers``."""
    from packaging.version import Version

    padded = (*version, 0, 0, 0)[:3]
    return Version(format_version(padded)) in specifiers


def python_satisfies(version: Sequence[int], spec: str | None) -> bool:
    """Whether ``version`` (``(major, minor, patch)``) satisfies ``spec``; ``None`` or ``""`` allows all.

    Raises ``ValueError`` when ``spec`` cannot be parsed (see :func:`requires_python_specifiers`)."""
    if not spec or not spec.strip():
        return True
    return satisfies(version, requires_python_specifiers(spec))


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


def lower_bound(specifiers: SpecifierSet) -> Version3 | None:
    """The highest ``>=`` or ``~=`` bound of ``specifiers`` as ``(major, minor, patch)`` (missing parts 0; ``>=3.13``
    is ``(3, 13, 0)``), or None when there is none."""
    from packaging.version import Version

    bounds = [
        (*Version(s.version).release, 0, 0, 0)[:3]
        for s in specifiers
        if s.operator in (">=", "~=") and not s.version.endswith(".*")
    ]
    if not bounds:
        return None
    best = max(bounds)
    return (best[0], best[1], best[2])


def format_version(version: Sequence[int]) -> str:
    """``(3, 13, 0)`` as ``"3.13.0"``."""
    return ".".join(str(part) for part in version)
