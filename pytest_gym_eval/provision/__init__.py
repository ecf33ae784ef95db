"""Provision a NeMo Gym checkout that the plugin can shell out to.

``python -m pytest_gym_eval provision [--gym-version 0.7.0] [--dest DIR] [--environment mcqa ...]`` builds, in
seven named steps (preflight, download, unpack, python, venv, prefetch, manifest), a checkout of Gym with its own
Python environment; the manifest, written last, marks it valid. The steps, the locking and the Linux-only rule:
docs/provisioning.md ("The seven steps").

The modules, bottom up: ``errors`` (:class:`ProvisionError`), ``versions`` (supported Gym releases,
``requires-python``), ``host`` (the platform, the cache, pyenv), ``manifest``, ``checkout`` (:class:`GymCheckout`,
:func:`load_checkout`, :func:`gym_environment`), ``steps`` (logged steps), ``sdist`` (the package index, download,
unpack), ``python`` (uv and the interpreter), ``environments`` (a Gym environment's configs) and ``build``
(:func:`provision`). The command line is :mod:`pytest_gym_eval.cli.provision`.
"""

from __future__ import annotations

from pytest_gym_eval.provision.build import provision
from pytest_gym_eval.provision.checkout import (
    BYTECODE_ENVIRONMENT,
    DROPPED_ENVIRONMENT,
    RAY_ENVIRONMENT,
    RAY_START_WAIT,
    RAY_START_WAIT_DEFAULT,
    GymCheckout,
    gym_environment,
    load_checkout,
    load_supported_checkout,
    provisioned,
)
from pytest_gym_eval.provision.environments import (
    DEFAULT_ENVIRONMENTS,
    PREFETCH_ARGS,
    SERVER_TYPES,
    config_servers,
    environment_configs,
)
from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.host import POSIX_MODULES, cache_root, default_checkout_path, platform_problem
from pytest_gym_eval.provision.manifest import BUILD_MARKER, MANIFEST_FORMAT, MANIFEST_NAME, STATE_DIR
from pytest_gym_eval.provision.python import (
    INSTALL_HINT,
    MIN_UV_VERSION,
    MIN_UV_WORKAROUND_VERSION,
    InterpreterChoice,
    PythonCandidate,
    choose_interpreter,
    find_uv,
)
from pytest_gym_eval.provision.sdist import DEFAULT_INDEX_URL
from pytest_gym_eval.provision.steps import STEPS, error_lines
from pytest_gym_eval.provision.versions import (
    DEFAULT_GYM_VERSION,
    NEWEST_GYM_SERIES,
    OLDEST_GYM_VERSION,
    SUPPORTED_GYM_VERSIONS,
    gym_version_problem,
    has_environment_servers,
    parse_requires_python,
    python_satisfies,
    read_requires_python,
    require_supported_gym,
    requires_python_specifiers,
)

__all__ = [
    "BUILD_MARKER",
    "BYTECODE_ENVIRONMENT",
    "DEFAULT_ENVIRONMENTS",
    "DEFAULT_GYM_VERSION",
    "DEFAULT_INDEX_URL",
    "DROPPED_ENVIRONMENT",
    "INSTALL_HINT",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MIN_UV_VERSION",
    "MIN_UV_WORKAROUND_VERSION",
    "NEWEST_GYM_SERIES",
    "OLDEST_GYM_VERSION",
    "POSIX_MODULES",
    "PREFETCH_ARGS",
    "RAY_ENVIRONMENT",
    "RAY_START_WAIT",
    "RAY_START_WAIT_DEFAULT",
    "SERVER_TYPES",
    "STATE_DIR",
    "STEPS",
    "SUPPORTED_GYM_VERSIONS",
    "GymCheckout",
    "InterpreterChoice",
    "ProvisionError",
    "PythonCandidate",
    "cache_root",
    "choose_interpreter",
    "config_servers",
    "default_checkout_path",
    "environment_configs",
    "error_lines",
    "find_uv",
    "gym_environment",
    "gym_version_problem",
    "has_environment_servers",
    "load_checkout",
    "load_supported_checkout",
    "parse_requires_python",
    "platform_problem",
    "provision",
    "provisioned",
    "python_satisfies",
    "read_requires_python",
    "require_supported_gym",
    "requires_python_specifiers",
]
