"""The option table: every ``--gym-*`` command-line option declared once, with its ``gym_*`` ini twin
(:data:`OPTIONS`), and the ini options that have no command-line twin (:data:`INI_ONLY`). What each option means
and how it is shown in ``pytest --help`` is here; :func:`pytest_gym_eval.options.register.add_options` registers the
table with pytest, and :class:`~pytest_gym_eval.options.gym_options.GymOptions` resolves the values.

Imported on every pytest run in an environment with the plugin (through :mod:`.options`), so it imports only the
standard library and the defaults.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from pytest_gym_eval.core.defaults import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MIN_REPEATS,
    DEFAULT_MODEL_TYPE,
    DEFAULT_ROLLOUT_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
)
from pytest_gym_eval.stats.gate_kinds import KINDS, GateKind

NUMBER = "number"
"""An ini option holding a number: pytest's ``float`` where it has one
(:data:`~pytest_gym_eval.options.register.TYPED_INI`), else a string."""
WHOLE = "whole"
"""An ini option holding a whole number: pytest's ``int`` where it has one, else a string."""


def _keep_alive_seconds(text: str) -> float:
    """``--gym-keep-alive``'s value: seconds >= 0 (0 turns an ini ``gym_keep_alive`` off). Raises argparse's
    error for anything else, e.g. a dataset path the option took as its value."""
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


