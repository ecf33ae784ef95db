"""Replay recorded NeMo Gym rollouts through a loopback OpenAI-compatible model server.

Each maximal run of model items in a recorded rollout's ``output`` is one *turn*, indexed under the normalised
conversation that preceded it, so an agent that re-sends that conversation (``POST /v1/responses`` or
``POST /v1/chat/completions``) gets the recorded turn back; a task recorded several times is answered by repeat.
The exact rules (what the conversation is, its normal form, which recording answers, the 404 message) are in
docs/replay.md ("The matching rules"). Command line: :mod:`pytest_gym_eval.cli.replay`.

The modules: ``content`` (content parts in normal form), ``normal`` (conversations in normal form),
``recordings`` (rollouts files and their turns), ``index`` (which turn answers, and why none does), ``answers``
(a turn as an API's answer), ``server`` (:class:`ReplayServer`), ``judge_recordings`` (the judge calls Gym's rollout
records carry, as recordings) and ``recorder`` (:class:`~pytest_gym_eval.replay.recorder.RecordingProxy`, which
records a model's calls through a loopback proxy). Command lines: :mod:`pytest_gym_eval.cli.judge_recordings`,
:mod:`pytest_gym_eval.cli.record`.
"""

from __future__ import annotations

from pytest_gym_eval.replay.answers import chat_answer, responses_answer
from pytest_gym_eval.replay.content import canonical_arguments, content_normal, content_text, display, part_normal
from pytest_gym_eval.replay.index import ReplayIndex, explain_unmatched
from pytest_gym_eval.replay.normal import (
    Conversation,
    Key,
    NormItem,
    Tools,
    chat_messages_to_items,
    conversation_key,
    item_type,
    normalise_item,
    normalise_items,
    repeat_tag,
    request_conversation,
    request_items,
    tools_signature,
)
from pytest_gym_eval.replay.recordings import (
    Recording,
    RecordingError,
    Turn,
    is_model_item,
    load_recordings,
    recorded_conversation,
    recording_turns,
    split_turns,
)
from pytest_gym_eval.replay.server import ReplayServer
from pytest_gym_eval.tasks.plan import REPEAT_TAG

__all__ = [
    "REPEAT_TAG",
    "Conversation",
    "Key",
    "NormItem",
    "Recording",
    "RecordingError",
    "ReplayIndex",
    "ReplayServer",
    "Tools",
    "Turn",
    "canonical_arguments",
    "chat_answer",
    "chat_messages_to_items",
    "content_normal",
    "content_text",
    "conversation_key",
    "display",
    "explain_unmatched",
    "is_model_item",
    "item_type",
    "load_recordings",
    "normalise_item",
    "normalise_items",
    "part_normal",
    "recorded_conversation",
    "recording_turns",
    "repeat_tag",
    "request_conversation",
    "request_items",
    "responses_answer",
    "split_turns",
    "tools_signature",
]
