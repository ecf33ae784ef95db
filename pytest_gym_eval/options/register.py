"""The plugin's options: every ``--gym-*`` command-line option declared once, with its ``gym_*`` ini twin, in one
table (:data:`~pytest_gym_eval.options.table.OPTIONS`, written in :mod:`pytest_gym_eval.options.table`) that one loop
registers here (:func:`add_options`).

Every value is looked up as: command line, then (for per-dataset values) the dataset's line in
``gym_dataset_settings``, then the ini option, then the default.
:class:`~pytest_gym_eval.options.gym_options.GymOptions` holds the result for a Gym session;
:mod:`pytest_gym_eval.options.settings` the per-dataset settings.

Imported on every pytest run in an environment with the plugin, so it imports only the standard library, pytest
and the option table (import ``GymOptions`` and the settings from their own modules).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gym_eval.options.table import INI_ONLY, NUMBER, OPTIONS, WHOLE

TYPED_INI = tuple(pytest.version_tuple[:2]) >= (8, 4)
"""Whether this pytest declares ``int`` and ``float`` ini options (8.4 and later); older ones read them as
strings, which the plugin parses itself (the same values, the same errors)."""

_UNSET = {"string": "", "linelist": [], "bool": False, NUMBER: None, WHOLE: None}
"""Each ini type's value when the ini file does not set it (what resolution reads as "not given")."""


def add_options(parser: pytest.Parser) -> None:
    """Declare every option of :data:`OPTIONS` with its ini twin, and :data:`INI_ONLY` (pytest's
    ``pytest_addoption``)."""
    group = parser.getgroup("gym-eval", "NeMo Gym evaluations (pytest-gym-eval)")
    for option in OPTIONS:
        arguments = {"type": option.type, "action": option.action, "metavar": option.metavar}
        arguments |= {"choices": option.choices, "nargs": option.nargs, "const": option.const}
        group.addoption(
            option.flag,
            dest=option.dest,
            default=None,
            help=option.flag_help(),
            **{key: value for key, value in arguments.items() if value is not None},
        )
        if option.ini_type is not None:
            _add_ini(parser, option.ini_name or option.dest, option.ini_help(), option.ini_type)
    for ini in INI_ONLY:
        _add_ini(parser, ini.name, ini.help, ini.ini_type)


def _add_ini(parser: pytest.Parser, name: str, help: str, ini_type: str) -> None:
    """One ``gym_*`` ini option; :data:`NUMBER` and :data:`WHOLE` become pytest's typed ini where it has them."""
    # Any: the Literal type pytest declares for ``type`` differs between its versions.
    typed: Any = ini_type
    if ini_type in (NUMBER, WHOLE):
        typed = ("float" if ini_type == NUMBER else "int") if TYPED_INI else "string"
    parser.addini(name, help, type=typed, default=_UNSET[ini_type])
