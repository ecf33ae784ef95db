"""The option table: every --gym-x declared once with its gym_x ini twin, and declaring them stays cheap."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from _pytest.config.argparsing import Parser

from pytest_gym_eval.options.register import add_options
from pytest_gym_eval.options.table import INI_ONLY, NUMBER, OPTIONS, WHOLE, Option
from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.gates import GateMode


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
            plural = {("--gym-param", "gym_params"), ("--gym-model-server", "gym_model_servers")}
            assert option.ini_name == option.dest or (option.flag, option.ini_name) in plural
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
        "import json, sys; import pytest_gym_eval.options.register; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pytest_gym_eval'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    assert loaded == [
        "pytest_gym_eval",
        "pytest_gym_eval.core",
        "pytest_gym_eval.core.defaults",
        "pytest_gym_eval.options",
        "pytest_gym_eval.options.register",
        "pytest_gym_eval.options.table",
        "pytest_gym_eval.stats",
        "pytest_gym_eval.stats.gate_kinds",  # the gate kinds' options: data, their statistics load on use
    ]


def test_register_keeps_no_old_import_path_alive() -> None:
    """``options.register`` registers the options; the names it once re-exported (``GymOptions``, the settings,
    the table's classes) are imported from the modules that define them, not through a lazy ``__getattr__``."""
    from pytest_gym_eval.options import register

    assert not hasattr(register, "__getattr__")
    for name in ("GymOptions", "DatasetSettings", "dataset_name", "check_config_source", "Option", "IniOption"):
        assert not hasattr(register, name), name


SAMPLE = {
    "--gym-checkout": "gymco",
    "--gym-repeats": "3",
    "--gym-pass-threshold": "0.5",
    "--gym-agent": "my_agent",
    "--gym-model-url": "http://127.0.0.1:9/v1",
    "--gym-model": "my-model",
    "--gym-model-type": "vllm_model",
    "--gym-api-key-env": "MY_KEY",
    "--gym-replay": "rec.jsonl",
    "--gym-policy": "a=replay:rec.jsonl\n    b=replay:rec.jsonl",
    "--gym-baseline-policy": "b",
    "--gym-model-server": "judge_model=http://127.0.0.1:9/v1,model=j,key=J,type=chat\n    genrm_model=policy",
    "--gym-run-dir": "runs",
    "--gym-startup-timeout": "5",
    "--gym-rollout-timeout": "7",
    "--gym-concurrency": "2",
    **{  # every gate kind's option: a value of its form
        kind.flag: {gate_kinds.NUMBER: "0.3", gate_kinds.PASS_AT: "2:0.5", gate_kinds.NAMED: "boxed:0.9"}[kind.form]
        for kind in gate_kinds.KINDS
    },
    "--gym-gate-on": "lower-bound",
    "--gym-inconclusive": "pass",
    "--gym-familywise": "holm",
    "--gym-report": "out.json",
    "--gym-baseline": "base.json",
    "--gym-max-drop": "0.1",
    "--gym-max-regression": "0.05",
    "--gym-min-improvement": "0.02",
    "--gym-max-regressed-tasks": "1",
    "--gym-fail-on-flip": "true",
    "--gym-adaptive": "true",
    "--gym-min-repeats": "3",
    "--gym-reward-range": "0:2",
    "--gym-html": "page.html",
    "--gym-markdown": "page.md",
    "--gym-history": "history.db",
    "--gym-quarantine": "quarantine.txt",
    "--gym-keep-alive": "60",
    "--gym-shard": "1/2",
    "--gym-ray-address": "127.0.0.1:6379",
    "--gym-temperature": "0.2",
    "--gym-top-p": "0.9",
    "--gym-max-output-tokens": "100",
    "--gym-seed": "1",
    "--gym-param": "effort=1",
    "--gym-price-per-mtok": "0.1:0.2",
    "--gym-latency": "true",
}
"""A value for each option with an ini twin (the same text on the command line and in the ini file; a value of
several lines is one flag a line on the command line)."""

TWO_POLICIES = ["--gym-policy=a=replay:rec.jsonl", "--gym-policy=b=replay:rec.jsonl"]
COMPANIONS = {
    "--gym-baseline-policy": TWO_POLICIES,
    "--gym-max-regression": TWO_POLICIES,
    "--gym-min-improvement": TWO_POLICIES,
}
"""The command-line options an option needs beside it (in every session the test resolves)."""


def test_every_twin_has_a_sample() -> None:
    assert set(SAMPLE) == {option.flag for option in OPTIONS if option.ini_name}


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.ini_name], ids=lambda o: o.flag)
def test_a_value_resolves_the_same_from_the_command_line_and_from_the_ini_file(
    pytester: pytest.Pytester, option: Option
) -> None:
    from pytest_gym_eval.options.gym_options import GymOptions

    (pytester.path / "base.json").write_text(json.dumps({"schema_version": 1, "datasets": [], "rollouts": []}))
    (pytester.path / "rec.jsonl").write_text("{}\n")
    (pytester.path / "quarantine.txt").write_text("# dataset task expires reason\n")
    text = SAMPLE[option.flag]
    lines = [line.strip() for line in text.splitlines()]
    flag = [option.flag] if option.action == "store_true" else [f"{option.flag}={line}" for line in lines]
    model_type = [] if option.flag == "--gym-model-type" else ["--gym-model-type=vllm_model"]  # --gym-seed needs it

    def resolved(*args: str) -> GymOptions:
        config = pytester.parseconfig(*model_type, *COMPANIONS.get(option.flag, ()), *args)
        found = GymOptions.from_config(config)
        per_dataset = found.cli.over(found.ini)
        return dataclasses.replace(found, cli=per_dataset, ini=per_dataset)

    default = resolved()
    from_cli = resolved(*flag)
    pytester.makeini(f"[pytest]\n{option.ini_name} = {text}\n")
    from_ini = resolved()
    assert from_cli == from_ini
    assert from_cli != default
