"""What follows the end of a session (:meth:`GymSession.finish
<pytest_gym_eval.session.gym_session.GymSession.finish>`) on the terminal: :func:`write_summary` (the ``gym reward
summary``, rendered from the conclusion's verdict list) and :class:`StopGymLast` (Gym stopped after every report).
Called by the plugin's hooks on the session's :class:`~pytest_gym_eval.session.gym_session.GymSession`."""

from __future__ import annotations

import os

import pytest

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.reporting import outputs, terminal
from pytest_gym_eval.session.diagnosis import bound_replay_miss_lines, failed_judge_call_lines
from pytest_gym_eval.session.finish import cut_to_last_visible_entry
from pytest_gym_eval.session.gym_session import GymSession


def write_summary(gym: GymSession, reporter: pytest.TerminalReporter, exitstatus: int) -> None:
    """The ``gym reward summary`` section (``pytest_terminal_summary``): per dataset (and agent), the rewards,
    pass@k and gate verdicts; the reports written; on GitHub Actions, annotations for gates that did not pass
    and errored rollouts. Last, after Ctrl-C or SIGTERM, the command that resumes the run (``--gym-resume``)."""
    resume_hint = gym.resume_hint(gym.final[0] if gym.final is not None else exitstatus)
    if gym.conclusion is not None:
        reporter.write_sep("=", "gym reward summary")
        width = min(reporter._tw.fullwidth, 100)
        lines = terminal.render_conclusion(
            gym.conclusion,
            verbose=gym.config.get_verbosity() > 0,
            results=gym.rollouts(),
            width=width,
        )
        lines += [f"gym {line}" for line in gym.conclusion.quarantined]
        lines += gym.conclusion.history
        lines += [f"gym warning: {line}" for line in gym.conclusion.warnings]
        if gym.run_dir is not None:
            lines.append(f"gym run directory: {gym.run_dir}")
        lines += gym.pages
        opts = gym.options
        annotations = outputs.annotation_lines(
            gym.conclusion,
            gym.rollouts(),
            os.environ,
            rootdir=opts.rootdir,
        )
        if annotations and opts.shard is not None:
            # A shard's gates judge its share only, and the merge annotates every errored rollout again: an
            # ::error here would stay red on a run whose merge passed.
            annotations = [f"gym GitHub annotations: left to the merge of the shards (shard {opts.shard})"]
        lines += annotations
        lines += gym.overruled_gates  # last: pytest's count of the gate item says passed
        for line in lines:
            reporter.write_line(line)
    elif not (gym.is_worker or gym.plan.needs_gym or gym.config.option.collectonly):  # asked for, nothing to say
        for line in outputs.nothing_to_report([gym.options.report, gym.options.html, gym.options.markdown]):
            reporter.write_line(line)
    for line in resume_hint:
        reporter.write_line(line)


class StopGymLast:
    """Stops Gym at the end of the session, after every report (registered as ``gym-eval-stop``), and keeps an
    interrupted session's way to its reports short."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym
        self.stop_warned = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """While Gym runs, pytest formats the traceback of a Ctrl-C or SIGTERM from its last entry only (unless
        ``--full-trace``): it shows only the last line anyway, and formatting every entry parsed each file's source
        (1-2 s on a loaded machine) before the reports could be written."""
        if self.gym.has_processes and not self.gym.config.option.fulltrace:
            cut_to_last_visible_entry(excinfo)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Stop Gym once every report is written (this runs after every ``pytest_sessionfinish``, pytest's JUnit
        file among them) and the reward summary is shown; pytest's short test summary and last line follow."""
        self.stop(terminalreporter)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Stop Gym if nothing did yet (pytest showed no terminal summary: an internal error, say)."""
        self.stop(config.pluginmanager.get_plugin("terminalreporter"))

    def stop(self, reporter: pytest.TerminalReporter | None) -> None:
        """Stop what the session started of Gym (idempotent), saying so on the terminal before and after."""
        shown = reporter is not None and self.gym.starts_servers  # (an attached run's stop is near instant)
        if reporter is not None:
            replays = self.gym.launch.model_server_replays  # (emptied by the stop)
            for line in bound_replay_miss_lines({name: server.misses for name, server in replays.items()}):
                reporter.write_line(f"gym: {line}", yellow=True)
            if self.gym.run_dir is not None and not self.gym.is_worker and not self.stop_warned:
                self.stop_warned = True  # (stop runs again at pytest_unconfigure)
                key = os.environ.get(self.gym.options.api_key_env, "")
                for line in failed_judge_call_lines(RunPaths(self.gym.run_dir).output, [key]):
                    reporter.write_line(f"gym: warning: {line}", yellow=True)
        if reporter is not None and shown:
            reporter.write_line("gym: stopping Gym ...")
        self.gym.stop()
        if reporter is not None and shown and self.gym.stop_seconds is not None:
            reporter.write_line(f"gym: Gym stopped in {self.gym.stop_seconds:.1f} s")
