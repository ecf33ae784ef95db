"""Model servers a Gym environment names besides the policy (a judge, a reward model, a user simulator, an
embedding model), bound by name to an endpoint (``--gym-model-server``): parsing the binding specs, and the Gym
config blocks that serve them.

A spec is ``NAME=URL,model=SERVED_NAME[,key=ENV_VAR][,type=responses|chat]`` (an OpenAI-compatible endpoint; the
key is read from the environment variable ``ENV_VAR``, never given itself; ``type`` says what the endpoint speaks:
``responses`` is Gym's ``openai_model`` server, ``chat`` its ``vllm_model``), ``NAME=policy`` (the policy model's
endpoint) or ``NAME=replay:FILE[,type=responses|chat]`` (recordings, served by a replay model server the session
starts for ``NAME``, which is then bound as an endpoint of that API:
:meth:`~pytest_gym_eval.session.launch.Launch.served_model_servers`). ``NAME`` is the Gym model server instance an
environment's config names, e.g. ``judge_model`` in ``judge_model_server: {type: responses_api_models, name:
judge_model}``; ``NAME@POLICY=...`` binds it for one ``--gym-policy``'s rollouts (:func:`policy_bindings`).

Each binding becomes a full block ``NAME: {responses_api_models: {_delete_key: <other types>, <type>: {...}}}`` in
the config file the plugin hands ``gym env start`` after the environments' own: it replaces whatever block the
environment defines under that name (Gym's ``_delete_key`` drops the other server types; fields of the same type
are overridden).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.credentials import config_url, endpoint_url_problem, has_secret, redact_value
from pytest_gym_eval.core.files import file_sha256
from pytest_gym_eval.core.gym_yaml import read_yaml_files
from pytest_gym_eval.tasks.models import MODEL_FIELDS, NAME_PATTERN, REPLAY_PREFIX

OPTION = "--gym-model-server"
POLICY_SERVER = "policy_model"
"""Gym's own name for the policy model's server; an environment that names it is judged by the policy."""
POLICY_FORM = "policy"
API_TYPES = {"responses": "openai_model", "chat": "vllm_model"}
"""``type=`` of a spec: the Gym model server type that talks to an endpoint of that API."""
URL_VARIABLE_PREFIX = "PYTEST_GYM_EVAL_MODEL_SERVER_URL_"
"""The environment variable that hands Gym a bound URL holding a secret (``..._<NAME>``)."""
POLICY_VALUES = {"url": "${policy_base_url}", "model": "${policy_model_name}", "key": "${policy_api_key}"}
"""What a ``NAME=policy`` block holds: the policy model's own top-level values of the run's Gym config."""
SPEC_FORMS = (
    "NAME=URL,model=SERVED_NAME[,key=ENV_VAR][,type=responses|chat], NAME=policy or NAME=replay:FILE[,type=...] "
    "(NAME@POLICY=... "
    "for one --gym-policy's rollouts)"
)


class ModelServerSpecError(ValueError):
    """A ``--gym-model-server`` value that cannot be used; the message names the option and the value."""


@dataclass(frozen=True)
class ModelServerBinding:
    """One model server an environment names, bound to an endpoint: ``name`` (Gym's server instance name) and
    either ``url`` + ``model`` (+ ``api_key_env``, the *name* of the variable holding the key; ``api``, the endpoint's
    API: ``responses``, ``chat`` or None for ``--gym-model-type``'s), ``policy`` (the policy model's endpoint) or
    ``replay`` (a recordings file to serve)."""

    name: str
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    api: str | None = None
    policy: bool = False
    replay: Path | None = None
    for_policy: str | None = None
    """``NAME@POLICY=...``: the ``--gym-policy`` whose rollouts alone this binding judges (None: every policy's)."""

    def model_type(self, default: str) -> str:
        """The Gym model server type that serves this binding: ``type=``'s, else ``default`` (``--gym-model-type``)
        when it is one :data:`~pytest_gym_eval.tasks.models.MODEL_FIELDS` knows, else ``openai_model``."""
        if self.api is not None:
            return API_TYPES[self.api]
        return default if default in MODEL_FIELDS else "openai_model"

    def url_variable(self) -> str:
        """The environment variable that hands Gym this binding's URL when it holds a secret."""
        return f"{URL_VARIABLE_PREFIX}{self.name}"

    def described(self) -> dict[str, object]:
        """What may be shown of the binding (fingerprints, reports): its form, URL without secrets, model, key
        *variable* and API; never a key or a password."""
        if self.policy:
            return {"bound_to": POLICY_FORM}
        if self.replay is not None:
            return {"bound_to": "replay", "replay": str(self.replay)}
        url = redact_value(self.url) if self.url is not None else None
        return {"url": url, "model": self.model, "api_key_env": self.api_key_env, "api": self.api}


def parse_model_server(text: str, base: Path, option: str = OPTION) -> ModelServerBinding:
    """One ``--gym-model-server`` value (``option`` names where it came from, e.g. the ini's ``gym_model_servers``).
    ``base`` resolves a relative replay path. Raises :class:`ModelServerSpecError` naming ``option`` and the value
    (a URL's password redacted) for a missing ``=``, a name that is no Gym server instance name or is the policy's
    own (``policy_model``), an unknown or repeated ``key=value`` part, a URL without ``model=``, a ``type`` other
    than ``responses``/``chat``, or a replay file that does not exist."""
    shown = f"{option} {redact_value(text)!r}"
    name, equals, rest = (part.strip() for part in text.partition("="))
    if not equals or not rest:
        raise ModelServerSpecError(f"{shown}: expected {SPEC_FORMS}")
    name, at, for_policy = (part.strip() for part in name.partition("@"))
    if at and not NAME_PATTERN.match(for_policy):
        raise ModelServerSpecError(f"{shown}: NAME@POLICY names a --gym-policy after the @, got {for_policy!r}")
    binding = _parse_binding(shown, name, rest, base)
    return replace(binding, for_policy=for_policy) if at else binding


def _parse_binding(shown: str, name: str, rest: str, base: Path) -> ModelServerBinding:
    if not NAME_PATTERN.match(name):
        raise ModelServerSpecError(
            f"{shown}: a model server's name is a letter then letters, digits or _, got {name!r}"
        )
    if name == POLICY_SERVER or name.endswith(f"_{POLICY_SERVER}"):
        raise ModelServerSpecError(
            f"{shown}: {name!r} is the policy model's server (set it with --gym-model-url or --gym-policy); an "
            f"environment whose judge is {POLICY_SERVER!r} is judged by the policy"
        )
    if rest == POLICY_FORM:
        return ModelServerBinding(name, policy=True)
    if rest.startswith(REPLAY_PREFIX):
        file, comma, replay_api = rest.removeprefix(REPLAY_PREFIX).rpartition(",type=")
        if not comma:
            file, replay_api = rest.removeprefix(REPLAY_PREFIX), ""
        elif replay_api not in API_TYPES:
            raise ModelServerSpecError(f"{shown}: type={replay_api}: expected {' or '.join(API_TYPES)}")
        if not file.strip():
            raise ModelServerSpecError(f"{shown}: expected a recordings file after {REPLAY_PREFIX}, got none")
        path = (base / Path(file).expanduser()).resolve()
        if not path.is_file():
            raise ModelServerSpecError(f"{shown}: no such recordings file: {path}")
        return ModelServerBinding(name, replay=path, api=replay_api or None)
    url, *parts = (part.strip() for part in rest.split(","))
    fields: dict[str, str] = {}
    for part in parts:
        key, eq, value = (piece.strip() for piece in part.partition("="))
        if not eq or key not in ("model", "key", "type") or not value or key in fields:
            raise ModelServerSpecError(
                f"{shown}: {part!r} is not model=SERVED_NAME, key=ENV_VAR or type=responses|chat (each at most once)"
            )
        fields[key] = value
    if not url or "://" not in url or "model" not in fields:
        raise ModelServerSpecError(f"{shown}: an endpoint needs its URL (http://...) and model=SERVED_NAME")
    if problem := endpoint_url_problem(url):
        raise ModelServerSpecError(f"{shown}: {problem} (key=ENV_VAR)")
    api = fields.get("type")
    if api is not None and api not in API_TYPES:
        raise ModelServerSpecError(f"{shown}: type={api}: expected {' or '.join(API_TYPES)}")
    return ModelServerBinding(name, url=url, model=fields["model"], api_key_env=fields.get("key"), api=api)


def parse_model_servers(texts: Iterable[str], base: Path, option: str = OPTION) -> tuple[ModelServerBinding, ...]:
    """Every value of ``option`` (:func:`parse_model_server`); raises :class:`ModelServerSpecError` also for a name
    bound twice."""
    bindings = tuple(parse_model_server(text, base, option) for text in texts if text.strip())
    names = [f"{b.name}@{b.for_policy}" if b.for_policy else b.name for b in bindings]
    if duplicate := next((name for name in names if names.count(name) > 1), None):
        raise ModelServerSpecError(f"{option}: the model server {duplicate!r} is bound twice")
    return bindings


def model_server_meta(bindings: Sequence[ModelServerBinding], default_type: str) -> dict[str, object]:
    """Facts for the JSON report's ``meta`` (and the JUnit suite properties): ``model_server.<NAME>.<fact>`` for each
    binding, its ``model``, Gym server ``type``, ``url`` (no password) and ``api_key_env`` (the variable's *name*),
    or ``bound_to`` = ``policy`` / ``replay``. Never a key."""
    meta: dict[str, object] = {}
    for binding in bindings:
        facts = {k: v for k, v in binding.described().items() if k not in ("api", "replay")}
        if "bound_to" not in facts:
            facts["type"] = binding.model_type(default_type)
        meta.update({f"model_server.{binding.name}.{key}": value for key, value in facts.items() if value is not None})
    return meta


def url_environment(bindings: Sequence[ModelServerBinding]) -> dict[str, str]:
    """What Gym's environment needs for the bound URLs :func:`model_server_blocks` writes as variables: the URL of
    each binding whose URL holds a secret, under its :meth:`ModelServerBinding.url_variable`."""
    return {b.url_variable(): b.url for b in bindings if b.url is not None and has_secret(b.url)}


def model_server_blocks(
    bindings: Sequence[ModelServerBinding],
    default_type: str,
    templates: dict[str, dict[str, Any]],
    key_set: dict[str, bool],
    types: Sequence[str] = (),
) -> dict[str, Any]:
    """The Gym config blocks serving ``bindings`` (for ``gym env start``), one per name.

    ``default_type`` is ``--gym-model-type`` (the type of a binding without ``type=`` and of ``NAME=policy``);
    ``templates`` the fields of each model server type's own ``policy_model`` block in the checkout
    (:func:`model_type_template`; ``entrypoint``, vllm's ``uses_reasoning_parser``, ...), of which the URL, model and
    key fields are replaced; ``key_set`` says, per key variable, whether it is set (an unset one gives Gym
    ``no-key``, as for the policy); ``types`` the checkout's model server types, every other of which the block
    deletes (``_delete_key``) from a same-named block an environment defines. The key enters only as
    ``${oc.env:VAR}``, a URL holding a secret as ``${oc.env:PYTEST_GYM_EVAL_MODEL_SERVER_URL_<NAME>}``
    (:func:`url_environment`). A ``NAME=policy`` block takes the policy's own ``${policy_base_url}``,
    ``${policy_model_name}`` and ``${policy_api_key}``. Raises
    :class:`ModelServerSpecError` for a replay binding not yet replaced by its replay server's URL (the session
    does that first: :meth:`~pytest_gym_eval.session.launch.Launch.served_model_servers`)."""
    blocks: dict[str, Any] = {}
    for binding in bindings:
        if binding.replay is not None:
            raise ModelServerSpecError(
                f"{OPTION} {binding.name}=replay:...: a replay binding is served by its replay server's URL"
            )
        model_type = binding.model_type(default_type)
        url_field, model_field, key_field = MODEL_FIELDS[model_type]
        if binding.policy:
            url, model, key = POLICY_VALUES["url"], POLICY_VALUES["model"], POLICY_VALUES["key"]
        else:
            assert binding.url is not None and binding.model is not None  # parse_model_server saw to it
            url, model = config_url(binding.url, binding.url_variable()), binding.model
            variable = binding.api_key_env
            key = f"${{oc.env:{variable}}}" if variable and key_set.get(variable) else "no-key"
        template = templates.get(model_type, {"entrypoint": "app.py"})
        fields = {**template, url_field: url, model_field: model, key_field: key}
        others = sorted((set(types) | set(templates)) - {model_type})
        server: dict[str, Any] = {"_delete_key": ",".join(others)} if others else {}
        blocks[binding.name] = {"responses_api_models": {**server, model_type: fields}}
    return blocks


def model_type_templates(checkout: Path, model_types: Iterable[str]) -> dict[str, dict[str, Any]]:
    """For each of ``model_types``, the fields of the ``policy_model`` block of
    ``responses_api_models/<model_type>/configs/<model_type>.yaml`` in ``checkout`` (the fields a server of that
    type needs), read by Gym's own Python (:func:`~pytest_gym_eval.core.gym_yaml.read_yaml_files`); a type whose
    file is missing or has no such block is left out."""
    paths = {t: checkout / "responses_api_models" / t / "configs" / f"{t}.yaml" for t in model_types}
    loaded = read_yaml_files(list(paths.values()), checkout)
    templates = {}
    for model_type, path in paths.items():
        try:
            fields = loaded[path]["policy_model"]["responses_api_models"][model_type]
        except (KeyError, TypeError):
            continue
        if isinstance(fields, dict):
            templates[model_type] = dict(fields)
    return templates


RESOURCES_REF_TYPE = "resources_servers"
INSTANCE_SEPARATOR = "__"
"""Between a model server's name and the environment's in the instance a dataset's own binding gets
(``judge_model__over_refusal_detection``)."""


@dataclass(frozen=True)
class ServerReference:
    """A model server a resources server's config names: ``environment`` (the resources server instance), ``kind``
    (its server type, the key under ``resources_servers``), ``key`` (the dotted key path inside that block,
    ``judge_model_server``) and ``server`` (the model server instance named, ``judge_model``)."""

    environment: str
    kind: str
    key: str
    server: str


@dataclass(frozen=True)
class DatasetBindings:
    """The model servers of a run whose datasets bind some themselves (``model_server=`` in
    ``gym_dataset_settings``): ``served`` every binding Gym serves (the session's, then each dataset binding under
    the name it is served by), ``rewired`` the config blocks that point an environment's reference at a dataset
    binding's own instance, and ``bound_in`` the names bound per environment (for the preflight)."""

    served: tuple[ModelServerBinding, ...]
    rewired: dict[str, Any]
    bound_in: dict[str, set[str]]


def dataset_bindings(
    session: Sequence[ModelServerBinding],
    datasets: Mapping[str, tuple[Sequence[str], Sequence[ModelServerBinding]]],
    references: Sequence[ServerReference],
) -> DatasetBindings:
    """Serve ``session`` (the ``--gym-model-server`` bindings) and the bindings each dataset sets itself.

    ``datasets`` maps a dataset's name to the environments (resources server instances) its agents run and its
    own bindings; ``references`` are the model servers the run's environments name. A dataset's own binding of
    ``NAME`` beats the session's for the environments it runs (as its own ``agent=`` beats ``--gym-agent``). One
    Gym serves each environment once, so every dataset running an environment must bind a name it names the same
    way (a dataset binding it and one not binding it differ too). Where an environment's binding differs from the
    session's, ``NAME`` is served for it by an instance of its own, ``NAME__<environment>``, and the environment's
    reference is rewired to it; where no session binding exists and every environment naming ``NAME`` is bound
    alike by its datasets, ``NAME`` itself is bound. Raises :class:`ModelServerSpecError` naming the datasets, the
    environment and the name for a disagreement, or for a reference inside a list (which a config merge cannot
    rewire)."""
    session_of = {binding.name: binding for binding in session}
    runners: dict[str, list[str]] = {}
    for dataset, (environments, _) in datasets.items():
        for environment in environments:
            runners.setdefault(environment, []).append(dataset)
    own = {dataset: {binding.name: binding for binding in bindings} for dataset, (_, bindings) in datasets.items()}
    chosen: dict[tuple[str, str], ModelServerBinding] = {}
    for ref in references:
        users = runners.get(ref.environment, [])
        if not any(ref.server in own[dataset] for dataset in users):
            continue
        given = {dataset: own[dataset].get(ref.server, session_of.get(ref.server)) for dataset in users}
        if len(set(given.values())) > 1:
            shown = "; ".join(f"{dataset}: {_shown_binding(binding)}" for dataset, binding in given.items())
            raise ModelServerSpecError(
                f"model_server= in gym_dataset_settings: the datasets running the environment {ref.environment!r} "
                f"bind its model server {ref.server!r} differently ({shown}); one Gym serves an environment once: "
                "bind it alike for them, or run them in separate sessions"
            )
        binding = next(iter(given.values()))
        if binding is not None and binding != session_of.get(ref.server):
            chosen[(ref.environment, ref.server)] = binding
    named: dict[str, set[str]] = {}
    for ref in references:
        if ref.environment in runners:
            named.setdefault(ref.server, set()).add(ref.environment)
    direct: dict[str, ModelServerBinding] = {}
    for server, naming in named.items():
        alike = {chosen.get((environment, server)) for environment in naming}
        only = alike.pop() if len(alike) == 1 else None
        if server not in session_of and only is not None:
            direct[server] = only
    served = [*session, *direct.values()]
    rewired: dict[str, Any] = {}
    for ref in references:
        binding = chosen.get((ref.environment, ref.server))
        if binding is None or ref.server in direct:
            continue
        if any(part.isdigit() for part in ref.key.split(".")):
            raise ModelServerSpecError(
                f"model_server= in gym_dataset_settings: the environment {ref.environment!r} names {ref.server!r} "
                f"inside a list ({ref.key}), which cannot be bound per dataset; bind it with {OPTION}"
            )
        instance = f"{ref.server}{INSTANCE_SEPARATOR}{ref.environment}"
        if all(b.name != instance for b in served):
            served.append(replace(binding, name=instance))
        path = [ref.environment, RESOURCES_REF_TYPE, ref.kind, *ref.key.split(".")]
        _nested_set(rewired, path, {"type": "responses_api_models", "name": instance})
    bound_in: dict[str, set[str]] = {}
    for environment, server in chosen:
        bound_in.setdefault(environment, set()).add(server)
    return DatasetBindings(tuple(served), rewired, bound_in)


def _shown_binding(binding: ModelServerBinding | None) -> str:
    if binding is None:
        return "not bound"
    described = binding.described()
    return ", ".join(f"{key}={value}" for key, value in described.items() if value is not None)


def _nested_set(target: dict[str, Any], path: Sequence[str], value: object) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def merge_bindings(
    first: Sequence[ModelServerBinding], then: Sequence[ModelServerBinding]
) -> tuple[ModelServerBinding, ...]:
    """``first``'s bindings and those of ``then`` whose name ``first`` does not bind."""
    names = {binding.name for binding in first}
    return (*first, *(binding for binding in then if binding.name not in names))


def binding_fingerprint(binding: ModelServerBinding, default_type: str) -> dict[str, object]:
    """What of ``binding`` makes a Gym another (the configuration a warm Gym and a resumed run are compared by,
    :class:`~pytest_gym_eval.gym.fingerprint.GymConfiguration`): :meth:`ModelServerBinding.described` (URL without
    its password, model, key *variable*, API), the Gym server ``type`` that serves it (``default_type``:
    ``--gym-model-type``) and, for a replay binding, the sha256 of its recordings file (edited recordings answer
    otherwise). Never a key. Raises OSError when the recordings file cannot be read."""
    facts = binding.described()
    facts["type"] = binding.model_type(default_type)
    if binding.replay is not None:
        facts["replay_sha256"] = file_sha256(binding.replay)
    return facts


def binding_record(binding: ModelServerBinding, redact: bool = False) -> dict[str, Any]:
    """``binding`` as JSON (a warm Gym's spec; :func:`binding_from_record` reads it back); with ``redact`` the URL's
    password is masked (the spec file holds none: the keeper reads the URL from :meth:`ModelServerBinding.
    url_variable` in its environment, :func:`url_environment`)."""
    url = redact_value(binding.url) if redact and binding.url is not None else binding.url
    return {
        "name": binding.name, "url": url, "model": binding.model, "api_key_env": binding.api_key_env,
        "api": binding.api, "policy": binding.policy, "replay": str(binding.replay) if binding.replay else None,
        "for_policy": binding.for_policy,
    }  # fmt: skip


def binding_from_record(record: Mapping[str, Any], environ: Mapping[str, str]) -> ModelServerBinding:
    """The binding :func:`binding_record` wrote, its URL taken from ``environ`` when a secret kept it out of the
    record. Raises KeyError or TypeError for a record of another shape."""
    binding = ModelServerBinding(
        str(record["name"]), url=record.get("url"), model=record.get("model"), api_key_env=record.get("api_key_env"),
        api=record.get("api"), policy=bool(record.get("policy")),
        replay=Path(record["replay"]) if record.get("replay") else None, for_policy=record.get("for_policy"),
    )  # fmt: skip
    secret = environ.get(binding.url_variable())
    return replace(binding, url=secret) if secret and binding.url is not None else binding


def served_blocks(
    checkout: Path, bindings: Sequence[ModelServerBinding], default_type: str, environ: Mapping[str, str]
) -> dict[str, Any]:
    """:func:`model_server_blocks` for ``bindings`` with the fields of ``checkout``'s own model server configs
    (:func:`model_type_templates`), its model server types (the folders of ``responses_api_models/``) and the key
    variables set in ``environ``. Raises :class:`ModelServerSpecError` for a replay binding not yet served."""
    if not bindings:
        return {}
    templates = model_type_templates(checkout, MODEL_FIELDS)
    key_set = {b.api_key_env: bool(environ.get(b.api_key_env)) for b in bindings if b.api_key_env}
    folder = checkout / "responses_api_models"
    types = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isidentifier()) if folder.is_dir() else []
    return model_server_blocks(bindings, default_type, templates, key_set, types)


@dataclass(frozen=True)
class AgentCopy:
    """An agent instance that rolls out one ``--gym-policy`` other than the baseline (``<agent>__POLICY``):
    ``policy``, and the resources servers its agent runs as ``(environment, agent server type, key path of the
    reference inside the agent's block)``."""

    instance: str
    policy: str
    environments: tuple[tuple[str, str, str], ...]


def policy_bindings(
    bindings: Sequence[ModelServerBinding], copies: Sequence[AgentCopy], references: Sequence[ServerReference]
) -> tuple[tuple[ModelServerBinding, ...], dict[str, Any]]:
    """Serve the ``NAME@POLICY`` ``bindings`` (:attr:`ModelServerBinding.for_policy`): the served bindings and the
    config blocks, to be merged (:func:`merge_blocks`) over the policies' own blocks
    (:func:`~pytest_gym_eval.tasks.models.server_blocks`).

    A policy's rollouts are scored by the resources servers its agent copies run, which every policy shares; so
    each environment of a copy of ``POLICY`` (``copies``) that names a server ``POLICY`` binds (``references``)
    gets a copy of its own, ``<environment>__POLICY`` (Gym's ``_copy``), whose reference names the model server
    ``NAME__POLICY`` serving the binding, and the agent copy is pointed at it. Raises :class:`ModelServerSpecError`
    for a reference inside a list (which a config merge cannot rewire) and for a binding of a name none of
    ``POLICY``'s environments names."""
    own: dict[str, dict[str, ModelServerBinding]] = {}
    for binding in bindings:
        assert binding.for_policy is not None
        own.setdefault(binding.for_policy, {})[binding.name] = binding
    served: dict[str, ModelServerBinding] = {}
    blocks: dict[str, Any] = {}
    for copy in copies:
        mine = own.get(copy.policy, {})
        for environment, agent_kind, key in copy.environments:
            refs = [ref for ref in references if ref.environment == environment and ref.server in mine]
            if not refs:
                continue
            clone = f"{environment}{INSTANCE_SEPARATOR}{copy.policy}"
            blocks.setdefault(clone, {"_copy": environment})
            for ref in refs:
                if any(part.isdigit() for part in ref.key.split(".")):
                    raise ModelServerSpecError(
                        f"{OPTION} {ref.server}@{copy.policy}: the environment {environment!r} names {ref.server!r} "
                        f"inside a list ({ref.key}), which cannot be bound per policy"
                    )
                instance = f"{ref.server}{INSTANCE_SEPARATOR}{copy.policy}"
                served.setdefault(instance, replace(mine[ref.server], name=instance, for_policy=None))
                path = [clone, RESOURCES_REF_TYPE, ref.kind, *ref.key.split(".")]
                _nested_set(blocks, path, {"type": "responses_api_models", "name": instance})
            path = [copy.instance, "responses_api_agents", agent_kind, *key.split(".")]
            _nested_set(blocks, path, {"type": RESOURCES_REF_TYPE, "name": clone})
    _check_policy_names_used(bindings, copies, references, served)
    return tuple(served.values()), blocks


def _check_policy_names_used(
    bindings: Sequence[ModelServerBinding],
    copies: Sequence[AgentCopy],
    references: Sequence[ServerReference],
    served: Mapping[str, ModelServerBinding],
) -> None:
    """Raise :class:`ModelServerSpecError` for a ``NAME@POLICY`` binding no environment of ``POLICY``'s agent copies
    names (a misspelt ``NAME`` would otherwise leave ``POLICY`` judged by the session's binding), naming the
    environments and the model servers they do name. A policy with no agent copy (none of its rollouts selected) has
    nothing to check."""
    for binding in bindings:
        policy = binding.for_policy
        environments = sorted({e for copy in copies if copy.policy == policy for e, _, _ in copy.environments})
        if not environments or f"{binding.name}{INSTANCE_SEPARATOR}{policy}" in served:
            continue
        names = sorted({ref.server for ref in references if ref.environment in environments})
        raise ModelServerSpecError(
            f"{OPTION} {binding.name}@{policy}: no environment {policy}'s rollouts run ({', '.join(environments)}) "
            f"names the model server {binding.name!r}; "
            + (f"they name {', '.join(names)}" if names else "they name no model server besides the policy's")
        )


def merge_blocks(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in, mapping by mapping (``over`` wins for any other value), as Gym merges
    config files."""
    merged = dict(base)
    for key, value in over.items():
        mine = merged.get(key)
        merged[key] = merge_blocks(mine, value) if isinstance(mine, dict) and isinstance(value, dict) else value
    return merged
