"""How a session's Gym ends: the signals while it runs and while it stops, and the stop itself.

From the start of the run until its stop, SIGTERM ends the session as Ctrl-C does
(:class:`~pytest_gym_eval.gym.processes.SigtermAsCtrlC`). Once the session's results are in (:meth:`Stopping.ending`)
and until the stop ends, a Ctrl-C or SIGTERM no longer interrupts (the reports are being written) but kills Gym's
processes at once (:class:`~pytest_gym_eval.gym.processes.CtrlCKillsGym`). :meth:`Stopping.stop` ends Gym's run, gives a
warm Gym's lease back, stops the replay servers and the feed, removes the launch's temporary directories and records
how long that took. :class:`~pytest_gym_eval.session.gym_session.GymSession` holds one :class:`Stopping`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Collection

from pytest_gym_eval.gym.feed import RolloutFeed
from pytest_gym_eval.gym.processes import CtrlCKillsGym, SigtermAsCtrlC
from pytest_gym_eval.gym.run import GymRun
from pytest_gym_eval.session.launch import Launch


class Stopping:
    """The signal handlers of one session's Gym run and the record of its stop (``seconds``, None until stopped)."""

    def __init__(self) -> None:
        self._sigterm = SigtermAsCtrlC()
        self._ctrl_c: CtrlCKillsGym | None = None
        self.seconds: float | None = None
        """How long :meth:`stop` took (wall seconds), None until it ended."""

    def run_started(self) -> None:
        """The run is starting: from now until :meth:`stop`, SIGTERM ends the session as Ctrl-C does."""
        self._sigterm.install()

    def ending(
        self, run: GymRun | None, has_processes: bool, interrupted: bool = False, known: Collection[int] = ()
    ) -> None:
        """The session's results are in: an ``interrupted`` session's ``run`` is abandoned (so that pytest-xdist
        workers still waiting for rollouts stop waiting); from now on a Ctrl-C (when ``has_processes``) or SIGTERM
        kills ``run``'s processes at once; when not ``interrupted`` the run is let finish (Gym's aggregate
        metrics, :meth:`GymRun.let_finish`, given the plan stamps ``known`` to be in). Idempotent."""
        if interrupted and run is not None:
            run.abandon()
        kill = run.kill if run is not None else _nothing
        self._sigterm.teardown(kill)
        if self._ctrl_c is None and has_processes:  # a session without Gym keeps Ctrl-C as pytest has it
            self._ctrl_c = CtrlCKillsGym(kill)
            self._ctrl_c.install()
        if not interrupted and run is not None:
            # Gym's aggregate metrics, which the summary shows beside ours (a signal: at once)
            run.let_finish(known=known)

    def stop(self, run: GymRun | None, launch: Launch, feed: RolloutFeed | None) -> None:
        """Stop ``run`` (when this process started it), ``launch``'s replay servers and ``feed``; give a warm
        Gym's lease back (it stays up); remove ``launch``'s temporary directories; then restore the signal
        handlers. ``seconds`` holds how long it took (the first stop's)."""
        began = time.monotonic()
        try:
            if run is not None:
                run.finish()
            if launch.warm is not None:
                launch.warm.release()
            if launch.replay is not None:
                launch.replay.stop()
            while launch.more_replays:
                launch.more_replays.pop().stop()
            while launch.model_server_replays:
                launch.model_server_replays.popitem()[1].stop()
            if feed is not None:
                feed.stop()
            while launch.cleanup:
                shutil.rmtree(launch.cleanup.pop(), ignore_errors=True)
        finally:
            if self._ctrl_c is not None:
                self._ctrl_c.restore()
            self._sigterm.restore()
            if self.seconds is None:
                self.seconds = time.monotonic() - began


def _nothing() -> None:
    """What a Ctrl-C kills when this process has no Gym run."""
