"""The plugin's command-line options, ini options and per-dataset settings, and their precedence.

Every value is looked up as: command line, then (for per-dataset values) the dataset's line in
``gym_dataset_settings``, then the ini option, then the default. :class:`GymOptions` holds the result for
the session; :func:`dataset_settings` gives one dataset's effective settings.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval import gates
from pytest_gym_eval.dataset import DEFAULT_ID_FIELDS
from pytest_gym_eval.gates import Gate, GateMode
from pytest_gym_eval.sampling import Sampling, SamplingError, parse_params
from pytest_gym_eval.sequential import RewardRange, parse_reward_range
from pytest_gym_eval.shard import Shard, parse_shard
from pytest_gym_eval.usage import Price, parse_price

TYPED_INI = tuple(pytest.version_tuple[:2]) >= (8, 4)
"""Whether this pytest declares ``int`` and ``float`` ini options (8.4 and later); older ones read them as
strings, which the plugin parses itself (the same values, the same errors)."""

DEFAULT_MODEL_TYPE = "openai_model"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_STARTUP_TIMEOUT = 900.0
DEFAULT_ROLLOUT_TIMEOUT = 1800.0
DEFAULT_MIN_REPEATS = 2

_SETTING_KEYS = (
    "agent",
    "resources_server",
    "repeats",
    "pass_threshold",
    "min_mean_reward",
    "min_pass_rate",
    "min_pass_at_k",
    "reward_range",
)


def add_options(parser: pytest.Parser) -> None:
    """Declare the ``--gym-*`` options and ``gym_*`` ini options (pytest's ``pytest_addoption``)."""
    group = parser.getgroup("gym-eval", "NeMo Gym evaluations (pytest-gym-eval)")
    add = group.addoption
    add(
        "--gym-checkout",
        dest="gym_checkout",
        metavar="PATH",
        help="Gym checkout to run (ini gym_checkout; default: the one `python -m pytest_gym_eval provision` built).",
    )
    add(
        "--gym-repeats",
        dest="gym_repeats",
        type=int,
        metavar="N",
        help="Rollouts per task (ini gym_repeats; default 1); each repeat is one item `<task>[r<k>]`.",
    )
    add(
        "--gym-pass-threshold",
        dest="gym_pass_threshold",
        type=float,
        metavar="REWARD",
        help="A rollout passes when its reward is at least this (ini gym_pass_threshold; default 1.0).",
    )
    add(
        "--gym-agent",
        dest="gym_agent",
        metavar="NAME",
        help="Agent for rows without agent_ref and datasets without their own (default: <stem>_simple_agent).",
    )
    add(
        "--gym-model-url",
        dest="gym_model_url",
        metavar="URL",
        help="Base URL of the policy model, e.g. https://api.openai.com/v1 (ini gym_model_url).",
    )
    add("--gym-model", dest="gym_model", metavar="NAME", help="Policy model name (ini gym_model).")
    add(
        "--gym-model-type",
        dest="gym_model_type",
        metavar="TYPE",
        help=f"Gym model server type: openai_model (Responses API) or vllm_model (chat completions) "
        f"(ini gym_model_type; default {DEFAULT_MODEL_TYPE}).",
    )
    add(
        "--gym-api-key-env",
        dest="gym_api_key_env",
        metavar="VAR",
        help=f"Environment variable holding the model's API key; the key itself never reaches argv or logs "
        f"(ini gym_api_key_env; default {DEFAULT_API_KEY_ENV}).",
    )
    add(
        "--gym-replay",
        dest="gym_replay",
        action="append",
        metavar="ROLLOUTS.jsonl",
        help="Serve the policy model from recorded Gym rollouts on a loopback server (repeatable; no API key).",
    )
    add(
        "--gym-head-server",
        dest="gym_head_server",
        metavar="HOST:PORT",
        help="Attach to Gym servers that are already running instead of starting them (never stopped).",
    )
    add(
        "--gym-run-dir",
        dest="gym_run_dir",
        metavar="DIR",
        help="Folder under which each session makes a fresh run directory (default: pytest's basetemp).",
    )
    add(
        "--gym-startup-timeout",
        dest="gym_startup_timeout",
        type=float,
        metavar="SECONDS",
        help=f"Seconds Gym's servers and the model endpoint get to become ready, and `gym eval run` to begin "
        f"rolling out (default {DEFAULT_STARTUP_TIMEOUT:g}).",
    )
    add(
        "--gym-rollout-timeout",
        dest="gym_rollout_timeout",
        type=float,
        metavar="SECONDS",
        help=f"Seconds without progress (no rollout landing) after which every rollout still pending errors, "
        f"together; 0 waits forever (default {DEFAULT_ROLLOUT_TIMEOUT:g}).",
    )
    add(
        "--gym-concurrency",
        dest="gym_concurrency",
        type=int,
        metavar="N",
        help="Maximum rollouts Gym runs at once (gym eval run --concurrency; default: Gym's).",
    )

    add(
        "--gym-min-mean-reward",
        dest="gym_min_mean_reward",
        type=float,
        metavar="REWARD",
        help="CI gate: each dataset's mean reward must reach this (ini gym_min_mean_reward).",
    )
    add(
        "--gym-min-pass-rate",
        dest="gym_min_pass_rate",
        type=float,
        metavar="RATE",
        help="CI gate: each dataset's pass rate over rollouts must reach this (ini gym_min_pass_rate).",
    )
    add(
        "--gym-min-pass-at-k",
        dest="gym_min_pass_at_k",
        action="append",
        metavar="K:V",
        help="CI gate: each dataset's pass@K must reach V, e.g. 4:0.5 (repeatable; ini gym_min_pass_at_k).",
    )
    add(
        "--gym-gate-on",
        dest="gym_gate_on",
        choices=[m.value for m in GateMode],
        metavar="{point,lower-bound}",
        help="Judge gates on the point estimate (default) or on the lower end of the 95%% interval; then an "
        "interval straddling the threshold is INCONCLUSIVE (ini gym_gate_on).",
    )
    add(
        "--gym-inconclusive",
        dest="gym_inconclusive",
        choices=["fail", "pass"],
        help="Whether an INCONCLUSIVE gate fails the session (default) or passes (ini gym_inconclusive).",
    )
    add(
        "--gym-report",
        dest="gym_report",
        metavar="PATH.json",
        help="Write the reward summary and every rollout's reward and record location as JSON.",
    )
    add(
        "--gym-baseline",
        dest="gym_baseline",
        metavar="PATH.json",
        help="Compare with an earlier --gym-report: per-task drops and a paired t-test per dataset.",
    )
    add(
        "--gym-max-drop",
        dest="gym_max_drop",
        type=float,
        metavar="REWARD",
        help="CI gate: fail when a dataset's mean reward dropped significantly by more than this against "
        "--gym-baseline.",
    )
    add(
        "--gym-max-regressed-tasks",
        dest="gym_max_regressed_tasks",
        type=int,
        metavar="N",
        help="CI gate: fail when more than N tasks that passed on every --gym-baseline repeat fail on every "
        "repeat now (0: any such task fails the gate; ini gym_max_regressed_tasks).",
    )
    add(
        "--gym-fail-on-flip",
        dest="gym_fail_on_flip",
        action="store_true",
        default=None,
        help="CI gate (with --gym-replay): fail when any rollout's reward differs from the recorded one.",
    )

    # Adaptive gates (issue 16): waves of rollouts judged with a confidence sequence, stopping once decided.
    add(
        "--gym-adaptive",
        dest="gym_adaptive",
        action="store_true",
        default=None,
        help="Roll out in waves through one Gym and stop a gated dataset once an anytime-valid confidence sequence "
        "decides every gate (PASS or FAIL); --gym-repeats is the ceiling (ini gym_adaptive).",
    )
    add(
        "--gym-min-repeats",
        dest="gym_min_repeats",
        type=int,
        metavar="N",
        help=f"With --gym-adaptive: repeats per task in the first wave; each next wave doubles them "
        f"(ini gym_min_repeats; default {DEFAULT_MIN_REPEATS}).",
    )
    add(
        "--gym-reward-range",
        dest="gym_reward_range",
        metavar="LO:HI",
        help="With --gym-adaptive: the range every reward lies in (ini gym_reward_range, or reward_range= per "
        "dataset; default 0:1).",
    )

    # Reports people read: the HTML page and the Markdown summary (also for CI step summaries).
    add(
        "--gym-html",
        dest="gym_html",
        metavar="PATH.html",
        help="Write one self-contained HTML page (summaries, histograms, task x repeat grids, transcripts) at "
        "the end of the session (ini gym_html).",
    )
    add(
        "--gym-markdown",
        dest="gym_markdown",
        metavar="PATH.md",
        help="Write the Markdown summary that a GitHub step summary gets, e.g. for a pull-request comment "
        "(ini gym_markdown).",
    )
    add_inner_loop_options(parser, group)
    parser.addini("gym_html", "Write the HTML report here (see --gym-html).", type="string", default="")
    parser.addini("gym_markdown", "Write the Markdown summary here (see --gym-markdown).", type="string", default="")
    add_scale_options(parser)

    # Any: the Literal type pytest declares for ``type`` differs between its versions.
    number: Any = "float" if TYPED_INI else "string"
    whole: Any = "int" if TYPED_INI else "string"
    addini = parser.addini
    parser.addini("gym_adaptive", "Adaptive gates (see --gym-adaptive).", type="bool", default=False)
    addini("gym_min_repeats", "First wave's repeats per task (see --gym-min-repeats).", type=whole, default=None)
    parser.addini("gym_reward_range", "LO:HI every reward lies in (see --gym-reward-range).", type="string", default="")
    addini("gym_checkout", "Gym checkout to run, relative to the ini file (see --gym-checkout).", default="")
    addini("gym_min_mean_reward", "CI gate on every dataset's mean reward.", type=number, default=None)
    addini("gym_min_pass_rate", "CI gate on every dataset's pass rate.", type=number, default=None)
    parser.addini("gym_min_pass_at_k", "CI gates K:V on every dataset's pass@K.", type="linelist", default=[])
    parser.addini("gym_gate_on", "point or lower-bound (see --gym-gate-on).", type="string", default="")
    parser.addini("gym_inconclusive", "fail or pass (see --gym-inconclusive).", type="string", default="")
    parser.addini(
        "gym_fail_on_flip",
        "Fail when a replayed rollout's reward differs from the recording.",
        type="bool",
        default=False,
    )
    parser.addini(
        "gym_datasets",
        "Globs of .jsonl files, relative to the rootdir, collected as Gym datasets.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "gym_id_field",
        "Row field holding the task id (default: the first of id, uuid, task_id).",
        type="string",
        default="",
    )
    addini("gym_repeats", "Rollouts per task (see --gym-repeats).", type=whole, default=None)
    addini("gym_pass_threshold", "Reward at or above which a rollout passes (default 1.0).", type=number, default=None)
    parser.addini("gym_agent", "Default agent (see --gym-agent).", type="string", default="")
    parser.addini("gym_model_url", "Base URL of the policy model.", type="string", default="")
    parser.addini("gym_model", "Policy model name.", type="string", default="")
    parser.addini("gym_model_type", "Gym model server type.", type="string", default="")
    parser.addini("gym_api_key_env", "Environment variable holding the API key.", type="string", default="")
    addini(
        "gym_startup_timeout",
        f"Seconds Gym and the model endpoint get to become ready (default {DEFAULT_STARTUP_TIMEOUT:g}).",
        type=number,
        default=None,
    )
    addini(
        "gym_rollout_timeout",
        f"Seconds an item waits for its rollout; 0 waits forever (default {DEFAULT_ROLLOUT_TIMEOUT:g}).",
        type=number,
        default=None,
    )
    addini("gym_concurrency", "Maximum rollouts Gym runs at once (default: Gym's).", type=whole, default=None)
    addini("gym_run_dir", "Folder for the run directories, relative to the ini file (see --gym-run-dir).", default="")
    addini("gym_report", "JSON report to write, relative to the ini file (see --gym-report).", default="")
    addini("gym_baseline", "Earlier JSON report to compare with, relative to the ini file.", default="")
    addini(
        "gym_max_drop", "CI gate: largest significant mean-reward drop against the baseline.", type=number, default=None
    )
    addini(
        "gym_max_regressed_tasks",
        "CI gate: most tasks allowed to go from passing every baseline repeat to failing every repeat.",
        type=whole,
        default=None,
    )
    addini(
        "gym_replay",
        "Recorded rollouts the loopback model server replays, one path per line, relative to the ini file.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "gym_dataset_settings",
        "One line per dataset glob: `<glob>: key=value ...` with keys " + ", ".join(_SETTING_KEYS) + ".",
        type="linelist",
        default=[],
    )
    add_sampling_options(parser)


def add_sampling_options(parser: pytest.Parser) -> None:
    """The sampling, cost and latency options (``--gym-temperature`` ... ``--gym-latency``) and their
    ini equivalents. Sampling values go into every row's ``responses_create_params`` and beat the row's own
    (:mod:`pytest_gym_eval.sampling`)."""
    group = parser.getgroup("gym-eval")
    add = group.addoption
    beats = "beats a row's own value"
    add(
        "--gym-temperature",
        dest="gym_temperature",
        type=float,
        metavar="T",
        help=f"Sampling temperature of every request ({beats}; ini gym_temperature).",
    )
    add(
        "--gym-top-p",
        dest="gym_top_p",
        type=float,
        metavar="P",
        help=f"Nucleus sampling top_p of every request ({beats}; ini gym_top_p).",
    )
    add(
        "--gym-max-output-tokens",
        dest="gym_max_output_tokens",
        type=int,
        metavar="N",
        help=f"Most tokens the model may generate per call, max_output_tokens ({beats}; ini gym_max_output_tokens).",
    )
    add(
        "--gym-seed",
        dest="gym_seed",
        type=int,
        metavar="N",
        help="Sampling seed; repeat k uses N+k. Only with --gym-model-type=vllm_model, which passes it to the "
        "endpoint (ini gym_seed).",
    )
    add(
        "--gym-param",
        dest="gym_param",
        action="append",
        metavar="KEY=VALUE",
        help=f"Any other responses_create_params key of every request, VALUE read as JSON when it is JSON, e.g. "
        f'reasoning={{"effort":"low"}} (repeatable; {beats}; ini gym_params, one per line).',
    )
    add(
        "--gym-price-per-mtok",
        dest="gym_price_per_mtok",
        metavar="IN:OUT",
        help="Prices per million input and output tokens, e.g. 0.15:0.60: the summary and reports then estimate "
        "the cost (ini gym_price_per_mtok; no built-in prices).",
    )
    add(
        "--gym-latency",
        dest="gym_latency",
        action="store_true",
        default=None,
        help="Have Gym record each rollout's latency (turns on its model-call observability, which also stores "
        "every model call under the run directory; ini gym_latency).",
    )
    parser.addini(
        "gym_latency", "Have Gym record each rollout's latency (see --gym-latency).", type="bool", default=False
    )
    parser.addini("gym_temperature", "Sampling temperature (see --gym-temperature).", type="string", default="")
    parser.addini("gym_top_p", "Nucleus sampling top_p (see --gym-top-p).", type="string", default="")
    parser.addini(
        "gym_max_output_tokens", "Most output tokens per call (see --gym-max-output-tokens).", type="string", default=""
    )
    parser.addini("gym_seed", "Sampling seed (see --gym-seed).", type="string", default="")
    parser.addini(
        "gym_params", "responses_create_params KEY=VALUE lines (see --gym-param).", type="linelist", default=[]
    )
    parser.addini("gym_price_per_mtok", "IN:OUT prices per million tokens.", type="string", default="")


def sampling_from_config(config: pytest.Config) -> Sampling:
    """The session's :class:`~pytest_gym_eval.sampling.Sampling` (command line over ini); raises
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
    """``--gym-price-per-mtok`` (or ini ``gym_price_per_mtok``) as a :class:`~pytest_gym_eval.usage.Price`, None
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


def add_scale_options(parser: pytest.Parser) -> None:
    """Options for runs larger than one machine: ``--gym-shard`` (one CI job's share of the tasks) and
    ``--gym-ray-address`` (Gym on an existing Ray cluster), each with its ini setting."""
    group = parser.getgroup("gym-eval")
    group.addoption(
        "--gym-shard",
        dest="gym_shard",
        metavar="I/N",
        help="Run only shard I of N (numbered from 1) of each dataset's tasks, all repeats of a task together; "
        "merge the shards' --gym-report files with `python -m pytest_gym_eval merge` (ini gym_shard).",
    )
    group.addoption(
        "--gym-ray-address",
        dest="gym_ray_address",
        metavar="HOST:PORT",
        help="Run Gym on this existing Ray cluster (its GCS address, as `ray start --head` prints it) instead "
        "of a private one; the session never stops the cluster (ini gym_ray_address).",
    )
    parser.addini("gym_shard", "Shard I/N of the tasks to run (see --gym-shard).", type="string", default="")
    parser.addini("gym_ray_address", "Existing Ray cluster for Gym (see --gym-ray-address).", type="string", default="")


# The fast inner loop: a warm Gym kept between sessions, and resuming an interrupted run.

DEFAULT_KEEP_ALIVE = 900.0
"""Seconds an idle warm Gym stays up (``--gym-keep-alive`` without a value): 15 minutes."""


def _keep_alive_seconds(text: str) -> float:
    """``--gym-keep-alive``'s value: seconds >= 0 (0 turns an ini ``gym_keep_alive`` off). Raises argparse's
    error for anything else, e.g. a dataset path the option took as its value."""
    import argparse

    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected idle seconds, got {text!r} (write --gym-keep-alive=SECONDS, or put --gym-keep-alive after "
            "the paths)"
        ) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"expected idle seconds >= 0, got {text!r}")
    return seconds


