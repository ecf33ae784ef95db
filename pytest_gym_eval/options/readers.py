"""The option readers :class:`~pytest_gym_eval.options.gym_options.GymOptions` resolves with: each reads one option
(or a group) from the command line or the ini file, checks it and turns it into a path, number, gate, policy or
sampling value; a bad value raises :class:`pytest.UsageError` naming the option (``--gym-shard``) or ini option
(``gym_shard``) it came from, with anything that could be a secret redacted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.history.urls import is_postgres_url, target_problem
from pytest_gym_eval.options.settings import (
    DatasetSettings,
    _number,
    _positive_int,
    _reward_range,
    gates_of,
)
from pytest_gym_eval.outcomes.usage import Price, parse_price
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis
from pytest_gym_eval.stats.gate_kinds import KINDS
from pytest_gym_eval.stats.gates import Gate, GateSource
from pytest_gym_eval.tasks.model_servers import ModelServerBinding, ModelServerSpecError, parse_model_servers
from pytest_gym_eval.tasks.models import Policy, PolicySpecError, order_policies, parse_policy
from pytest_gym_eval.tasks.sampling import Sampling, SamplingError, parse_params
from pytest_gym_eval.tasks.shard import Shard, parse_shard


def settings_layer(given: Callable[[str], Any], source: GateSource) -> DatasetSettings:
    """The per-dataset settings one session-wide source sets (the command line or the ini file), ``given(dest)``
    reading its options (None, "" or []: unset): the agent, repeats, pass threshold and reward range, and the gates
    of every kind of :data:`~pytest_gym_eval.stats.gate_kinds.KINDS` (each carrying ``source``). Raises
    :class:`pytest.UsageError` naming the option (``--gym-min-pass-rate``) or ini option (``gym_min_pass_rate``)."""

    def where(dest: str) -> str:
        return "--" + dest.replace("_", "-") if source is GateSource.COMMAND_LINE else dest

    gates: list[Gate] = []
    for kind in KINDS:
        value = given(kind.dest)
        texts = (value or []) if kind.repeatable else [value]
        gates += gates_of(kind, texts, where(kind.dest), source)
    return DatasetSettings(
        agent=given("gym_agent") or None,
        repeats=_positive_int(given("gym_repeats"), where("gym_repeats")),
        pass_threshold=_number(given("gym_pass_threshold"), where("gym_pass_threshold")),
        given=tuple(gates),
        reward_range=_reward_range(given("gym_reward_range"), where("gym_reward_range")),
        source=source,
    )


COMPARISON_OPTIONS = (
    (Hypothesis.NON_INFERIORITY, "gym_max_regression"),
    (Hypothesis.SUPERIORITY, "gym_min_improvement"),
)
"""Each comparison gate's option (``dest``; ``--gym-max-regression``, ini ``gym_max_regression``)."""


def _comparison_layer(given: Callable[[str], Any], source: GateSource) -> list[ComparisonGate]:
    """The comparison gates one source sets, ``given(dest)`` reading its options (None: unset); raises
    :class:`pytest.UsageError` naming the option (``--gym-min-improvement`` or ini ``gym_min_improvement``) for
    a margin that is no number or is negative."""
    gates = []
    for hypothesis, dest in COMPARISON_OPTIONS:
        where = "--" + dest.replace("_", "-") if source is GateSource.COMMAND_LINE else dest
        margin = _number(given(dest), where)
        if margin is None:
            continue
        if margin < 0:
            raise pytest.UsageError(f"{where}: expected a margin >= 0, got {margin:g}")
        gates.append(ComparisonGate(hypothesis, margin, source))
    return gates


def _inner_loop(config: pytest.Config, ini_value: Any) -> tuple[float | None, Path | None]:
    """``--gym-keep-alive`` (or ini ``gym_keep_alive``) as idle seconds (None: off) and ``--gym-resume`` as an
    absolute path; raises :class:`pytest.UsageError` for a negative ini value, ``--gym-keep-alive`` together with
    ``--gym-head-server``, or a resume folder that is not there."""
    given = config.getoption("gym_keep_alive", default=None)
    seconds = given if given is not None else _number(ini_value("gym_keep_alive"), "gym_keep_alive")
    if seconds is not None and seconds < 0:
        raise pytest.UsageError(f"gym_keep_alive: expected idle seconds >= 0, got {seconds:g}")
    keep_alive = seconds or None
    if keep_alive and config.getoption("gym_head_server", default=None):
        raise pytest.UsageError(
            "--gym-keep-alive and --gym-head-server exclude each other: attached servers are never started, so "
            "there is nothing to keep warm"
        )
    text = config.getoption("gym_resume", default=None)
    if text and "://" in text:
        raise pytest.UsageError(f"--gym-resume: expected a run directory, got a URL: {redact_value(text)!r}")
    resume = Path(os.path.abspath(os.path.expanduser(text))) if text else None
    if resume is not None and not resume.is_dir():
        raise pytest.UsageError(f"--gym-resume: no such run directory: {resume}")
    return keep_alive, resume


