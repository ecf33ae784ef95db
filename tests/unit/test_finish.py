"""How an interrupted session's Ctrl-C traceback is cut while Gym runs (:func:`finish.cut_to_last_visible_entry`)."""

from __future__ import annotations

import pytest

from pytest_gym_eval.session.finish import cut_to_last_visible_entry


def _shown() -> None:
    raise KeyboardInterrupt


def _hidden() -> None:
    __tracebackhide__ = True  # as pluggy's and pytest's own frames are
    _shown_then_hidden()


def _shown_then_hidden() -> None:
    _innermost_hidden()


def _innermost_hidden() -> None:
    __tracebackhide__ = True
    raise KeyboardInterrupt


def test_the_cut_keeps_the_last_entry_pytest_shows_when_the_signal_lands_in_a_hidden_frame() -> None:
    with pytest.raises(KeyboardInterrupt) as excinfo:
        _hidden()
    assert excinfo.traceback[-1].ishidden(excinfo)
    cut_to_last_visible_entry(excinfo)
    assert [entry.name for entry in excinfo.traceback] == ["_shown_then_hidden"]
    crash = excinfo.getrepr(funcargs=True).reprcrash  # what pytest's terminal reporter asserts is there
    assert crash is not None and "KeyboardInterrupt" in crash.message


def test_the_cut_keeps_the_last_entry_when_it_is_shown() -> None:
    with pytest.raises(KeyboardInterrupt) as excinfo:
        _shown()
    assert len(excinfo.traceback) > 1
    cut_to_last_visible_entry(excinfo)
    assert [entry.name for entry in excinfo.traceback] == ["_shown"]
    assert excinfo.getrepr(funcargs=True).reprcrash is not None
