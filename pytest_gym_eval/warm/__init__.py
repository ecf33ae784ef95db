"""Keeping Gym warm between sessions (``--gym-keep-alive[=SECONDS]``).

A session with ``--gym-keep-alive`` looks up its Gym configuration's key (:mod:`pytest_gym_eval.fingerprint`) in
the per-user registry (:mod:`pytest_gym_eval.registry`), holding the key's lock:

- a live warm Gym of that key: the session takes a lease on it and attaches, as ``--gym-head-server`` does (no
  ``gym env start``; its run directory's ``warm.json`` says so, and ``logs/gym-servers`` links to the warm Gym's
  server logs so causes of failed rollouts are still found);
- a stale one (:meth:`~pytest_gym_eval.registry.Entry.problem`): it is stopped and unregistered, then as below;
- none: the session starts a *keeper*, ``python -m pytest_gym_eval.warm HOME`` (a process of its own, in a
  process session of its own), and waits, still holding the lock, until the keeper's Gym is ready; then it
  attaches to it like any later session.

The keeper owns the warm Gym. It starts the replay model server in its own process when the session replays
recordings (so the model outlives the session too), then ``gym env start`` exactly as a session does (same
config files, model, one retry of Ray's start-up timeout, 127.0.0.1 only); every process it starts carries its
own :data:`~pytest_gym_eval.orphans.MARKER`, so while it runs no session calls them a dead session's leftovers.
Once Gym is ready it writes the starting session's lease and the registry entry and reports the entry on its
standard output; until then, the end of its standard input (the starting session died or stopped) makes it stop
what it started and exit. Then it watches, once a second:

- *idle* means that no live session holds a lease: the idle clock starts when the last lease goes (a session
  ends, or the keeper finds its process gone), and a new lease stops it. After ``SECONDS`` idle, holding the
  key's lock (so a session attaching at that moment either gets in first or finds no entry), the keeper
  unregisters the Gym and stops it: SIGINT, the grace period, SIGKILL to what is left of each process session;
- its servers exiting (crash, kill) also unregisters and ends it;
- SIGTERM or SIGINT (``python -m pytest_gym_eval stop``) stops it at once.

The API key: neither the registry nor the keeper's spec holds it. The keeper inherits the starting session's
environment, and Gym's model server reads the key from the variable as always, so a warm Gym keeps the key it
started with. A session whose key differs (a rotated key, another account) compares its own value with the
value in the keeper's environment (``/proc/<pid>/environ``, readable by the same user only), and stops that warm
Gym and starts another instead of sending requests with the old key.
"""

from pytest_gym_eval.warm.attach import WarmGym as WarmGym
from pytest_gym_eval.warm.attach import warm_spec as warm_spec
from pytest_gym_eval.warm.keeper import keeper_main as keeper_main
from pytest_gym_eval.warm.spec import HEAD_PATIENCE as HEAD_PATIENCE
from pytest_gym_eval.warm.spec import KEEPER_MODULE as KEEPER_MODULE
from pytest_gym_eval.warm.spec import WarmSpec as WarmSpec
from pytest_gym_eval.warm.status import describe as describe
from pytest_gym_eval.warm.status import describe_starting as describe_starting
from pytest_gym_eval.warm.status import starting as starting
