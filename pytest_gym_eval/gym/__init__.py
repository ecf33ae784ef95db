"""The Gym side: Gym's processes and servers, one ``gym eval run``, the feed of the rollouts it writes, waves, resume,
orphans, the watchdog and rollouts on demand."""