def sampling_from_config(config: pytest.Config) -> Sampling:
    """The session's :class:`~pytest_gym_eval.tasks.sampling.Sampling` (command line over ini); raises
    :class:`pytest.UsageError` naming the option or ini key for a bad value."""

    def given(dest: str, ini: str, convert: type[float] | type[int]) -> Any:
        value = config.getoption(dest, default=None)
        if value is not None:
            return value
        text = str(config.getini(ini) or "").strip()
        if not text:
            return None
        try:
            return convert(text)
        except ValueError:
            kind = "a whole number" if convert is int else "a number"
            raise pytest.UsageError(f"{ini}: expected {kind}, got {text!r}") from None

    try:
        cli_params = config.getoption("gym_param", default=None)
        params = (
            parse_params(cli_params, "--gym-param")
            if cli_params
            else parse_params([line for line in config.getini("gym_params") if line.strip()], "gym_params")
        )
        return Sampling(
            temperature=given("gym_temperature", "gym_temperature", float),
            top_p=given("gym_top_p", "gym_top_p", float),
            max_output_tokens=given("gym_max_output_tokens", "gym_max_output_tokens", int),
            seed=given("gym_seed", "gym_seed", int),
            params=params,
        )
    except SamplingError as error:
        raise pytest.UsageError(str(error)) from None


def price_from_config(config: pytest.Config) -> Price | None:
    """``--gym-price-per-mtok`` (or ini ``gym_price_per_mtok``) as a :class:`~pytest_gym_eval.outcomes.usage.Price`,
    None
    when neither is given; raises :class:`pytest.UsageError` for a bad value."""
    text = config.getoption("gym_price_per_mtok", default=None)
    where = "--gym-price-per-mtok"
    if text is None:
        text, where = str(config.getini("gym_price_per_mtok") or "").strip() or None, "gym_price_per_mtok"
    if text is None:
        return None
    try:
        return parse_price(text, where)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def _host_port(text: str | None) -> tuple[str, int] | None:
    """``--gym-head-server``: ``HOST:PORT``, a host name or address (no scheme, path or credentials: Gym's head
    server takes none). Raises :class:`pytest.UsageError` naming the option, its value shown without a password."""
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or any(c in host for c in "/@"):
        raise pytest.UsageError(
            f"--gym-head-server: expected HOST:PORT (no scheme or credentials), got {_without_userinfo(text)!r}"
        )
    return host, int(port)


def _without_userinfo(text: str) -> str:
    """``text`` with whatever could be a password masked: a URL's secrets (:func:`redact_value`), and the
    ``user:password@`` of a bare ``user:password@host:port``."""
    shown = redact_value(text)
    scheme, sep, rest = shown.rpartition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def _shard(text: str | None) -> Shard | None:
    """``--gym-shard`` / ini ``gym_shard``; raises :class:`pytest.UsageError` naming the option."""
    if not text:
        return None
    try:
        return parse_shard(str(text))
    except ValueError as error:
        raise pytest.UsageError(f"--gym-shard (ini gym_shard): {error}") from None


def _ray_address(text: str | None, head_server: tuple[str, int] | None) -> str | None:
    """``--gym-ray-address`` / ini ``gym_ray_address``: ``HOST:PORT`` (a ``ray://HOST:PORT`` Ray Client address
    passes too). Raises :class:`pytest.UsageError` for another form, and with ``--gym-head-server`` (attached
    servers already run on whatever Ray they were started with)."""
    if not text:
        return None
    address = str(text).strip()
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/@"):
        raise pytest.UsageError(
            "--gym-ray-address (ini gym_ray_address): expected HOST:PORT (no credentials), got "
            f"{_without_userinfo(address)!r}"
        )
    if head_server is not None:
        raise pytest.UsageError(
            "--gym-ray-address cannot be combined with --gym-head-server: attached Gym servers already run on the "
            "Ray cluster they were started with"
        )
    return address


def file_path(text: str, base: Path, option: str) -> Path:
    """An option's file or folder path ``text``, relative to ``base`` (the working directory for the command line,
    the ini file's folder for the ini), ``~`` expanded, made absolute. Raises :class:`pytest.UsageError` naming
    ``option`` for a URL (``http://u:pw@h/x.json``): a path made of it would lose its ``//`` and be echoed as a
    file that does not exist (its value is shown with its secrets redacted)."""
    if "://" in text:
        raise pytest.UsageError(f"{option}: expected a file path, got a URL: {redact_value(text)!r}")
    return (base / os.path.expanduser(text)).resolve()


