"""The session's resolved options, :class:`GymOptions`: every ``--gym-*`` option and ``gym_*`` ini option looked up
as command line, then ini file, then default, checked, and turned into paths, numbers, gates and sampling values.

Resolved once per Gym session (:meth:`GymOptions.from_config`); the declarations are in
:mod:`pytest_gym_eval.options.table`, the readers of single options in :mod:`pytest_gym_eval.options.readers`, the
per-dataset settings in :mod:`pytest_gym_eval.options.settings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.core.credentials import endpoint_url_problem, redact_value
from pytest_gym_eval.core.defaults import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MIN_REPEATS,
    DEFAULT_MODEL_TYPE,
    DEFAULT_ROLLOUT_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
)
from pytest_gym_eval.options.readers import (
    _by_policy,
    _comparison_layer,
    _history_target,
    _host_port,
    _inner_loop,
    _model_servers,
    _policies,
    _policy_clash,
    _ray_address,
    _shard,
    file_path,
    price_from_config,
    sampling_from_config,
    settings_layer,
)
from pytest_gym_eval.options.settings import (
    DatasetSettings,
    _count,
    _match_names,
    _number,
    _positive_int,
    dataset_name,
    glob_matches,
    parse_dataset_settings,
)
from pytest_gym_eval.outcomes.usage import Price
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, comparison_gates, margin_problem
from pytest_gym_eval.stats.gates import HOLM, Gate, GateMode, GateSource, merge_gates
from pytest_gym_eval.stats.sequential import RewardRange
from pytest_gym_eval.tasks.dataset import DEFAULT_ID_FIELDS
from pytest_gym_eval.tasks.model_servers import ModelServerBinding, merge_bindings
from pytest_gym_eval.tasks.models import MODEL_FIELDS, Policy
from pytest_gym_eval.tasks.sampling import Sampling, SamplingError
from pytest_gym_eval.tasks.shard import Shard


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
        model_url = value("gym_model_url")
        if model_url and model_type in MODEL_FIELDS and (problem := endpoint_url_problem(model_url)):
            raise pytest.UsageError(f"--gym-model-url {redact_value(model_url)!r}: {problem} (--gym-api-key-env)")
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
            model_url=model_url,
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
