"""The plugin tier: whole pytest sessions (``pytester``, child pytest processes) against the stand-in ``gym``
(tests/support/fake_gym.py, fixture ``fake_gym``), and the commands and servers the package starts as processes.
No real Gym: it runs offline in a few minutes (``-m "not gym and not compat and not live and not browser"``)."""
