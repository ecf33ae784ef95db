"""``ray start`` for a second Ray node on the head's machine, bound to 127.0.0.1 like the head.

Run with the Python of Gym's venv, with the arguments of ``ray start`` (``start --address=127.0.0.1:PORT
--node-ip-address=127.0.0.1 ...``) and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment. That
variable keeps every Ray process of the node on 127.0.0.1, but ``ray start`` then refuses to start a second
node ("Multi-node Ray clusters are not supported on Windows and OSX"); with it at 1, ``ray start`` replaces
127.0.0.1 in ``--address`` and ``--node-ip-address`` by the machine's network address
(``resolve_ip_for_localhost``) and the node's processes listen on every interface. So this runs Ray's own
``ray start`` with two changes made in this process only: that one check passes, and a loopback address stays
a loopback address. The node's processes still get the variable at 0 from the environment.
"""

from __future__ import annotations

import sys

import ray._private.ray_constants as constants  # type: ignore[import-not-found]
import ray._private.services as services  # type: ignore[import-not-found]
from ray.scripts.scripts import main  # type: ignore[import-not-found]

constants.ENABLE_RAY_CLUSTER = True
services.get_node_ip_address = lambda address=None: "127.0.0.1"

if __name__ == "__main__":
    sys.argv[0] = "ray"
    sys.exit(main())