class Option(NamedTuple):
    """One ``--gym-x`` option and its ``gym_x`` ini twin.

    ``ini_type`` is pytest's ini type (``string``, ``linelist``, ``bool``) or :data:`NUMBER` / :data:`WHOLE`;
    None only for an option that deliberately has no ini twin, which ``no_ini`` then says why. ``ini`` names the
    twin when it is not the flag's name with underscores (``--gym-param`` / ``gym_params``). ``default`` is the
    default as the help shows it ("": none shown; the value itself is resolved by
    :class:`~pytest_gym_eval.options.gym_options.GymOptions`). ``path``: an ini value is a path relative to the ini
    file. The rest are argparse's (``type``, ``action``, ``metavar``, ``choices``, ``nargs``, ``const``).
    """

    flag: str
    help: str
    ini_type: str | None = "string"
    default: str = ""
    ini: str | None = None
    no_ini: str = ""
    path: bool = False
    type: Any = None
    action: str | None = None
    metavar: str | None = None
    choices: Sequence[str] | None = None
    nargs: str | None = None
    const: Any = None

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` (``--gym-x`` -> ``gym_x``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def ini_name(self) -> str | None:
        """The ini twin's name, None when there is none."""
        return None if self.ini_type is None else (self.ini or self.dest)

    def flag_help(self) -> str:
        """The help ``pytest --help`` shows for the flag (``%`` escaped for argparse)."""
        notes = [f"default {self.default}" if self.default else "", f"ini {self.ini_name}" if self.ini_name else ""]
        note = "; ".join(n for n in notes if n)
        return (f"{self.help} ({note})." if note else f"{self.help}.").replace("%", "%%")

    def ini_help(self) -> str:
        """The help ``pytest --help`` shows for the ini twin: the flag's, naming the flag."""
        notes = [self.flag, f"default {self.default}" if self.default else ""]
        where = "; a path relative to the ini file" if self.path else ""
        return f"{self.help} ({'; '.join(n for n in notes if n)}{where})."


class IniOption(NamedTuple):
    """A ``gym_*`` ini option with no command-line twin: what only a project's configuration says."""

    name: str
    help: str
    ini_type: str


def gate_option(kind: GateKind) -> Option:
    """The option (and ini twin) of a gate kind (:mod:`pytest_gym_eval.stats.gate_kinds`): a number, or a
    repeatable value (one per line in the ini file)."""
    if kind.repeatable:
        return Option(kind.flag, kind.help, "linelist", action="append", metavar=kind.metavar)
    return Option(kind.flag, kind.help, NUMBER, type=float, metavar=kind.metavar)


_BEATS = "beats a row's own value"

OPTIONS: tuple[Option, ...] = (
    Option(
        "--gym-checkout",
        "Gym checkout to run",
        default="the one `python -m pytest_gym_eval provision` built",
        metavar="PATH",
        path=True,
    ),
    Option(
        "--gym-repeats",
        "Rollouts per task; each repeat is one item `<task>[r<k>]`",
        WHOLE,
        default="1",
        type=int,
        metavar="N",
    ),
    Option(
        "--gym-pass-threshold",
        "A rollout passes when its reward is at least this",
        NUMBER,
        default="1.0",
        type=float,
        metavar="REWARD",
    ),
    Option(
        "--gym-agent",
        "Agent for rows without agent_ref and datasets without their own",
        default="<stem>_simple_agent",
        metavar="NAME",
    ),
    Option("--gym-model-url", "Base URL of the policy model, e.g. https://api.openai.com/v1", metavar="URL"),
    Option("--gym-model", "Policy model name", metavar="NAME"),
    Option(
        "--gym-model-type",
        "Gym model server type: openai_model (Responses API) or vllm_model (chat completions)",
        default=DEFAULT_MODEL_TYPE,
        metavar="TYPE",
    ),
    Option(
        "--gym-api-key-env",
        "Environment variable holding the model's API key; the key itself never reaches argv or logs",
        default=DEFAULT_API_KEY_ENV,
        metavar="VAR",
    ),
    Option(
        "--gym-replay",
        "Serve the policy model from recorded Gym rollouts on a loopback server (repeatable, in the ini file one "
        "path per line; no API key)",
        "linelist",
        action="append",
        metavar="ROLLOUTS.jsonl",
        path=True,
    ),
    Option(
        "--gym-policy",
        "Compare policy models in one session: NAME=URL[,model=SERVED_NAME][,key=ENV_VAR][,temperature=T][,top_p=P]"
        "[,max_output_tokens=N] (the key read from ENV_VAR, default --gym-api-key-env; a policy's sampling values "
        "beat the --gym-temperature, --gym-top-p and --gym-max-output-tokens options) or NAME=replay:ROLLOUTS.jsonl "
        "(repeatable, in the ini file one per line; items get ids like task[r0-NAME])",
        "linelist",
        action="append",
        metavar="NAME=SPEC",
    ),
    Option(
        "--gym-model-server",
        "Bind a model server a Gym environment names (its judge, reward model, user simulator...): "
        "NAME=URL,model=SERVED_NAME[,key=ENV_VAR][,type=responses|chat] (the key read from ENV_VAR, never given "
        "itself; type: the endpoint's API, default --gym-model-type's), NAME=policy (the policy model's endpoint) or "
        "NAME=replay:FILE[,type=responses|chat] (recorded answers, e.g. from `python -m pytest_gym_eval "
        "judge-recordings`, served on 127.0.0.1 with no key); "
        "NAME as the environment's config names it, e.g. judge_model (repeatable, in the ini file one per "
        "line; an environment judged by policy_model needs none, one left unbound is a usage error before Gym starts; "
        "a dataset's own model_server=NAME=SPEC in gym_dataset_settings beats it for that dataset's environment; "
        "NAME@POLICY=SPEC binds it for one --gym-policy's rollouts other than the baseline's; a verifier calling a "
        "judge with a client of its own, from judge_base_url-style keys or variables, is a warning: not bindable)",
        "linelist",
        action="append",
        metavar="NAME=SPEC",
        ini="gym_model_servers",
    ),
    Option(
        "--gym-baseline-policy",
        "The --gym-policy the others are compared with",
        default="the first named",
        metavar="NAME",
    ),
    Option(
        "--gym-head-server",
        "Attach to Gym servers that are already running instead of starting them (never stopped)",
        None,
        no_ini="which servers to attach to is one invocation's choice, never a project's",
        metavar="HOST:PORT",
    ),
    Option(
        "--gym-run-dir",
        "Folder under which each session makes a fresh run directory",
        default="pytest's basetemp",
        metavar="DIR",
        path=True,
    ),
    Option(
        "--gym-startup-timeout",
        "Seconds Gym's servers and the model endpoint get to become ready, and `gym eval run` to begin rolling out",
        NUMBER,
        default=f"{DEFAULT_STARTUP_TIMEOUT:g}",
        type=float,
        metavar="SECONDS",
    ),
    Option(
        "--gym-rollout-timeout",
        "Seconds without progress (no rollout landing) after which every rollout still pending errors, "
        "together; 0 waits forever",
        NUMBER,
        default=f"{DEFAULT_ROLLOUT_TIMEOUT:g}",
        type=float,
        metavar="SECONDS",
    ),
    Option(
        "--gym-concurrency",
        "Maximum rollouts Gym runs at once (gym eval run --concurrency)",
        WHOLE,
        default="Gym's",
        type=int,
        metavar="N",
    ),
    *(gate_option(kind) for kind in KINDS),
    Option(
        "--gym-gate-on",
        "Judge gates on the point estimate or on the lower end of the 95% interval; then an interval straddling "
        "the threshold is INCONCLUSIVE",
        default="point",
        choices=("point", "lower-bound"),
        metavar="{point,lower-bound}",
    ),
    Option(
        "--gym-inconclusive",
        "Whether an INCONCLUSIVE gate fails the session or passes",
        default="fail",
        choices=("fail", "pass"),
    ),
    Option(
        "--gym-familywise",
        "holm: judge every lower-bound gate of the session (all datasets, agents and policies, and the policy "
        "comparison gates) as one family by "
        "Holm's step-down procedure, so the chance of any wrong PASS or FAIL is at most 5% (off: each at 95%)",
        default="off",
        choices=("off", "holm"),
    ),
    Option(
        "--gym-report",
        "Write the reward summary and every rollout's reward and record location as JSON",
        metavar="PATH.json",
        path=True,
    ),
    Option(
        "--gym-baseline",
        "Compare with an earlier --gym-report: per-task drops and a paired t-test per dataset",
        metavar="PATH.json",
        path=True,
    ),
    Option(
        "--gym-max-drop",
        "CI gate: fail when a dataset's mean reward dropped significantly by more than this against --gym-baseline",
        NUMBER,
        type=float,
        metavar="REWARD",
    ),
    Option(
        "--gym-max-regressed-tasks",
        "CI gate: fail when more than N tasks that passed on every --gym-baseline repeat fail on every repeat now "
        "(0: any such task fails the gate)",
        WHOLE,
        type=int,
        metavar="N",
    ),
    Option(
        "--gym-max-regression",
        "CI gate (with two or more --gym-policy): fail unless every candidate is shown not worse than the baseline "
        "by more than this in mean reward (non-inferiority, paired by task)",
        NUMBER,
        type=float,
        metavar="DELTA",
    ),
    Option(
        "--gym-min-improvement",
        "CI gate (with two or more --gym-policy): fail unless every candidate is shown better than the baseline "
        "by more than this in mean reward (superiority, paired by task; 0: any improvement)",
        NUMBER,
        type=float,
        metavar="DELTA",
    ),
    Option(
        "--gym-fail-on-flip",
        "CI gate (with --gym-replay): fail when any rollout's reward differs from the recorded one",
        "bool",
        action="store_true",
    ),
    # Adaptive gates (issue 16): waves of rollouts judged with a confidence sequence, stopping once decided.
    Option(
        "--gym-adaptive",
        "Roll out in waves through one Gym and stop a gated dataset once an anytime-valid confidence sequence "
        "decides every gate (PASS or FAIL); --gym-repeats is the ceiling",
        "bool",
        action="store_true",
    ),
    Option(
        "--gym-min-repeats",
        "With --gym-adaptive: repeats per task in the first wave; each next wave doubles them",
        WHOLE,
        default=f"{DEFAULT_MIN_REPEATS}",
        type=int,
        metavar="N",
    ),
    Option(
        "--gym-reward-range",
        "With --gym-adaptive: the range every reward lies in (or reward_range= per dataset)",
        default="0:1",
        metavar="LO:HI",
    ),
    # Memory across runs (issue 26, docs/history.md): every run appended to a history, a quarantine list.
    Option(
        "--gym-history",
        "Append the run and every rollout to this history (a SQLite file path, or a postgresql:// URL with the "
        "postgres extra) and report each task's stability and each dataset's drift from it; a --gym-shard "
        "session does not write (`python -m pytest_gym_eval merge --gym-history` writes the merged run once)",
        metavar="PATH|URL",
    ),
    Option(
        "--gym-quarantine",
        "A quarantine list (docs/history.md: DATASET TASK EXPIRES REASON per line): its tasks are rolled out and "
        "reported but left out of the gates until their expiry",
        metavar="FILE",
        path=True,
    ),
    # Reports people read: the HTML page and the Markdown summary (also for CI step summaries).
    Option(
        "--gym-html",
        "Write one self-contained HTML page (summaries, histograms, task x repeat grids, transcripts) at the end "
        "of the session",
        metavar="PATH.html",
        path=True,
    ),
    Option(
        "--gym-markdown",
        "Write the Markdown summary that a GitHub step summary gets, e.g. for a pull-request comment",
        metavar="PATH.md",
        path=True,
    ),
    # The fast inner loop: a warm Gym kept between sessions, and resuming an interrupted run.
    Option(
        "--gym-keep-alive",
        "Keep Gym's servers up after the session for the next session with the same Gym configuration, until "
        "idle for SECONDS (0: off). `python -m pytest_gym_eval status` lists warm Gyms, `... stop [--all]` "
        "stops them",
        NUMBER,
        default=f"{DEFAULT_KEEP_ALIVE:g}",
        type=_keep_alive_seconds,
        nargs="?",
        const=DEFAULT_KEEP_ALIVE,
        metavar="SECONDS",
    ),
    Option(
        "--gym-resume",
        "Reuse every scored rollout of this earlier run directory (same datasets' rows, tasks, repeats and Gym "
        "configuration) and roll out only the missing or errored ones; all are reported as one session",
        None,
        no_ini="resuming names one earlier run, never a standing configuration",
        metavar="RUN_DIR",
    ),
    # Runs larger than one machine.
    Option(
        "--gym-shard",
        "Run only shard I of N (numbered from 1) of each dataset's tasks, all repeats of a task together; merge "
        "the shards' --gym-report files with `python -m pytest_gym_eval merge`",
        metavar="I/N",
    ),
    Option(
        "--gym-ray-address",
        "Run Gym on this existing Ray cluster (its GCS address, as `ray start --head` prints it) instead of a "
        "private one; the session never stops the cluster",
        metavar="HOST:PORT",
    ),
    # Sampling values go into every row's responses_create_params and beat the row's own (sampling.py); the ini
    # values stay strings that sampling_from_config parses (its errors name the ini key).
    Option("--gym-temperature", f"Sampling temperature of every request ({_BEATS})", type=float, metavar="T"),
    Option("--gym-top-p", f"Nucleus sampling top_p of every request ({_BEATS})", type=float, metavar="P"),
    Option(
        "--gym-max-output-tokens",
        f"Most tokens the model may generate per call, max_output_tokens ({_BEATS})",
        type=int,
        metavar="N",
    ),
    Option(
        "--gym-seed",
        "Sampling seed; repeat k uses N+k. Only with --gym-model-type=vllm_model, which passes it to the endpoint",
        type=int,
        metavar="N",
    ),
    Option(
        "--gym-param",
        "Any other responses_create_params key of every request, VALUE read as JSON when it is JSON, e.g. "
        f'reasoning={{"effort":"low"}} (repeatable, in the ini file one per line; {_BEATS})',
        "linelist",
        ini="gym_params",
        action="append",
        metavar="KEY=VALUE",
    ),
    Option(
        "--gym-price-per-mtok",
        "Prices per million input and output tokens, e.g. 0.15:0.60: the summary and reports then estimate the "
        "cost (no built-in prices)",
        metavar="IN:OUT",
    ),
    Option(
        "--gym-latency",
        "Have Gym record each rollout's latency (turns on its model-call observability, which also stores every "
        "model call under the run directory)",
        "bool",
        action="store_true",
    ),
)
"""Every ``--gym-*`` option with its ini twin, in the order ``pytest --help`` lists them."""

INI_ONLY: tuple[IniOption, ...] = (
    IniOption("gym_datasets", "Globs of .jsonl files, relative to the rootdir, collected as Gym datasets.", "linelist"),
    IniOption("gym_id_field", "Row field holding the task id (default: the first of id, uuid, task_id).", "string"),
    IniOption(
        "gym_dataset_settings",
        "One line per dataset glob: `<glob>: key=value ...` with keys agent, resources_server, repeats, "
        f"pass_threshold, {', '.join(kind.setting for kind in KINDS)}, reward_range, model_server (NAME=SPEC as "
        "--gym-model-server's, repeatable; it beats --gym-model-server for the dataset's environment).",
        "linelist",
    ),
)
"""The ini options with no command-line twin: which files are datasets, and how, is the project's to say."""
