"""Working alongside the plugins teams already run: pytest-timeout, pytest-rerunfailures and pytest-html.

None of them is a dependency: each part here is registered only when that plugin is loaded (its hooks would be
unknown otherwise). On Gym items pytest-timeout's ``--timeout`` applies to the call phase only, as its
``func_only`` setting does (the setup's waits have the plugin's own timeouts); Gym items are never rerun by
pytest-rerunfailures (a rerun would read the same rollout again); pytest-html gets a reward column and the
reward summary. The why of each: docs/other-plugins.md.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval.session.collect import is_gym_item

if TYPE_CHECKING:
    from pytest_gym_eval.session.gym_session import GymSession

RERUN_MESSAGE = (
    "pytest-rerunfailures: Gym items are not rerun (a rerun would report the same rollout again, not a new one); "
    "to roll a task out several times, use --gym-repeats"
)


def register(config: pytest.Config, gym: GymSession) -> None:
    """Register the parts for the plugins that are loaded (call from ``pytest_configure``)."""
    manager = config.pluginmanager
    if manager.hasplugin("rerunfailures"):
        manager.register(NoReruns(gym), "gym-eval-no-reruns")
    if hasattr(config.hook, "pytest_html_results_table_row"):
        manager.register(HtmlReport(gym), "gym-eval-html")


class NoReruns:
    """Runs Gym items through pytest's plain test protocol, ahead of pytest-rerunfailures' (pytest hooks)."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym
        self.said = False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Say once, when reruns are asked for and Gym items are selected, that they are not rerun."""
        self._say_once(any(is_gym_item(item) for item in session.items))

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """Under pytest-xdist the controller collects nothing itself (and a worker's terminal lines are not
        shown): say it on the first worker's collection, once the controller has the plan (trylast: after
        :class:`~pytest_gym_eval.xdist.XdistController` loaded it)."""
        self._say_once(bool(self.gym.plan.rollouts))

    def _say_once(self, gym_items: bool) -> None:
        config = self.gym.config
        asked = config.getoption("reruns", None) or config.getoption("force_reruns", None)
        if asked and gym_items and not self.said:
            self.said = True
            self.gym.note(RERUN_MESSAGE)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Run a Gym item once (pytest's own protocol) and stop pytest-rerunfailures from running it again."""
        if not is_gym_item(item):
            return None
        from _pytest.runner import runtestprotocol

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        runtestprotocol(item, nextitem=nextitem, log=True)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


class HtmlReport:
    """pytest-html's hooks: a reward column and the reward summary (pytest hooks)."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        """Add the Reward column after the test id."""
        cells.insert(2, '<th class="sortable" data-column-type="reward">Reward</th>')

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        """Each row's reward: the number, or empty for an error and for tests that are not rollouts."""
        props = dict(report.user_properties)
        reward = props.get("reward")
        text = "" if reward is None else f"{float(str(reward)):g}"
        cells.insert(2, f'<td class="col-reward">{html.escape(text)}</td>')

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: Any
    ) -> None:
        """The ``gym reward summary`` (with the gate verdicts and what decided the exit status) as text."""
        conclusion = self.gym.conclusion
        if conclusion is None:
            return
        from pytest_gym_eval.reporting.terminal import render_conclusion

        lines = render_conclusion(conclusion, verbose=False, results=self.gym.rollouts(), width=100)
        text = html.escape("\n".join(lines))
        postfix.append(f'<h2>Gym reward summary</h2><pre class="gym-reward-summary">{text}</pre>')