def add_inner_loop_options(parser: pytest.Parser, group: Any) -> None:
    """Declare ``--gym-keep-alive[=SECONDS]`` (ini ``gym_keep_alive``) and ``--gym-resume=RUN_DIR``."""
    group.addoption(
        "--gym-keep-alive",
        dest="gym_keep_alive",
        nargs="?",
        const=DEFAULT_KEEP_ALIVE,
        type=_keep_alive_seconds,
        metavar="SECONDS",
        help="Keep Gym's servers up after the session for the next session with the same Gym configuration, "
        f"until idle for SECONDS (default {DEFAULT_KEEP_ALIVE:g}; 0: off). `python -m pytest_gym_eval status` "
        "lists warm Gyms, `... stop [--all]` stops them (ini gym_keep_alive).",
    )
    group.addoption(
        "--gym-resume",
        dest="gym_resume",
        metavar="RUN_DIR",
        help="Reuse every scored rollout of this earlier run directory (same datasets' rows, tasks, repeats and "
        "Gym configuration) and roll out only the missing or errored ones; all are reported as one session.",
    )
    number: Any = "float" if TYPED_INI else "string"
    parser.addini(
        "gym_keep_alive",
        "Keep Gym warm between sessions, stopping it after this many idle seconds (0 or unset: off).",
        type=number,
        default=None,
    )