def _history_target(config: pytest.Config, ini_value: Any, inifile_dir: Path) -> str | None:
    """``--gym-history`` (or ini ``gym_history``): a ``postgresql://`` URL unchanged, a path made absolute (from
    the command line relative to the working directory, from the ini file relative to its folder); None unset.
    Raises :class:`pytest.UsageError` naming the option for a URL of another scheme or a malformed PostgreSQL URL
    (:func:`~pytest_gym_eval.history.urls.target_problem`, its value redacted)."""
    given, option = config.getoption("gym_history", default=None), "--gym-history"
    base = Path.cwd()
    if not given:
        given, base, option = ini_value("gym_history"), inifile_dir, "gym_history"
    if not given:
        return None
    text = str(given).strip()
    if (problem := target_problem(text)) is not None:
        raise pytest.UsageError(f"{option}: {problem}")
    return text if is_postgres_url(text) else str(file_path(text, base, option))


def _policies(config: pytest.Config, ini_value: Any, inifile_dir: Path, api_key_env: str) -> tuple[Policy, ...]:
    """``--gym-policy`` (or ini ``gym_policy``), the baseline (``--gym-baseline-policy``) first; raises
    :class:`pytest.UsageError` naming the option and the bad value."""
    given = config.getoption("gym_policy", default=None)
    texts, option, base = (
        (given, "--gym-policy", Path.cwd()) if given else (ini_value("gym_policy"), "gym_policy", inifile_dir)
    )
    baseline = config.getoption("gym_baseline_policy", default=None) or ini_value("gym_baseline_policy")
    if not texts:
        if baseline:
            raise pytest.UsageError(f"--gym-baseline-policy={baseline}: no --gym-policy named")
        return ()
    try:
        return order_policies([parse_policy(text, base, api_key_env) for text in texts], baseline)
    except PolicySpecError as error:
        raise pytest.UsageError(f"{option}: {error}") from None


def _by_policy(
    bindings: tuple[ModelServerBinding, ...], policies: Sequence[Policy]
) -> tuple[tuple[ModelServerBinding, ...], tuple[ModelServerBinding, ...]]:
    """``bindings`` split into those of every policy and the ``NAME@POLICY`` ones; raises :class:`pytest.UsageError`
    for a ``POLICY`` that is no ``--gym-policy`` or is the baseline (whose rollouts run the environments
    themselves: bound without ``@``)."""
    names = [policy.name for policy in policies]
    for binding in bindings:
        if binding.for_policy is None:
            continue
        where = f"--gym-model-server {binding.name}@{binding.for_policy}"
        if binding.for_policy not in names:
            raise pytest.UsageError(
                f"{where}: {binding.for_policy!r} is no --gym-policy ({', '.join(names) if names else 'none named'})"
            )
        if binding.for_policy == names[0]:
            raise pytest.UsageError(
                f"{where}: {names[0]!r} is the baseline policy, whose rollouts run the environments themselves: bind "
                f"its {binding.name} without @ (every other policy without a binding of its own shares it)"
            )
    return tuple(b for b in bindings if b.for_policy is None), tuple(b for b in bindings if b.for_policy)


def _model_servers(config: pytest.Config, ini_value: Any, inifile_dir: Path) -> tuple[ModelServerBinding, ...]:
    """``--gym-model-server`` (or ini ``gym_model_servers``); raises :class:`pytest.UsageError` naming the option and
    the bad value."""
    given = config.getoption("gym_model_server", default=None)
    if given:
        texts, option, base = given, "--gym-model-server", Path.cwd()
    else:
        texts, option, base = ini_value("gym_model_servers"), "gym_model_servers", inifile_dir
    try:
        return parse_model_servers(texts or (), base, option)
    except ModelServerSpecError as error:
        raise pytest.UsageError(str(error)) from None


def _policy_clash(
    value: Any, replay: tuple[Path, ...], head_server: object, keep_alive: object, resume: object
) -> str | None:
    """The first option given that a session comparing policies cannot use (each policy names its own endpoint or
    recordings; attached, warm and resumed runs serve one model), or None."""
    clashes = {
        "--gym-model-url": value("gym_model_url"),
        "--gym-model": value("gym_model"),
        "--gym-replay": replay,
        "--gym-head-server": head_server,
        "--gym-keep-alive": keep_alive,
        "--gym-resume": resume,
    }
    return next((name for name, given in clashes.items() if given), None)
