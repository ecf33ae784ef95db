"""Replay recorded NeMo Gym rollouts through a loopback OpenAI-compatible model server.

A Gym rollouts file (``*_rollouts.jsonl``) holds one recorded rollout per line: the request sent for
a task (``responses_create_params``) and the Responses API object the agent returned (``response``),
whose ``output`` is the whole trajectory: model items (``reasoning``, assistant ``message``,
``function_call``) interleaved with the items the environment added (``function_call_output``, and
user messages in multi-turn environments).

Every maximal run of model items in ``output`` is one *turn*. It is indexed under the normalised
conversation that preceded it (instructions + input + the earlier output items), so an agent that
re-sends that conversation, through ``POST /v1/responses`` or ``POST /v1/chat/completions``, gets the
recorded turn back.

**The conversation** is everything the model is shown as context, in order, and all of it takes part in
the match:

- the request's ``instructions`` (as a leading system message);
- every ``input`` item (``messages`` for chat completions): system, developer (read as system), user and
  assistant messages with all their content parts: text, images (``input_image``; chat ``image_url``),
  files (``input_file``; chat ``file``), audio (``input_audio``; vLLM's ``audio_url``; and the
  ``metadata.audio_data``/``audio_path``/``audio_paths`` side channel, spliced before the content of the
  last user message as Gym's ``vllm_model`` does), video (``input_video``, ``video_url``) and refusals;
- tool calls (name, arguments, call id) and tool results (call id, output with all its parts);
- any other item type (``computer_call``, ...), as its canonical JSON without ``id`` and ``status``;
- the tool definitions, when the recording has any (non-empty ``tools``): the request must then offer the
  same set (type, name, description, parameters; order and ``strict`` ignored). A recording without tools
  matches whatever tools the request offers, since agents may add tools of their own that the recorded
  row does not carry.

Not part of it: generation settings (``model``, ``temperature``, ``max_output_tokens``, ``reasoning``,
``text``, ``tool_choice``, ...), ``metadata`` other than the audio side channel, item ids and ``status``,
and reasoning (``reasoning`` items and ``<think>...</think>`` blocks). Reasoning is the model's own
earlier output echoed back, and whether it reaches the model depends on the model server (Gym's
``openai_model`` passes reasoning items through or drops them, its ``vllm_model`` keeps one ``<think>``
block per message as ``reasoning_content`` or none, and this server's chat answers carry none), so it
cannot be compared across the two APIs; a later turn stays with its recording through the tool call ids
and texts of the turns before it, and through the repeat tag.

Normal form (:func:`normalise_items`), one for Responses items and chat messages
(:func:`chat_messages_to_items`), so that what Gym changes between the dataset row and the request that
reaches the model does not matter:

- a message is ``("message", role, content)``. Its content is its text parts joined, each non-text part
  replaced by a marker ``"\\x00<kind> <identity>[ <attribute>]\\x00"`` in its place. An image, file, audio
  or video is identified by the sha256 of its bytes when they are inline (a base64 or percent-encoded
  ``data:`` URL, or bare base64) or an absolute path to a readable file, else by its URL or ``file_id``;
  so ``input_image`` with ``image_url`` as a string or as ``{"url": ...}``, and chat's ``image_url``
  part, are one image. An image's ``detail`` counts unless it is ``auto`` (the default), a file's
  ``filename`` counts. Surrounding whitespace is ignored.
- a ``function_call`` is ``("function_call", name, arguments, call_id)``, a ``function_call_output``
  ``("function_call_output", call_id, output)``; arguments and a JSON output are re-dumped with sorted
  keys (tools and recordings differ in whitespace), an output's parts become content as above.
- any other item is ``(type, canonical JSON without id/status)``.
- Responses→chat converters (Gym's among them) merge a model turn into one assistant message and fold a
  leading run of system messages into one, so the normal form does the same: each run of assistant
  messages and function calls becomes one assistant message (texts joined, ``<think>`` blocks removed,
  omitted when empty) followed by the calls in order, and a leading run of system messages becomes one
  message joined by blank lines.

**Which recording answers.** The recordings of one task (one conversation and tool set) are put in
*repeat order*: by ``_ng_rollout_index`` (recordings that have one first), then file order. A request
whose ``metadata`` carries :data:`~pytest_gym_eval.plan.REPEAT_TAG` = *r* (the plugin tags each row of
Gym's input with its repeat under ``--gym-replay``; Gym's model servers pass ``metadata`` through to the
endpoint) is answered at every turn from recording *r mod n* of its task's *n*, whatever order requests
arrive in, and a retried request gets the same answer; should no recorded turn of that recording share
the conversation, the one at *r mod m* in repeat order among the *m* that do answers. An untagged
request is answered by a counter per conversation: the *k*-th request (from 0) of one conversation gets
the *k mod m*-th of its recorded turns in repeat order, so the order of arrival decides which repeat
gets which recording, never which answers are served.

**No recording.** A conversation with no recorded turn gets HTTP 404 with a one-line message
(:meth:`ReplayIndex.unmatched_message`) naming the closest recording (the longest shared prefix of normalised
items; ties go to the one sharing more of the first item that differs, then to file order) and where
the request departs from it, e.g. ``no recorded answer: the conversation departs from the closest
recording (r.jsonl:3) at input[1] (user message): request has "[image sha256:1a2b3c4d5e6f]How many...",
recording has "[image sha256:9f8e7d6c5b4a]How many..." (5 recordings loaded)``.

Command line: ``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME]
[--log PATH] [--delay SECONDS]`` (:mod:`pytest_gym_eval.cli.replay`).

The modules: ``content`` (content parts in normal form), ``normal`` (conversations in normal form),
``recordings`` (rollouts files and their turns), ``index`` (which turn answers, and why none does), ``answers``
(a turn as an API's answer) and ``server`` (:class:`ReplayServer`).
"""

from __future__ import annotations

from pytest_gym_eval.plan import REPEAT_TAG
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