@dataclass(frozen=True)
class DatasetSettings:
    """Settings one dataset may carry (a line of ``gym_dataset_settings``); None means "not set here".

        ``min_pass_at_k`` holds ``(k, minimum pass@k)`` pairs; ``reward_range`` the range every reward lies in (what
    ``--gym-adaptive``'s confidence sequence needs; [0, 1] when unset).
    """

    agent: str | None = None
    resources_server: str | None = None
    repeats: int | None = None
    pass_threshold: float | None = None
    min_mean_reward: float | None = None
    min_pass_rate: float | None = None
    min_pass_at_k: tuple[tuple[int, float], ...] = ()
    reward_range: RewardRange | None = None

    @property
    def gates(self) -> list[Gate]:
        """The CI gates these settings ask for (empty when none)."""
        gates = []
        if self.min_mean_reward is not None:
            gates.append(Gate("mean_reward", self.min_mean_reward))
        if self.min_pass_rate is not None:
            gates.append(Gate("pass_rate", self.min_pass_rate))
        gates.extend(Gate("pass_at_k", value, k) for k, value in self.min_pass_at_k)
        return gates

    @property
    def threshold(self) -> float:
        """The pass threshold (default 1.0)."""
        return 1.0 if self.pass_threshold is None else self.pass_threshold

    def over(self, other: DatasetSettings) -> DatasetSettings:
        """These settings, with ``other``'s filling whatever is unset here."""
        values: dict[str, Any] = {}
        for name in _SETTING_KEYS:
            mine = getattr(self, name)
            values[name] = mine if mine not in (None, ()) else getattr(other, name)
        return DatasetSettings(**values)


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
    head_server: tuple[str, int] | None = None
    run_dir: Path | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    rollout_timeout: float | None = DEFAULT_ROLLOUT_TIMEOUT
    concurrency: int | None = None
    dataset_globs: tuple[str, ...] = ()
    id_fields: tuple[str, ...] = DEFAULT_ID_FIELDS
    gate_mode: GateMode = GateMode.POINT
    inconclusive_passes: bool = False
    report: Path | None = None
    baseline: Path | None = None
    max_drop: float | None = None
    max_regressed_tasks: int | None = None
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
    _settings: dict[Path, DatasetSettings] = field(default_factory=dict, init=False, repr=False, compare=False)
    """:meth:`dataset_settings` by path: every item asks for its dataset's (matching the globs, resolving
    symlinks: ~0.5 ms a call, 0.1 s of a session of 200 rollouts)."""

    @classmethod
    def from_config(cls, config: pytest.Config) -> GymOptions:
        """Resolve every option; raises :class:`pytest.UsageError` for a value that makes no sense."""
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

        def path(text: str | None, base: Path) -> Path | None:
            return (base / os.path.expanduser(text)).resolve() if text else None

        inifile_dir = Path(config.inipath).parent if config.inipath else rootdir

        def path_option(dest: str) -> Path | None:
            """A path from the command line (relative to the working directory) or the ini file (to its folder)."""
            given = config.getoption(dest, default=None)
            return path(given, Path.cwd()) if given else path(ini_value(dest), inifile_dir)

        def number(dest: str, parse: Any = None) -> Any:
            """A number from the command line or the ini file, parsed and checked (errors name where it came from)."""
            given = config.getoption(dest, default=None)
            where = "--" + dest.replace("_", "-")
            if given is None:
                given, where = ini_value(dest), dest
            return (parse or _number)(given, where)

        checkout = path_option("gym_checkout")
        cli = DatasetSettings(
            agent=config.getoption("gym_agent", default=None),
            repeats=_positive_int(config.getoption("gym_repeats", default=None), "--gym-repeats"),
            pass_threshold=_number(config.getoption("gym_pass_threshold", default=None), "--gym-pass-threshold"),
            min_mean_reward=_number(config.getoption("gym_min_mean_reward", default=None), "--gym-min-mean-reward"),
            min_pass_rate=_number(config.getoption("gym_min_pass_rate", default=None), "--gym-min-pass-rate"),
            min_pass_at_k=tuple(
                parse_pass_at_k(text, "--gym-min-pass-at-k")
                for text in config.getoption("gym_min_pass_at_k", default=None) or ()
            ),
            reward_range=_reward_range(config.getoption("gym_reward_range", default=None), "--gym-reward-range"),
        )
        ini = DatasetSettings(
            agent=config.getini("gym_agent") or None,
            repeats=_positive_int(ini_value("gym_repeats"), "gym_repeats"),
            pass_threshold=_number(ini_value("gym_pass_threshold"), "gym_pass_threshold"),
            min_mean_reward=_number(ini_value("gym_min_mean_reward"), "gym_min_mean_reward"),
            min_pass_rate=_number(ini_value("gym_min_pass_rate"), "gym_min_pass_rate"),
            min_pass_at_k=tuple(parse_pass_at_k(t, "gym_min_pass_at_k") for t in config.getini("gym_min_pass_at_k")),
            reward_range=_reward_range(ini_value("gym_reward_range"), "gym_reward_range"),
        )
        gate_on = value("gym_gate_on") or GateMode.POINT.value
        if gate_on not in {m.value for m in GateMode}:
            raise pytest.UsageError(f"gym_gate_on: expected point or lower-bound, got {gate_on!r}")
        inconclusive = value("gym_inconclusive") or "fail"
        if inconclusive not in ("fail", "pass"):
            raise pytest.UsageError(f"gym_inconclusive: expected fail or pass, got {inconclusive!r}")
        fail_on_flip = config.getoption("gym_fail_on_flip", default=None)
        adaptive = config.getoption("gym_adaptive", default=None)
        min_repeats = number("gym_min_repeats", _positive_int)
        id_field = str(config.getini("gym_id_field") or "").strip()
        rollout_timeout = number("gym_rollout_timeout")
        startup_timeout = number("gym_startup_timeout")
        concurrency = number("gym_concurrency", _positive_int)
        replay_cli = config.getoption("gym_replay", default=None)
        if replay_cli:
            replay, replay_option = tuple(Path(p).resolve() for p in replay_cli), "--gym-replay"
        else:
            replay = tuple(inifile_dir / os.path.expanduser(p) for p in ini_value("gym_replay") or ())
            replay, replay_option = tuple(p.resolve() for p in replay), "gym_replay"
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
        for option, given in [*((replay_option, r) for r in replay), (baseline_option, baseline)]:
            if given is not None and not given.is_file():
                raise pytest.UsageError(f"{option}: no such file: {given}")
        model_type = value("gym_model_type") or DEFAULT_MODEL_TYPE
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
            api_key_env=value("gym_api_key_env") or DEFAULT_API_KEY_ENV,
            replay=replay,
            head_server=head_server,
            run_dir=path_option("gym_run_dir"),
            startup_timeout=DEFAULT_STARTUP_TIMEOUT if startup_timeout is None else startup_timeout,
            rollout_timeout=(DEFAULT_ROLLOUT_TIMEOUT if rollout_timeout is None else (rollout_timeout or None)),
            concurrency=concurrency,
            gate_mode=GateMode(gate_on),
            inconclusive_passes=inconclusive == "pass",
            report=path_option("gym_report"),
            baseline=baseline,
            max_drop=number("gym_max_drop"),
            max_regressed_tasks=number("gym_max_regressed_tasks", _count),
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
            datasets=tuple(parse_dataset_settings(config.getini("gym_dataset_settings"))),
            sampling=sampling,
            price=price_from_config(config),
            latency=bool(config.getoption("gym_latency", default=None) or config.getini("gym_latency")),
        )

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

    def dataset_settings(self, path: Path) -> DatasetSettings:
        """Effective settings of the dataset at ``path``: command line, then its own lines, then the ini file.

        (The agent is the exception: a dataset's own ``agent=`` beats ``--gym-agent``, see
        :func:`~pytest_gym_eval.collect.dataset_default_agent`.) Computed once per path and session.
        """
        settings = self._settings.get(path)
        if settings is None:
            settings = self._settings[path] = self.cli.over(self.own_settings(path).over(self.ini))
        return settings


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
    resume = Path(os.path.abspath(os.path.expanduser(text))) if text else None
    if resume is not None and not resume.is_dir():
        raise pytest.UsageError(f"--gym-resume: no such run directory: {resume}")
    return keep_alive, resume


