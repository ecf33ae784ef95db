"""The session's resolved options, :class:`GymOptions`: every ``--gym-*`` option and ``gym_*`` ini option looked up
as command line, then ini file, then default, checked, and turned into paths, numbers, gates and sampling values.

Resolved once per Gym session (:meth:`GymOptions.from_config`); the declarations are in
:mod:`pytest_gym_eval.options.register`, the per-dataset settings in :mod:`pytest_gym_eval.options.settings`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.core.defaults import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MIN_REPEATS,
    DEFAULT_MODEL_TYPE,
    DEFAULT_ROLLOUT_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
)
from pytest_gym_eval.history.urls import is_postgres_url, target_problem
from pytest_gym_eval.options.settings import (
    DatasetSettings,
    _count,
    _match_names,
    _number,
    _positive_int,
    _reward_range,
    dataset_name,
    gates_of,
    glob_matches,
    parse_dataset_settings,
)
from pytest_gym_eval.outcomes.usage import Price, parse_price
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, comparison_gates, margin_problem
from pytest_gym_eval.stats.gate_kinds import KINDS
from pytest_gym_eval.stats.gates import HOLM, Gate, GateMode, GateSource, merge_gates
from pytest_gym_eval.stats.sequential import RewardRange
from pytest_gym_eval.tasks.dataset import DEFAULT_ID_FIELDS
from pytest_gym_eval.tasks.model_servers import (
    ModelServerBinding,
    ModelServerSpecError,
    merge_bindings,
    parse_model_servers,
)
from pytest_gym_eval.tasks.models import MODEL_FIELDS, Policy, PolicySpecError, order_policies, parse_policy
from pytest_gym_eval.tasks.sampling import Sampling, SamplingError, parse_params
from pytest_gym_eval.tasks.shard import Shard, parse_shard


@dataclass(frozen=True)
class GymOptions:
    """The session's resolved options (command line over ini over defaults).

    Times are in seconds. ``cli`` holds the settings given on the command line (which beat a dataset's own),
    ``ini`` those from the ini file (which a dataset's own beat), ``datasets`` the ``(glob, settings)`` lines.
    """

    rootdir: Path
    checkout: Path | None = None
    agent: str | None = None
    model_url: str | None = None
    model: str | None = None
    model_type: str = DEFAULT_MODEL_TYPE
    api_key_env: str = DEFAULT_API_KEY_ENV
    replay: tuple[Path, ...] = ()
    policies: tuple[Policy, ...] = ()
    model_servers: tuple[ModelServerBinding, ...] = ()
    """The model servers environments name that ``--gym-model-server`` (ini ``gym_model_servers``) binds."""
    policy_model_servers: tuple[ModelServerBinding, ...] = ()
    """Its ``NAME@POLICY=...`` bindings: a model server bound for one ``--gym-policy``'s rollouts (not the
    baseline's)."""
    """``--gym-policy``: the policy models compared in this session, the baseline first (none: one model)."""
    head_server: tuple[str, int] | None = None
    run_dir: Path | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    rollout_timeout: float | None = DEFAULT_ROLLOUT_TIMEOUT
    concurrency: int | None = None
    dataset_globs: tuple[str, ...] = ()
    id_fields: tuple[str, ...] = DEFAULT_ID_FIELDS
    gate_mode: GateMode = GateMode.POINT
    inconclusive_passes: bool = False
    familywise: str | None = None
    """``--gym-familywise``: "holm" judges the session's lower-bound and comparison gates as one family
    (:func:`~pytest_gym_eval.reporting.policies.familywise_session`)."""
    report: Path | None = None
    baseline: Path | None = None
    max_drop: float | None = None
    max_regressed_tasks: int | None = None
    max_regression: float | None = None
    """``--gym-max-regression``: the non-inferiority margin δ (reward units, >= 0) of every candidate policy against
    the baseline; None without the gate."""
    min_improvement: float | None = None
    """``--gym-min-improvement``: the superiority margin δ (reward units, >= 0) every candidate policy must beat the
    baseline by; None without the gate."""
    comparison_sources: Mapping[Hypothesis, GateSource] = field(default_factory=dict, compare=False)
    """Where each of the two comparison gates was set (command line or ini file; absent: not known); as a gate's
    source, no part of the options' equality."""
    fail_on_flip: bool = False
    html: Path | None = None
    markdown: Path | None = None
    shard: Shard | None = None
    ray_address: str | None = None
    adaptive: bool = False
    min_repeats: int = DEFAULT_MIN_REPEATS
    keep_alive: float | None = None
    resume: Path | None = None
    cli: DatasetSettings = field(default_factory=DatasetSettings)
    ini: DatasetSettings = field(default_factory=DatasetSettings)
    datasets: tuple[tuple[str, DatasetSettings], ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    price: Price | None = None
    latency: bool = False
    history: str | None = field(default=None, repr=False)  # a URL's password stays out of any repr
    """``--gym-history``: a ``postgresql://`` URL as given, or a SQLite file's absolute path; None: no history."""
    quarantine: Path | None = None
    """``--gym-quarantine``: the quarantine list (an existing file), None without one."""
    _settings: dict[Path, DatasetSettings] = field(default_factory=dict, init=False, repr=False, compare=False)
    """:meth:`dataset_settings` by path: every item asks for its dataset's (matching the globs, resolving
    symlinks: ~0.5 ms a call, 0.1 s of a session of 200 rollouts)."""
    _marks: dict[str, DatasetSettings] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The gates test functions' ``gym_rollouts`` marks declare, by dataset name (:meth:`declare_marks`)."""
    _declaring: dict[tuple[str, str], tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_config(cls, config: pytest.Config) -> GymOptions:
        """Resolve every option; raises :class:`pytest.UsageError` for a value that makes no sense, its message
        (which may echo the value, or a path made of it) through
        :func:`~pytest_gym_eval.core.credentials.redact_value`."""
        try:
            return cls._from_config(config)
        except pytest.UsageError as error:
            raise pytest.UsageError(redact_value(str(error))) from None

    @classmethod
    def _from_config(cls, config: pytest.Config) -> GymOptions:
        rootdir = Path(config.rootpath)

        def ini_value(name: str) -> Any:
            """The ini option's value, None when unset; one pytest cannot read is a usage error naming it."""
            try:
                given = config.getini(name)
            except (ValueError, TypeError, pytest.UsageError) as error:  # pytest 9 raises UsageError itself
                raise pytest.UsageError(f"{name} (ini option): {error}") from None
            return None if given in ("", None, []) else given

        def value(dest: str) -> Any:
            given = config.getoption(dest, default=None)
            return given if given is not None else ini_value(dest)

        inifile_dir = Path(config.inipath).parent if config.inipath else rootdir

        def path_option(dest: str) -> Path | None:
            """A path from the command line (relative to the working directory) or the ini file (to its folder)."""
            given = config.getoption(dest, default=None)
            if given:
                return file_path(given, Path.cwd(), "--" + dest.replace("_", "-"))
            given = ini_value(dest)
            return file_path(given, inifile_dir, dest) if given else None

        def number(dest: str, parse: Any = None) -> Any:
            """A number from the command line or the ini file, parsed and checked (errors name where it came from)."""
            given = config.getoption(dest, default=None)
            where = "--" + dest.replace("_", "-")
            if given is None:
                given, where = ini_value(dest), dest
            return (parse or _number)(given, where)

        checkout = path_option("gym_checkout")
        cli = settings_layer(lambda dest: config.getoption(dest, default=None), GateSource.COMMAND_LINE)
        ini = settings_layer(ini_value, GateSource.INI)
        gate_on = value("gym_gate_on") or GateMode.POINT.value
        if gate_on not in {m.value for m in GateMode}:
            raise pytest.UsageError(f"gym_gate_on: expected point or lower-bound, got {gate_on!r}")
        inconclusive = value("gym_inconclusive") or "fail"
        if inconclusive not in ("fail", "pass"):
            raise pytest.UsageError(f"gym_inconclusive: expected fail or pass, got {inconclusive!r}")
        familywise = value("gym_familywise") or "off"
        if familywise not in ("off", HOLM):
            raise pytest.UsageError(f"gym_familywise: expected off or holm, got {familywise!r}")
        fail_on_flip = config.getoption("gym_fail_on_flip", default=None)
        adaptive = config.getoption("gym_adaptive", default=None)
        min_repeats = number("gym_min_repeats", _positive_int)
        id_field = str(config.getini("gym_id_field") or "").strip()
        rollout_timeout = number("gym_rollout_timeout")
        startup_timeout = number("gym_startup_timeout")
        concurrency = number("gym_concurrency", _positive_int)
        replay_cli = config.getoption("gym_replay", default=None)
        if replay_cli:
            replay, replay_option = tuple(file_path(p, Path.cwd(), "--gym-replay") for p in replay_cli), "--gym-replay"
        else:
            replay = tuple(file_path(p, inifile_dir, "gym_replay") for p in ini_value("gym_replay") or ())
            replay_option = "gym_replay"
        keep_alive, resume = _inner_loop(config, ini_value)
        baseline = path_option("gym_baseline")
        baseline_option = "--gym-baseline" if config.getoption("gym_baseline", default=None) else "gym_baseline"
        head_server = _host_port(config.getoption("gym_head_server", default=None))
        shard = _shard(value("gym_shard"))
        ray_address = _ray_address(value("gym_ray_address"), head_server)
        if ray_address is not None and keep_alive:
            raise pytest.UsageError(
                "--gym-ray-address cannot be combined with --gym-keep-alive (or ini gym_keep_alive): a warm Gym "
                "is started on a private Ray and outlives the session"
            )
        quarantine = path_option("gym_quarantine")
        quarantine_option = "--gym-quarantine" if config.getoption("gym_quarantine", default=None) else "gym_quarantine"
        checked = [*((replay_option, r) for r in replay), (baseline_option, baseline), (quarantine_option, quarantine)]
        for option, given in checked:
            if given is not None and not given.is_file():
                raise pytest.UsageError(f"{option}: no such file: {given}")
        model_type = value("gym_model_type") or DEFAULT_MODEL_TYPE
        api_key_env = value("gym_api_key_env") or DEFAULT_API_KEY_ENV
        policies = _policies(config, ini_value, inifile_dir, api_key_env)
        if policies and (clash := _policy_clash(value, replay, head_server, keep_alive, resume)):
            raise pytest.UsageError(f"--gym-policy cannot be combined with {clash}")
        if policies and model_type not in MODEL_FIELDS:
            raise pytest.UsageError(
                f"--gym-policy works with --gym-model-type {' or '.join(MODEL_FIELDS)}, not {model_type}"
            )
        model_servers, policy_model_servers = _by_policy(_model_servers(config, ini_value, inifile_dir), policies)
        datasets = tuple(parse_dataset_settings(config.getini("gym_dataset_settings"), inifile_dir))
        if (model_servers or any(settings.model_servers for _, settings in datasets)) and head_server:
            raise pytest.UsageError(
                "--gym-model-server cannot be combined with --gym-head-server: the bindings are written into the "
                "config of a Gym this session (or its warm Gym) starts"
            )
        comparisons = merge_gates(
            _comparison_layer(lambda dest: config.getoption(dest, default=None), GateSource.COMMAND_LINE),
            _comparison_layer(ini_value, GateSource.INI),
        )
        margins = {gate.hypothesis: gate.margin for gate in comparisons}
        max_regression, min_improvement = margins.get(Hypothesis.NON_INFERIORITY), margins.get(Hypothesis.SUPERIORITY)
        for name, margin in (("max-regression", max_regression), ("min-improvement", min_improvement)):
            if margin is not None and not policies:
                raise pytest.UsageError(
                    f"--gym-{name} (ini gym_{name.replace('-', '_')}) compares policies: name two or more with "
                    "--gym-policy"
                )
        sampling = sampling_from_config(config)
        try:
            sampling.check_model_type(model_type)
        except SamplingError as error:
            raise pytest.UsageError(str(error)) from None
        return cls(
            rootdir=rootdir,
            checkout=checkout,
            agent=cli.agent or ini.agent,
            model_url=value("gym_model_url"),
            model=value("gym_model"),
            model_type=model_type,
            api_key_env=api_key_env,
            replay=replay,
            policies=policies,
            model_servers=model_servers,
            policy_model_servers=policy_model_servers,
            head_server=head_server,
            run_dir=path_option("gym_run_dir"),
            startup_timeout=DEFAULT_STARTUP_TIMEOUT if startup_timeout is None else startup_timeout,
            rollout_timeout=(DEFAULT_ROLLOUT_TIMEOUT if rollout_timeout is None else (rollout_timeout or None)),
            concurrency=concurrency,
            gate_mode=GateMode(gate_on),
            inconclusive_passes=inconclusive == "pass",
            familywise=None if familywise == "off" else familywise,
            report=path_option("gym_report"),
            baseline=baseline,
            max_drop=number("gym_max_drop"),
            max_regressed_tasks=number("gym_max_regressed_tasks", _count),
            max_regression=max_regression,
            min_improvement=min_improvement,
            comparison_sources={gate.hypothesis: gate.source for gate in comparisons if gate.source is not None},
            fail_on_flip=bool(fail_on_flip if fail_on_flip is not None else config.getini("gym_fail_on_flip")),
            html=path_option("gym_html"),
            markdown=path_option("gym_markdown"),
            shard=shard,
            ray_address=ray_address,
            adaptive=bool(adaptive if adaptive is not None else config.getini("gym_adaptive")),
            min_repeats=DEFAULT_MIN_REPEATS if min_repeats is None else min_repeats,
            keep_alive=keep_alive,
            resume=resume,
            dataset_globs=tuple(config.getini("gym_datasets")),
            id_fields=(id_field,) if id_field else DEFAULT_ID_FIELDS,
            cli=cli,
            ini=ini,
            datasets=datasets,
            sampling=sampling,
            price=price_from_config(config),
            latency=bool(config.getoption("gym_latency", default=None) or config.getini("gym_latency")),
            history=_history_target(config, ini_value, inifile_dir),
            quarantine=quarantine,
        )

    def comparison_gates(self) -> list[ComparisonGate]:
        """The policy comparison's gates (``--gym-max-regression``'s non-inferiority, ``--gym-min-improvement``'s
        superiority), each with where it was set (:func:`~pytest_gym_eval.stats.comparison.comparison_gates`)."""
        return comparison_gates(self.max_regression, self.min_improvement, self.comparison_sources)

    def policy_names(self) -> tuple[str | None, ...]:
        """The policies every (task, repeat) is rolled out against, by name: ``(None,)`` for a one-model session."""
        return tuple(policy.name for policy in self.policies) or (None,)

    def is_dataset(self, path: Path) -> bool:
        """Whether ``path`` matches one of the ``gym_datasets`` globs (relative to the rootdir; a symlink matches
        by the path it is found at, or by the file it points to)."""
        names = _match_names(path, self.rootdir)
        return any(glob_matches(name, pattern) for pattern in self.dataset_globs for name in names)

    def own_settings(self, path: Path) -> DatasetSettings:
        """The settings the dataset at ``path`` sets itself (its ``gym_dataset_settings`` lines; later win).

        A line's glob matches the dataset's name (:func:`dataset_name`, relative to the rootdir, ``../`` when
        outside it), its absolute path, or, for a symlink, those of the file it points to.
        """
        names = _match_names(path, self.rootdir)
        own = DatasetSettings()
        for pattern, settings in self.datasets:
            if any(glob_matches(name, pattern) for name in names):
                own = settings.over(own)
        return own

    def margin_problems(self, datasets: Iterable[Path]) -> list[str]:
        """One line per comparison gate (``--gym-max-regression``, ``--gym-min-improvement``) whose margin is not below
        the width of a dataset's reward range (its ``reward_range``, [0, 1] when unset;
        :func:`~pytest_gym_eval.stats.comparison.margin_problem`): such a gate would judge nothing (every candidate
        passes,
        or none can). ``datasets``: the paths of the session's datasets. Empty without policies or gates."""
        if not self.policies:
            return []
        problems = []
        given = (
            ("max-regression", Hypothesis.NON_INFERIORITY, self.max_regression),
            ("min-improvement", Hypothesis.SUPERIORITY, self.min_improvement),
        )
        paths = list(dict.fromkeys(datasets))
        for option, hypothesis, margin in given:
            if margin is None or margin < 0:  # a negative margin is refused as the option is read
                continue
            gate = ComparisonGate(hypothesis, margin)
            for path in paths:
                problem = margin_problem(gate, self.dataset_settings(path).reward_range or RewardRange())
                if problem is not None:
                    problems.append(
                        f"--gym-{option}={gate.margin:g} (ini gym_{option.replace('-', '_')}): {problem} "
                        f"(dataset {dataset_name(path, self.rootdir)}; declare its range with reward_range=LO:HI "
                        "or --gym-reward-range)"
                    )
        return problems

    def dataset_settings(self, path: Path) -> DatasetSettings:
        """Effective settings of the dataset at ``path``: command line, then its own lines, then the gates the
        ``gym_rollouts`` marks of the tests over it declare (:meth:`declare_marks`), then the ini file; gates of
        every kind merge by identity (:func:`~pytest_gym_eval.stats.gates.merge_gates`), here and only here.

        (The agent is the exception: a dataset's own ``agent=`` beats ``--gym-agent``, see
        :func:`~pytest_gym_eval.session.collect.dataset_default_agent`.) Computed once per path and session (again after
        :meth:`declare_marks`).
        """
        settings = self._settings.get(path)
        if settings is None:
            marked = self._marks.get(dataset_name(path, self.rootdir), DatasetSettings())
            settings = self._settings[path] = self.cli.over(self.own_settings(path).over(marked.over(self.ini)))
        return settings

    def dataset_model_servers(self, path: Path) -> tuple[ModelServerBinding, ...]:
        """The model servers bound for the dataset at ``path``: its own ``model_server=`` settings (later lines
        win), then ``--gym-model-server``'s (or the ini's ``gym_model_servers``) for the names it does not bind."""
        return merge_bindings(self.dataset_settings(path).model_servers, self.model_servers)

    def declare_marks(self, marks: Mapping[str, Mapping[str, tuple[float, Sequence[str]]]]) -> None:
        """Take the gates test functions' ``gym_rollouts`` marks declare (``min_metric=``; per dataset name, per
        custom metric, ``(minimum mean, declaring tests)``, as :attr:`~pytest_gym_eval.tasks.shard.CollectedPlan.marks`
        holds them) as the mark layer of :meth:`dataset_settings`: each gate scoped to its dataset, with the source
        ``test mark`` and the first test that declared it (:meth:`declaring_tests` gives them all). Replaces any
        marks declared before."""
        self._marks.clear()
        self._declaring.clear()
        for name, declared in marks.items():
            gates = tuple(
                Gate("custom", bound, custom=metric, source=GateSource.MARK, declared_by=tests[0])
                for metric, (bound, tests) in declared.items()
            )
            self._declaring.update({(name, metric): tuple(tests) for metric, (_, tests) in declared.items()})
            self._marks[name] = DatasetSettings(given=gates, source=GateSource.MARK)
        self._settings.clear()

    def declaring_tests(self, dataset: str, metric: str) -> tuple[str, ...]:
        """The node ids (without parametrization) of the tests whose ``gym_rollouts`` mark declares a gate on the
        custom ``metric`` of ``dataset`` (its name), as :meth:`declare_marks` took them; empty for none."""
        return self._declaring.get((dataset, metric), ())


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
