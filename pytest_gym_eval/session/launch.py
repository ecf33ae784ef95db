"""Which Gym to start for a session's options (:class:`Launch`): the checkout (provisioned when missing), the
agents' config files, the policy model endpoint (the replay model server among them), a warm Gym, the settings of
the run; and the run directory (:func:`new_run_dir`).

No pytest session here: a :class:`Launch` takes the resolved options and a callable for progress lines, so it can
be made and checked in a unit test.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.fingerprint import GymConfiguration
from pytest_gym_eval.gym.run import GymStartError, ModelEndpoint, RunSettings, find_agent_config, ray_temp_dir
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.session import preflight
from pytest_gym_eval.tasks.model_servers import (
    AgentCopy,
    DatasetBindings,
    ModelServerBinding,
    ModelServerSpecError,
    binding_fingerprint,
    dataset_bindings,
    merge_blocks,
    model_server_blocks,
    model_type_templates,
    policy_bindings,
    url_environment,
)
from pytest_gym_eval.tasks.models import (
    AGENT_SEPARATOR,
    MODEL_FIELDS,
    Policy,
    base_agent,
    policy_url_environment,
    server_blocks,
)
from pytest_gym_eval.tasks.plan import RunPlan

if TYPE_CHECKING:
    from pytest_gym_eval.replay import ReplayServer
    from pytest_gym_eval.warm import WarmGym

REPLAY_MODEL_NAME = "replay"


def new_run_dir(options: GymOptions, factory: pytest.TempPathFactory) -> Path:
    """Make a fresh run directory under ``--gym-run-dir`` (``gym-run-<stamp>-XXXX``) or, without it, under pytest's
    basetemp (``factory``). Raises :class:`pytest.UsageError` naming the option when the directory cannot be made
    there (the folder is not writable, is a file, or lies on a read-only file system) or its disk is (nearly)
    full (then nothing is left behind)."""
    try:
        if options.run_dir is not None:
            options.run_dir.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            run_dir = Path(tempfile.mkdtemp(prefix=f"gym-run-{stamp}-", dir=options.run_dir))
        else:
            run_dir = factory.mktemp("gym-run", numbered=True)
    except OSError as error:
        where = (
            f"--gym-run-dir={options.run_dir}"
            if options.run_dir is not None
            else "pytest's basetemp (set --basetemp or --gym-run-dir)"
        )
        reason = error.strerror or str(error)
        target = f" ({error.filename})" if error.filename else ""
        raise pytest.UsageError(f"{where}: cannot make the run directory there: {reason}{target}") from None
    if full := causes.disk_full(run_dir, causes.MIN_FREE):
        with contextlib.suppress(OSError):
            run_dir.rmdir()
        where = f"--gym-run-dir={options.run_dir}" if options.run_dir is not None else "basetemp"
        raise pytest.UsageError(
            f"{where}: {full}; a run needs at least {causes.MIN_FREE // 2**20} MiB for Gym's and Ray's logs, "
            "Gym's input and its rollouts (free some space, or point --gym-run-dir elsewhere)"
        )
    return run_dir


def whole_tasks_allowed(options: GymOptions) -> bool:
    """Whether this session may hand Gym whole tasks with ``--num-repeats R`` (see :mod:`pytest_gym_eval.tasks.plan`;
    the selection decides the rest). Not with ``--gym-seed`` (repeat k gets seed N + k, which needs a row per
    repeat), nor when the replay model serves a conversation it has more than one recording of (it tells
    the repeats apart by a tag each row carries, which a row of a whole task cannot), nor with
    ``--gym-adaptive`` (its waves select some repeats of each task) or ``--gym-resume`` (it rolls out what is
    missing), nor when policies are compared (``--gym-policy``: a row per rollout, the task's rows sharing its
    index, see :func:`shared_tasks_allowed`). The same answer in every pytest-xdist process: it depends on the
    options and the recordings only."""
    if options.sampling.seed is not None or options.adaptive or options.resume is not None or options.policies:
        return False
    if options.replay:  # attached too: the recordings may be what the attached servers' model replays
        from pytest_gym_eval.replay import RecordingError, load_recordings, recording_turns

        try:
            recordings = load_recordings(options.replay)
        except (RecordingError, OSError):
            return False  # the replay server reports the error when it starts
        sources: dict[object, int] = {}
        for recording in recordings:
            for key in {key for key, _ in recording_turns(recording)}:
                sources[key] = sources.get(key, 0) + 1
                if sources[key] > 1:
                    return False
    return True


def shared_tasks_allowed(options: GymOptions) -> bool:
    """Whether this session may stamp the rows of one task, a row per rollout, with one shared ``_ng_task_index``
    (shared-task mode, :mod:`pytest_gym_eval.tasks.plan`; the selection decides the rest): when policies are compared
    (``--gym-policy``), so that Gym's own aggregate holds each task once per policy and ``gym eval compare`` can
    join them; not with ``--gym-adaptive`` (each wave is a ``gym eval run`` of its own, in pair mode) nor
    ``--gym-resume`` (not allowed with policies yet)."""
    return bool(options.policies) and not options.adaptive and options.resume is None


class Launch:
    """What this session starts of Gym, found from ``options``: ``checkout`` (once loaded), ``model`` (the policy
    model endpoint, once known), ``replay`` (the replay model server this process started), ``warm`` (the warm Gym
    with ``--gym-keep-alive``) and ``cleanup`` (folders to remove once Gym is stopped). ``note`` receives progress
    lines (any thread)."""

    def __init__(self, options: GymOptions, note: Callable[[str], None]) -> None:
        self.options = options
        self.note = note
        self.checkout: provision.GymCheckout | None = None
        self.model: ModelEndpoint | None = None
        self.replay: ReplayServer | None = None
        self.more_replays: list[ReplayServer] = []
        """The replay model servers of ``--gym-policy`` policies other than the first."""
        self.model_server_replays: dict[str, ReplayServer] = {}
        """The replay model server of each ``--gym-model-server NAME=replay:FILE`` binding, by ``NAME``."""
        self.bindings: DatasetBindings | None = None
        """The model servers the run serves (``--gym-model-server``'s and the datasets' own), once planned
        (:meth:`plan_bindings`)."""
        self.more_models: list[tuple[str, str, str, str | None]] = []
        """``(policy, base URL, served model, API key variable)`` of every ``--gym-policy`` policy but the first."""
        self.warm: WarmGym | None = None
        self.cleanup: list[Path] = []
        self.configurations: dict[tuple[str, ...], GymConfiguration] = {}
        self._agent_config_cache: dict[tuple[tuple[str, Path], ...], list[Path]] = {}

    def load_checkout(self) -> provision.GymCheckout:
        """The Gym checkout (``--gym-checkout``, else the provisioned one, provisioned now when missing); raises
        :class:`GymStartError`."""
        if self.checkout is None:
            options = self.options
            try:
                self.checkout = (
                    provision.load_supported_checkout(options.checkout)
                    if options.checkout is not None
                    else provision.provision(log=self.note)
                )
            except provision.ProvisionError as error:
                raise GymStartError(str(error)) from None
        return self.checkout

    def run_settings(self, plan: RunPlan, run_dir: Path) -> RunSettings:
        options = self.options
        checkout = self.load_checkout()
        if options.head_server is None and (problem := preflight.model_type_problem(checkout.path, options.model_type)):
            raise GymStartError(problem)
        configs = self.agent_configs(checkout, plan)
        attach = None
        if options.keep_alive:
            self.warm = self.warm_gym(plan, configs, run_dir)
            attach = self.warm.acquire
        else:
            self.model = self.model_endpoint(run_dir)
        ray_dir, made = ray_temp_dir(run_dir)
        if made:
            self.cleanup.append(ray_dir)
        env = provision.gym_environment(checkout, ray_dir)  # + the URLs holding a password, which no file holds
        env.update({**(self.model.environment() if self.model else {}), **policy_url_environment(self.more_models)})
        planned = self.plan_bindings(checkout.path, plan, configs)
        if options.keep_alive:  # the warm Gym's keeper serves the bindings (replayed ones too): probed only here
            bindings = tuple(binding for binding in planned.served if binding.replay is None)
        else:
            bindings = self.served_model_servers(run_dir, planned.served)
        env.update(url_environment(bindings))
        return RunSettings(
            gym=checkout.gym_executable,
            env=env,
            cwd=checkout.path,
            model=self.model,
            gym_configs=tuple(dict.fromkeys(configs)),
            head_server=options.head_server,
            startup_timeout=options.startup_timeout,
            concurrency=options.concurrency,
            sampling=options.sampling,
            policies=options.policies,
            record_latency=options.latency,
            tag_repeats=bool(options.replay) or any(policy.replay for policy in options.policies),
            ray_address=options.ray_address,
            attach=attach,
            servers_gone=self.warm.gone if self.warm is not None else None,
            server_blocks=merge_blocks(
                {**self._server_blocks(plan, checkout), **self._model_server_blocks(checkout, bindings)},
                planned.rewired,
            ),
            model_servers=bindings,
        )

    def plan_bindings(self, checkout: Path, plan: RunPlan, configs: Sequence[Path]) -> DatasetBindings:
        """The model servers ``plan``'s run serves (:func:`~pytest_gym_eval.tasks.model_servers.dataset_bindings`):
        ``--gym-model-server``'s, and those the datasets bind themselves (``model_server=`` in
        ``gym_dataset_settings``) for the environments their agents run, found in ``configs`` (the agents' config
        files); and the ``NAME@POLICY`` ones, each served for that policy's agent copies by copies of their
        environments (:func:`~pytest_gym_eval.tasks.model_servers.policy_bindings`). Raises :class:`GymStartError` for
        datasets running one environment that bind it differently, or a reference that cannot be rewired."""
        options = self.options
        own: dict[str, tuple[Path, tuple[ModelServerBinding, ...]]] = {}
        for rollout in plan.rollouts:
            name = rollout.nodeid.split("::", 1)[0]
            if name not in own and (servers := options.dataset_settings(rollout.dataset).model_servers):
                own[name] = (rollout.dataset, servers)
        if not own and not options.policy_model_servers:
            self.bindings = DatasetBindings(options.model_servers, {}, {})
            return self.bindings
        loaded = preflight.load_configs(checkout, configs)
        datasets: dict[str, tuple[list[str], tuple[ModelServerBinding, ...]]] = {}
        for rollout in plan.rollouts:
            name = rollout.nodeid.split("::", 1)[0]
            environments = datasets.setdefault(name, ([], own[name][1] if name in own else ()))[0]
            found = preflight.agent_environments(loaded, base_agent(rollout.agent, options.policies))
            environments += [environment for environment in found if environment not in environments]
        references = [need.reference() for need in preflight.model_server_needs(loaded)]
        copies = [
            AgentCopy(
                agent, policy.name, tuple(preflight.agent_resources_refs(loaded, base_agent(agent, options.policies)))
            )
            for agent in plan.agents
            for policy in options.policies[1:]
            if agent.endswith(f"{AGENT_SEPARATOR}{policy.name}")
        ]
        try:
            planned = dataset_bindings(options.model_servers, datasets, references)
            served, blocks = policy_bindings(options.policy_model_servers, copies, references)
        except ModelServerSpecError as error:
            raise GymStartError(str(error)) from None
        self.bindings = replace(
            planned, served=(*planned.served, *served), rewired=merge_blocks(planned.rewired, blocks)
        )
        return self.bindings

    def served_model_servers(
        self, run_dir: Path, bindings: Sequence[ModelServerBinding] | None = None
    ) -> tuple[ModelServerBinding, ...]:
        """``bindings`` (by default ``--gym-model-server``'s) with each ``NAME=replay:FILE`` one replaced by the URL
        of a replay
        model server started here for it (on 127.0.0.1, once per session; stopped with the policy's, by
        :mod:`~pytest_gym_eval.session.stopping`), logging to :meth:`RunPaths.model_server_replay_log`. Its type is
        its ``type=``'s, else ``--gym-model-type``'s, as for a replayed policy (the replay server answers both
        APIs). Raises
        :class:`GymStartError` naming the binding for recordings the replay server refuses."""
        from pytest_gym_eval.replay import RecordingError, ReplayServer

        served = []
        for binding in self.options.model_servers if bindings is None else bindings:
            if binding.replay is None:
                served.append(binding)
                continue
            replay = self.model_server_replays.get(binding.name)
            if replay is None:
                log = RunPaths(run_dir).model_server_replay_log(binding.name)
                try:
                    log.parent.mkdir(parents=True, exist_ok=True)
                    replay = ReplayServer(
                        (binding.replay,),
                        log_path=log,
                        model_name=REPLAY_MODEL_NAME,
                    )
                except (RecordingError, OSError) as error:
                    raise GymStartError(f"--gym-model-server {binding.name}=replay:{binding.replay}: {error}") from None
                replay.start()
                self.model_server_replays[binding.name] = replay
                self.note(f"replay model server of {binding.name}: {replay.base_url} ({replay.recordings} recordings)")
            served.append(
                ModelServerBinding(binding.name, url=replay.base_url, model=REPLAY_MODEL_NAME, api=binding.api)
            )
        return tuple(served)

    def _model_server_blocks(
        self, checkout: provision.GymCheckout, bindings: Sequence[ModelServerBinding]
    ) -> dict[str, Any]:
        """The Gym config blocks serving ``bindings`` (:meth:`served_model_servers`)
        (:func:`~pytest_gym_eval.tasks.model_servers.model_server_blocks`), each type's fields taken from the
        checkout's own model server config; raises :class:`GymStartError` for a binding it cannot serve."""
        if not bindings:
            return {}
        templates = model_type_templates(checkout.path, MODEL_FIELDS)
        variables = {b.api_key_env for b in bindings if b.api_key_env}
        try:
            key_set = {variable: bool(os.environ.get(variable)) for variable in variables}
            types = preflight.model_types(checkout.path) or ()
            return model_server_blocks(bindings, self.options.model_type, templates, key_set, types)
        except ModelServerSpecError as error:
            raise GymStartError(str(error)) from None

    def _server_blocks(self, plan: RunPlan, checkout: provision.GymCheckout) -> dict[str, Any]:
        """The Gym config blocks serving every ``--gym-policy`` policy but the first (:func:`server_blocks`; none for
        one policy model), with environment servers in front of the agent copies where the checkout's Gym has them
        (:func:`provision.has_environment_servers`)."""
        if not self.more_models:
            return {}
        fronted = provision.has_environment_servers(checkout.version)
        return server_blocks(plan.agents, self.more_models, self.options.model_type, fronted)

    def agent_configs(self, checkout: provision.GymCheckout, plan: RunPlan) -> list[Path]:
        """The Gym config file of each of ``plan``'s agents; raises :class:`GymStartError` for an agent no config
        of the checkout defines. Found once per set of (agent, dataset) pairs: finding one reads the checkout's
        config files (~10 ms), and a run needs them twice before Gym starts (its manifest and its settings)."""
        used = tuple(sorted({(r.agent, r.dataset) for r in plan.rollouts}))
        if used not in self._agent_config_cache:
            self._agent_config_cache[used] = self._find_agent_configs(checkout, plan)
        return self._agent_config_cache[used]

    def _find_agent_configs(self, checkout: provision.GymCheckout, plan: RunPlan) -> list[Path]:
        configs = []
        for agent in plan.agents:
            config_path = find_agent_config(
                checkout.path, base_agent(agent, self.options.policies), self._agent_server(plan, agent)
            )
            if config_path is None:
                raise GymStartError(self._agent_problem(checkout.path, plan, agent))
            configs.append(config_path)
        return configs

    def _agent_server(self, plan: RunPlan, agent: str) -> str | None:
        """The ``resources_server=`` setting of the datasets ``agent`` runs in ``plan`` (None unless they agree)."""
        datasets = {r.dataset for r in plan.rollouts if r.agent == agent}
        named = {server for d in datasets if (server := self.options.dataset_settings(d).resources_server)}
        return named.pop() if len(named) == 1 else None

    def _agent_problem(self, checkout: Path, plan: RunPlan, agent: str) -> str:
        names = sorted({r.nodeid.split("::", 1)[0] for r in plan.rollouts if r.agent == agent})
        return preflight.agent_problem(checkout, agent, names, self._agent_server(plan, agent))

    def check_before_start(self, plan: RunPlan) -> None:
        """Check what can be checked of ``plan``'s run before Gym starts (:mod:`pytest_gym_eval.session.preflight`):
        every
        agent defined by a config of the checkout, ``--gym-model-type`` one of its model servers (not when attached
        to running servers, whose model is theirs). Raises :class:`pytest.UsageError` with one message per problem
        (exit status 4); checks nothing when the checkout is not there yet (it is provisioned when Gym starts).
        """
        checkout = preflight.local_checkout(self.options.checkout)
        if checkout is None:
            return
        policies = self.options.policies
        found = {
            agent: find_agent_config(checkout, base_agent(agent, policies), self._agent_server(plan, agent))
            for agent in plan.agents
        }
        problems = [self._agent_problem(checkout, plan, agent) for agent, config in found.items() if config is None]
        if self.options.head_server is None and (
            problem := preflight.model_type_problem(checkout, self.options.model_type)
        ):
            problems.append(problem)
        if self.options.head_server is None:  # attached servers were bound by whoever started them
            configs = list(dict.fromkeys(config for config in found.values() if config is not None))
            bound = {binding.name for binding in self.options.model_servers}
            try:
                bound_in = self.plan_bindings(checkout, plan, configs).bound_in
            except GymStartError as error:
                problems.append(str(error))
                bound_in = {}
            loaded = preflight.load_configs(checkout, configs)
            problems += preflight.model_server_problems(checkout, configs, bound, bound_in=bound_in, loaded=loaded)
            if not problems:
                for judge in preflight.unmanaged_judges(checkout, loaded):
                    self.note(f"warning: {preflight.unmanaged_judge_warning(judge, checkout)}")
                session_wide = [b.name for b in self.options.model_servers if b.for_policy is None]
                for warning in preflight.unused_binding_warnings(session_wide, loaded):
                    self.note(f"warning: {warning}")
        if problems:
            raise pytest.UsageError("\n".join(problems))

    def model_endpoint(self, run_dir: Path) -> ModelEndpoint | None:
        options = self.options
        if options.policies:
            return self.policy_endpoints(run_dir)
        if options.replay and options.head_server is not None:
            # Attached servers keep the model they were started with: the recordings only serve to compare
            # each rollout's reward with the recorded one.
            self.note("attached: --gym-replay recordings are compared with the rewards, not served")
            return None
        if options.replay:
            from pytest_gym_eval.replay import RecordingError, ReplayServer

            try:
                self.replay = ReplayServer(
                    options.replay,
                    log_path=RunPaths(run_dir).replay_log,
                    model_name=REPLAY_MODEL_NAME,
                )
            except (RecordingError, OSError) as error:
                raise GymStartError(f"--gym-replay: {error}") from None
            self.replay.start()
            self.note(f"replay model server: {self.replay.base_url} ({self.replay.recordings} recordings)")
            return ModelEndpoint(self.replay.base_url, REPLAY_MODEL_NAME, options.model_type, options.api_key_env)
        if options.model_url:
            if not options.model:
                raise GymStartError("--gym-model-url needs --gym-model (the model name the endpoint serves)")
            return ModelEndpoint(options.model_url, options.model, options.model_type, options.api_key_env)
        if options.head_server is not None:
            return None
        raise GymStartError(
            f"no policy model: pass --gym-model-url and --gym-model (API key from ${options.api_key_env}), "
            "or --gym-replay=ROLLOUTS.jsonl to replay recorded answers"
        )

    def policy_endpoints(self, run_dir: Path) -> ModelEndpoint:
        """Start a replay model server for each replayed ``--gym-policy``, note every policy but the first in
        :attr:`more_models` and return the first's endpoint (Gym's ``policy_model``); raises :class:`GymStartError`
        for recordings the replay server refuses."""
        endpoints = [self._policy_endpoint(policy, run_dir) for policy in self.options.policies]
        self.more_models = [  # a key variable that is unset or empty gives Gym "no-key", as for the first policy
            (policy.name, endpoint.url, endpoint.model, endpoint.api_key_env if endpoint.api_key() else None)
            for policy, endpoint in zip(self.options.policies[1:], endpoints[1:], strict=True)
        ]
        return endpoints[0]

    def _policy_endpoint(self, policy: Policy, run_dir: Path) -> ModelEndpoint:
        options = self.options
        if policy.replay is None:
            assert policy.url is not None and policy.model is not None  # parse_policy saw to it
            return ModelEndpoint(
                policy.url, policy.model, options.model_type, policy.api_key_env or options.api_key_env
            )
        from pytest_gym_eval.replay import RecordingError, ReplayServer

        try:
            paths = RunPaths(run_dir)
            replay = ReplayServer(
                (policy.replay,),
                log_path=paths.replay_log if self.replay is None else paths.policy_replay_log(policy.name),
                model_name=REPLAY_MODEL_NAME,
            )
        except (RecordingError, OSError) as error:
            raise GymStartError(f"--gym-policy {policy.name}: {error}") from None
        replay.start()
        if self.replay is None:
            self.replay = replay
        else:
            self.more_replays.append(replay)
        self.note(f"replay model server of policy {policy.name}: {replay.base_url} ({replay.recordings} recordings)")
        return ModelEndpoint(replay.base_url, REPLAY_MODEL_NAME, options.model_type, options.api_key_env)

    def configuration(self, plan: RunPlan) -> GymConfiguration:
        """The Gym configuration of a run of ``plan`` (:mod:`pytest_gym_eval.gym.fingerprint`); loads, or provisions,
        the checkout. Raises :class:`GymStartError` (an agent without a config, no checkout) or OSError."""
        agents = (*plan.agents, "", *sorted({str(r.dataset) for r in plan.rollouts}))  # a dataset may bind a judge
        if agents not in self.configurations:
            options = self.options
            checkout = self.load_checkout()
            configs = self.agent_configs(checkout, plan)
            head = options.head_server
            self.configurations[agents] = GymConfiguration.build(
                checkout, configs, options.model_type,
                replay=options.replay if head is None else (),
                model_url=options.model_url, model=options.model, api_key_env=options.api_key_env,
                head_server=f"{head[0]}:{head[1]}" if head is not None else None,
                model_servers={
                    b.name: binding_fingerprint(b, options.model_type)
                    for b in self.plan_bindings(checkout.path, plan, configs).served
                },
            )  # fmt: skip
        return self.configurations[agents]

    def warm_gym(self, plan: RunPlan, configs: Sequence[Path], run_dir: Path) -> WarmGym:
        """This session's :class:`~pytest_gym_eval.warm.WarmGym` for ``plan`` (acquired by the run's thread)."""
        from pytest_gym_eval.gym.orphans import Owner
        from pytest_gym_eval.warm import WarmGym, warm_spec
        from pytest_gym_eval.warm.registry import Registry

        options = self.options
        assert self.checkout is not None and options.keep_alive
        if not options.replay and not (options.model_url and options.model):
            self.model_endpoint(run_dir)  # raises the usual error naming what is missing
        planned = self.plan_bindings(self.checkout.path, plan, configs)
        spec = warm_spec(
            self.configuration(plan), Registry(), self.checkout.path, configs, options.model_type,
            replay=options.replay, model_url=options.model_url, model=options.model,
            api_key_env=options.api_key_env, startup_timeout=options.startup_timeout, idle_timeout=options.keep_alive,
            record_latency=options.latency, model_servers=planned.served, rewired=planned.rewired,
        )  # fmt: skip
        return WarmGym(spec, Owner.current(run_dir), run_dir, Registry())