def check_config_source(config: pytest.Config) -> None:
    """Refuse a session whose pytest configuration came, by accident, from a Gym checkout's own
    ``pyproject.toml``.

    pytest takes its rootdir and ini file from the common ancestor of the paths on the command line, before any
    plugin loads: a dataset inside a Gym checkout (``.../resources_servers/mcqa/data/example.jsonl``) named from
    elsewhere makes Gym's ``pyproject.toml`` the configuration (its ``addopts``, ``--strict-markers`` and cache
    then apply) even when the current folder has one of its own. Raises :class:`pytest.UsageError` saying so and
    how to name a configuration (``-c``), when a ``.jsonl`` argument lies in a Gym checkout whose files configure
    pytest, pytest was started outside that checkout, and no ``-c``/``--config-file``/``--rootdir`` was given.
    The same for ``--gym-checkout PATH`` (a space, not ``=``): pytest took ``PATH`` for a path to test, and the
    message says to write ``--gym-checkout=PATH``.
    """
    inipath = config.inipath
    if inipath is None or not _is_gym_checkout(inipath.parent):
        return
    checkout = inipath.parent.resolve()
    params = config.invocation_params
    if _inside(Path(params.dir).resolve(), checkout):
        return
    explicit = ("-c", "--config-file", "--rootdir", "--inifile")
    if any(arg == flag or arg.startswith(flag + "=") for arg in params.args for flag in explicit):
        return
    spaced = _spaced_path_option(params.args, Path(params.dir), checkout)
    if spaced is not None:
        raise pytest.UsageError(
            f"pytest read its configuration from Gym's own {inipath} (rootdir {checkout}: Gym's addopts and "
            f"markers apply, and pytest's cache goes into the checkout) because `{spaced} {checkout}` was given "
            "with a space: pytest chooses its configuration before it knows this plugin's options, and took the "
            f"checkout for a path to test. Write `{spaced}={checkout}`."
        )
    datasets = [arg for arg in config.args if arg.split("::")[0].endswith(".jsonl")]
    if not any(_inside((Path(params.dir) / arg.split("::")[0]).resolve(), checkout) for arg in datasets):
        return
    raise pytest.UsageError(
        f"pytest read its configuration from Gym's own {inipath} (rootdir {checkout}: Gym's addopts and "
        "markers apply, and pytest's cache goes into the checkout) because the datasets on the command line lie "
        "inside that Gym checkout. Name your configuration: `pytest -c pytest.ini ...` (your project's ini file; "
        "`-c /dev/null` for none); a dataset outside the rootdir keeps its path, with ../, in its node ids."
    )


