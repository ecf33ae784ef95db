"""Every file a run directory holds, by name: :class:`RunPaths`.

A leaf module (standard library only). Code that reads or writes a run directory asks :class:`RunPaths` for the
path instead of spelling the file name; the contract itself is described in ``docs/how-it-works.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunPaths:
    """Where one run keeps its files (all inside ``root``, a fresh directory per session)."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def collected(self) -> Path:
        """Every collected (task, repeat) pair, before any selection (a pytest-xdist worker's, for the controller)."""
        return self.root / "collected.json"

    @property
    def selection(self) -> Path:
        """The part of each dataset the session selected (a pytest-xdist worker's, for the controller)."""
        return self.root / "selection.json"

    @property
    def waves(self) -> Path:
        """The wave log of ``--gym-adaptive`` (:mod:`pytest_gym_eval.gym.waves`)."""
        return self.root / "waves.jsonl"

    @property
    def config(self) -> Path:
        """Gym config with the model endpoint and head server (the API key only as ``${oc.env:VAR}``)."""
        return self.root / "gym-config.yaml"

    @property
    def servers_config(self) -> Path:
        """The extra Gym config only ``gym env start`` gets: the servers of every policy but the first
        (``--gym-policy``, :func:`pytest_gym_eval.tasks.models.server_blocks`)."""
        return self.root / "gym-policies.yaml"

    @property
    def input(self) -> Path:
        return self.root / "gym-input.jsonl"

    @property
    def output(self) -> Path:
        return self.root / "gym-output" / "rollouts.jsonl"

    @property
    def failures(self) -> Path:
        return self.root / "gym-output" / "rollouts_failures.jsonl"

    @property
    def replay_log(self) -> Path:
        """The replay model server's log of every request and answer (with ``--gym-replay``)."""
        return self.logs / "replay-model.jsonl"

    @property
    def materialized(self) -> Path:
        return self.root / "gym-output" / "rollouts_materialized_inputs.jsonl"

    @property
    def aggregate_metrics(self) -> Path:
        return self.root / "gym-output" / "rollouts_aggregate_metrics.json"

    @property
    def model_calls(self) -> Path:
        """Gym's model-call captures, with ``--gym-latency`` (Gym's ``model_call_capture_dir``)."""
        return self.root / "gym-output" / "model-calls"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def server_logs(self) -> Path:
        """Gym's per-server logs, ``<server>.log`` each (Gym's ``nemo_gym_log_dir``, :mod:`.server_logs`)."""
        return self.logs / "gym-servers"

    @property
    def manifest(self) -> Path:
        """What the run asked for, written at its start (:mod:`pytest_gym_eval.gym.resume`)."""
        return self.root / "manifest.json"

    @property
    def resumed(self) -> Path:
        """The records a ``--gym-resume`` run reused from the earlier run, restamped."""
        return self.root / "resumed" / "rollouts.jsonl"

    @property
    def processes(self) -> Path:
        """One JSON line per process session the run started: ``{"name", "pid", "sid"}``."""
        return self.root / "processes.jsonl"

    def start_log(self, attempt: int = 1) -> Path:
        """The log of ``gym env start``'s ``attempt`` (1, 2, ...; a second after Ray's node timed out)."""
        return self.logs / ("gym-env-start.log" if attempt == 1 else f"gym-env-start-{attempt}.log")

    def ray_start_logs(self, attempt: int) -> Path:
        """Ray's own logs of a start ``attempt`` that timed out, kept (a folder)."""
        return self.logs / f"ray-start-{attempt}"

    @property
    def eval_log(self) -> Path:
        """The log of ``gym eval run``."""
        return self.logs / "gym-eval-run.log"

    @property
    def watchdog_log(self) -> Path:
        return self.logs / "watchdog.log"

    @property
    def ray_head_log(self) -> Path:
        """The log of the Ray head the run started for Gym's servers."""
        return self.logs / "ray-head.log"

    def policy_replay_log(self, policy: str) -> Path:
        """The replay log of policy ``policy`` when several policies replay (``--gym-policy NAME=replay:...``)."""
        return self.logs / f"replay-model-{policy}.jsonl"

    def model_server_replay_log(self, name: str) -> Path:
        """The replay log of model server ``name`` bound with ``--gym-model-server NAME=replay:FILE``."""
        return self.logs / f"replay-model-server-{name}.jsonl"

    def wave_input(self, number: int) -> Path:
        """Gym's input of ``--gym-adaptive``'s wave ``number`` (2, 3, ...; wave 1's is :attr:`input`)."""
        return self.root / f"{self.input.stem}-wave-{number}{self.input.suffix}"

    def wave_output(self, number: int) -> Path:
        """The folder of wave ``number``'s output files (2, 3, ...; wave 1's are in :attr:`output`'s folder)."""
        return self.output.parent / f"wave-{number}"

    @property
    def python_datasets(self) -> Path:
        """The folder of the Python-built datasets a ``gym_rollouts`` mark names, one ``.jsonl`` each."""
        return self.root / "gym-python-datasets"

    @property
    def ray(self) -> Path:
        """Ray's files (``RAY_TMPDIR``; a link to a short folder when this path is too deep for Ray's sockets)."""
        return self.root / "ray"

    @property
    def warm(self) -> Path:
        """Which warm Gym the session used (``--gym-keep-alive``)."""
        return self.root / "warm.json"

    # A warm Gym's home is a run directory of its own, with these besides.

    @property
    def warm_spec(self) -> Path:
        """In a warm Gym's home: what it was started with (:mod:`pytest_gym_eval.warm`)."""
        return self.root / "spec.json"

    @property
    def keeper(self) -> Path:
        """In a warm Gym's home: its keeper, and since when it is idle."""
        return self.root / "keeper.json"

    @property
    def keeper_log(self) -> Path:
        """In a warm Gym's home: its keeper's log."""
        return self.logs / "keeper.log"

    @property
    def leases(self) -> Path:
        """In a warm Gym's home: one file per session using it (a folder)."""
        return self.root / "leases"
