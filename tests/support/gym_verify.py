"""Score stored rollouts with a Gym resources server's own ``verify``, without starting any server.

Run with the resources server's own venv Python, the Gym checkout on ``PYTHONPATH``::

    <checkout>/resources_servers/<name>/.venv/bin/python gym_verify.py MODULE SERVER_CLASS REQUEST_CLASS

stdin: one JSON object per line, ``{"row": <the input row Gym got>, "response": <the rollout's response>}``;
stdout: one reward per line, in order. ``REQUEST_CLASS`` is looked up in MODULE, then in
``nemo_gym.base_resources_server``. The server object is built without validation from its config class's
defaults (what the environment's shipped config gives, where ``verify`` reads it), so ``verify`` runs exactly as
it does inside the server, on the same request body Gym sends it (the row's fields plus the response).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys


def main() -> int:
    module_name, server_name, request_name = sys.argv[1:4]
    module = importlib.import_module(module_name)
    server_class = getattr(module, server_name)
    base = importlib.import_module("nemo_gym.base_resources_server")
    request_class = getattr(module, request_name, None) or getattr(base, request_name)
    config_class = server_class.model_fields["config"].annotation
    server = server_class.model_construct(config=config_class.model_construct())
    for line in sys.stdin:
        if not line.strip():
            continue
        pair = json.loads(line)
        request = request_class.model_validate({**pair["row"], "response": pair["response"]})
        result = asyncio.run(server.verify(request))
        print(json.dumps(float(result.reward)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
