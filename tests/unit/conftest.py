"""The unit tier, the fast loop (``pytest tests/unit``): plain functions and classes of the package, no pytest
session and no child process. Tests that run pytest (``pytester``) or the stand-in ``gym`` are in tests/plugin."""
