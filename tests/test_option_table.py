"""The option table: every --gym-x declared once with its gym_x ini twin, and declaring them stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _pytest.config.argparsing import Parser

from pytest_gym_eval.gates import GateMode
from pytest_gym_eval.options import INI_ONLY, NUMBER, OPTIONS, WHOLE, add_options


def test_every_option_has_its_ini_twin_or_says_why_not() -> None:
    flags = [option.flag for option in OPTIONS]
    inis = [option.ini_name for option in OPTIONS if option.ini_name] + [ini.name for ini in INI_ONLY]
    assert len(set(flags)) == len(flags) and len(set(inis)) == len(inis)
    for option in OPTIONS:
        assert option.flag.startswith("--gym-") and option.dest == option.flag[2:].replace("-", "_")
        if option.ini_type is None:
            assert option.no_ini, f"{option.flag} has no ini twin and does not say why"
        else:
            assert not option.no_ini
            assert option.ini_name == option.dest or (option.flag, option.ini_name) == ("--gym-param", "gym_params")
    assert {o.flag for o in OPTIONS if o.ini_type is None} == {"--gym-head-server", "--gym-resume"}
    (gate_on,) = (o for o in OPTIONS if o.flag == "--gym-gate-on")
    assert list(gate_on.choices or ()) == [mode.value for mode in GateMode]


def test_the_loop_registers_each_flag_and_its_twin_with_one_help_and_default() -> None:
    parser = Parser(_ispytest=True)
    add_options(parser)
    declared = {name for group in parser._groups for argument in group.options for name in argument.names()}
    assert declared == {option.flag for option in OPTIONS}
    unset = {"string": "", "linelist": [], "bool": False, NUMBER: None, WHOLE: None}
    for option in OPTIONS:
        (argument,) = (a for g in parser._groups for a in g.options if option.flag in a.names())
        assert argument.attrs()["default"] is None  # unset on the command line: the ini value applies
        assert option.help.replace("%", "%%") in argument.attrs()["help"]
        if option.ini_name is not None:
            help_text, _, default = parser._inidict[option.ini_name]
            assert option.help in help_text and option.flag in help_text
            assert (option.default or "") in help_text and (option.default or "") in argument.attrs()["help"]
            assert default == unset[option.ini_type or ""]
    assert set(parser._inidict) == {o.ini_name for o in OPTIONS if o.ini_name} | {i.name for i in INI_ONLY}


def test_pytest_help_lists_every_option_and_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    text = result.stdout.str()
    for name in [o.flag for o in OPTIONS] + [o.ini_name for o in OPTIONS if o.ini_name] + [i.name for i in INI_ONLY]:
        assert name in text, name


def test_importing_the_options_imports_no_evaluation_or_gym_module() -> None:
    """Every pytest run in an environment with the plugin declares the options; that must not import the
    statistics, gates, sampling or Gym modules (they are imported when a Gym session resolves its options)."""
    code = (
        "import json, sys; import pytest_gym_eval.options; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pytest_gym_eval'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    assert loaded == ["pytest_gym_eval", "pytest_gym_eval.defaults", "pytest_gym_eval.options"]


def test_names_moved_out_of_options_still_import_from_it() -> None:
    from pytest_gym_eval import config_source, gym_options, options, settings

    assert options.GymOptions is gym_options.GymOptions
    assert options.DatasetSettings is settings.DatasetSettings
    assert options.dataset_name is settings.dataset_name
    assert options.check_config_source is config_source.check_config_source
    with pytest.raises(AttributeError, match="no_such_name"):
        options.no_such_name  # noqa: B018
