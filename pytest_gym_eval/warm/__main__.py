"""``python -m pytest_gym_eval.warm HOME``: the keeper process (:func:`pytest_gym_eval.warm.keeper.keeper_main`)."""

from __future__ import annotations

import sys

from pytest_gym_eval.warm.keeper import keeper_main

if __name__ == "__main__":
    sys.exit(keeper_main(sys.argv[1:]))
