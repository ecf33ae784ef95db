"""Run with a Gym checkout's own Python: what Gym's model servers send to the endpoint for each recorded turn.

``python gym_requests.py ROLLOUTS.jsonl... > requests.jsonl`` writes, for every recording (``file:line``) and every
turn of its trajectory (``start``: the output position where the model's turn begins), the request body as Gym's
``openai_model`` forwards it to ``/responses`` (the create-params as the agent builds them, dumped as pydantic
does: ``exclude_unset``) and as Gym's ``vllm_model`` converts it for ``/chat/completions`` (Gym's own
``ResponsesConverter``). A turn Gym cannot validate or convert gets ``"error"`` instead. Recordings are read
as they are; nothing here is copied into the project.
"""

from __future__ import annotations

import json
import sys

from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.responses_converter import ResponsesConverter


def model_turn_starts(output: list[dict]) -> list[int]:
    """Where each maximal run of model items (assistant messages, anything not ``*_output``) begins."""
    starts, inside = [], False
    for position, item in enumerate(output):
        kind = item.get("type") or ("message" if "role" in item else "")
        model = item.get("role") == "assistant" if kind == "message" else not kind.endswith("_output")
        if model and not inside:
            starts.append(position)
        inside = model
    return starts or [0]


def main(paths: list[str]) -> None:
    converter = ResponsesConverter(return_token_id_information=False)
    for path in paths:
        with open(path, encoding="utf-8") as stream:
            lines = list(stream)
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                params, output = record["responses_create_params"], record["response"]["output"]
                given = params["input"] if isinstance(params.get("input"), list) else None
            except (ValueError, KeyError, TypeError):
                continue
            if not all(isinstance(item, dict) for item in output):
                continue
            for start in model_turn_starts(output):
                entry: dict = {"source": f"{path}:{number}", "start": start}
                try:
                    body = dict(params)
                    if start:
                        before = given if given is not None else [{"role": "user", "content": params["input"]}]
                        body["input"] = [*before, *output[:start]]
                    # The agent validates the row, then sends the conversation so far (`exclude_unset` dumps).
                    validated = NeMoGymResponseCreateParamsNonStreaming.model_validate(
                        {k: v for k, v in body.items() if v is not None}
                    )
                    entry["responses"] = validated.model_dump(mode="json", exclude_unset=True)
                    chat = converter.responses_to_chat_completion_create_params(validated)
                    entry["chat"] = chat.model_dump(mode="json", exclude_unset=True)
                except Exception as error:  # any refusal of Gym's is reported, not fatal
                    entry["error"] = f"{type(error).__name__}: {str(error)[:200]}"
                print(json.dumps(entry))


if __name__ == "__main__":
    main(sys.argv[1:])