def _spaced_path_option(args: Sequence[str], cwd: Path, checkout: Path) -> str | None:
    """The ``--gym-*`` option given with a space before a path inside ``checkout`` (``--gym-checkout PATH``,
    ``--gym-replay PATH``), which pytest's first reading of the command line took for a path to test; None
    when there is none."""
    for option, value in itertools.pairwise(args):
        if option.startswith("--gym-") and "=" not in option and _inside((cwd / value).resolve(), checkout):
            return option
    return None


def _is_gym_checkout(folder: Path) -> bool:
    return (folder / "nemo_gym").is_dir() and (folder / "resources_servers").is_dir()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def dataset_name(path: Path, rootdir: Path) -> str:
    """A dataset's name: its path relative to the rootdir, with ``../`` when it lies outside (e.g.
    ``../shared/mcqa.jsonl``), symlinks kept as found. This is the path part of its items' node ids and the name
    in every report, so it is distinct for distinct files and stable from run to run (pytest itself would give a
    file named outside the rootdir an empty path)."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(rootdir))).as_posix()


def glob_matches(name: str, pattern: str) -> bool:
    """Whether a dataset's ``name`` matches a glob of ``gym_datasets`` or ``gym_dataset_settings``: ``fnmatch``, as
    pytest's own globs (``*`` matches across folders too), where ``**/`` also matches no folder at all
    (``datasets/**/*.jsonl`` matches ``datasets/a.jsonl``), as the shell's and pathlib's recursive globs do."""
    return any(fnmatch.fnmatch(name, variant) for variant in _glob_variants(pattern))


@functools.lru_cache(maxsize=256)
def _glob_variants(pattern: str) -> tuple[str, ...]:
    """``pattern`` with each combination of its ``**/`` kept or removed (fnmatch's ``**/`` needs one folder)."""
    variants = [""]
    for index, part in enumerate(pattern.split("**/")):
        variants = (
            [v + part for v in variants] if index == 0 else [v + f for v in variants for f in ("**/" + part, part)]
        )
    return tuple(dict.fromkeys(variants))


def _match_names(path: Path, rootdir: Path) -> list[str]:
    """The names a glob may match a dataset by: as found and, when that differs, as resolved (symlinks)."""
    found = [dataset_name(path, rootdir), Path(os.path.abspath(path)).as_posix()]
    real = path.resolve()
    if real != Path(os.path.abspath(path)):
        found += [dataset_name(real, rootdir.resolve()), real.as_posix()]
    return found


def parse_dataset_settings(lines: Sequence[str]) -> list[tuple[str, DatasetSettings]]:
    """Parse ``gym_dataset_settings`` lines of the form ``<glob>: key=value key=value ...``.

    Raises :class:`pytest.UsageError` quoting the line for an unknown key or a bad value.
    """
    parsed: list[tuple[str, DatasetSettings]] = []
    for line in lines:
        pattern, sep, rest = line.partition(": ")
        if not sep and line.rstrip().endswith(":"):  # a glob with no settings (yet)
            pattern, sep, rest = line.rstrip()[:-1], ":", ""
        if not sep or not pattern.strip():
            raise pytest.UsageError(f"gym_dataset_settings: expected '<glob>: key=value ...', got {line!r}")
        values: dict[str, Any] = {}
        for pair in rest.split():
            key, eq, text = pair.partition("=")
            where = f"gym_dataset_settings line {line!r}"
            if not eq or key not in _SETTING_KEYS:
                raise pytest.UsageError(f"{where}: unknown setting {pair!r} (known: {', '.join(_SETTING_KEYS)})")
            if key in ("agent", "resources_server"):
                values[key] = text
            elif key == "repeats":
                values[key] = _positive_int(text, f"{where}: repeats")
            elif key == "reward_range":
                values[key] = _reward_range(text, f"{where}: reward_range")
            elif key == "min_pass_at_k":
                values[key] = tuple(parse_pass_at_k(part, where) for part in text.split(","))
            else:
                values[key] = _number(text, f"{where}: {key}")
        parsed.append((pattern.strip(), DatasetSettings(**values)))
    return parsed


def parse_pass_at_k(text: str, where: str = "--gym-min-pass-at-k") -> tuple[int, float]:
    """``"K:V"`` as ``(k, minimum pass@k)``; raises :class:`pytest.UsageError` naming ``where``."""
    try:
        gate = gates.parse_pass_at_k(text)
    except ValueError as error:
        raise pytest.UsageError(f"{where}: {error}") from None
    assert gate.k is not None
    return gate.k, gate.threshold


def _reward_range(text: object, where: str) -> RewardRange | None:
    """``LO:HI`` as a :class:`~pytest_gym_eval.sequential.RewardRange`, None when unset; raises
    :class:`pytest.UsageError` naming ``where``."""
    if text is None or text == "":
        return None
    try:
        return parse_reward_range(str(text))
    except ValueError as error:
        raise pytest.UsageError(f"{where}: {error}") from None


def _positive_int(text: object, where: str) -> int | None:
    """A whole number >= 1, or None when unset; raises :class:`pytest.UsageError` naming ``where``."""
    return _whole(text, where, 1)


def _count(text: object, where: str) -> int | None:
    """A whole number >= 0, or None when unset; raises :class:`pytest.UsageError` naming ``where``."""
    return _whole(text, where, 0)


def _whole(text: object, where: str, minimum: int) -> int | None:
    if text is None or text == "":
        return None
    try:
        number = int(str(text))
    except ValueError:
        raise pytest.UsageError(f"{where}: expected a whole number, got {text!r}") from None
    if number < minimum:
        raise pytest.UsageError(f"{where}: must be at least {minimum}, got {number}")
    return number


def _number(text: object, where: str) -> float | None:
    if text is None or text == "":
        return None
    try:
        number = float(str(text))
    except ValueError:
        raise pytest.UsageError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(number):
        raise pytest.UsageError(f"{where}: expected a finite number, got {text!r}")
    if number < 0 and "timeout" in where:
        raise pytest.UsageError(f"{where}: a timeout cannot be negative, got {text!r}")
    return number


def _host_port(text: str | None) -> tuple[str, int] | None:
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise pytest.UsageError(f"--gym-head-server: expected HOST:PORT, got {text!r}")
    return host, int(port)


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
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise pytest.UsageError(f"--gym-ray-address (ini gym_ray_address): expected HOST:PORT, got {address!r}")
    if head_server is not None:
        raise pytest.UsageError(
            "--gym-ray-address cannot be combined with --gym-head-server: attached Gym servers already run on the "
            "Ray cluster they were started with"
        )
    return address
