"""The plugin's options: every ``--gym-*`` command-line option declared once, with its ``gym_*`` ini twin, in one
table (:data:`OPTIONS`, written in :mod:`.option_table`) that one loop registers here (:func:`add_options`).

Every value is looked up as: command line, then (for per-dataset values) the dataset's line in
``gym_dataset_settings``, then the ini option, then the default.
:class:`~pytest_gym_eval.options.gym_options.GymOptions`
holds the result for a Gym session; :mod:`pytest_gym_eval.options.settings` the per-dataset settings.

Imported on every pytest run in an environment with the plugin, so it imports only the standard library, pytest
and the defaults; ``GymOptions`` and the settings are imported from here on first use (``from
pytest_gym_eval.options.register import GymOptions`` keeps working).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval.options.table import INI_ONLY as INI_ONLY
from pytest_gym_eval.options.table import NUMBER as NUMBER
from pytest_gym_eval.options.table import OPTIONS as OPTIONS
from pytest_gym_eval.options.table import WHOLE as WHOLE
from pytest_gym_eval.options.table import IniOption as IniOption
from pytest_gym_eval.options.table import Option as Option

if TYPE_CHECKING:  # imported on first use, see _LAZY
    from pytest_gym_eval.options.config_source import check_config_source
    from pytest_gym_eval.options.gym_options import GymOptions, price_from_config, sampling_from_config
    from pytest_gym_eval.options.settings import (
        DatasetSettings,
        dataset_name,
        glob_matches,
        parse_dataset_settings,
        parse_pass_at_k,
    )

__all__ = [
    "INI_ONLY",
    "NUMBER",
    "OPTIONS",
    "WHOLE",
    "DatasetSettings",
    "GymOptions",
    "IniOption",
    "Option",
    "add_options",
    "check_config_source",
    "dataset_name",
    "glob_matches",
    "parse_dataset_settings",
    "parse_pass_at_k",
    "price_from_config",
    "sampling_from_config",
]

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


_LAZY = {
    "GymOptions": "pytest_gym_eval.options.gym_options",
    "sampling_from_config": "pytest_gym_eval.options.gym_options",
    "price_from_config": "pytest_gym_eval.options.gym_options",
    "DatasetSettings": "pytest_gym_eval.options.settings",
    "parse_dataset_settings": "pytest_gym_eval.options.settings",
    "parse_pass_at_k": "pytest_gym_eval.options.settings",
    "dataset_name": "pytest_gym_eval.options.settings",
    "check_config_source": "pytest_gym_eval.options.config_source",
    "glob_matches": "pytest_gym_eval.options.settings",
}
"""Names this module used to define, imported from where they live now on first use (importing them here would
make every pytest run pay for the gates, statistics and sampling modules)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
