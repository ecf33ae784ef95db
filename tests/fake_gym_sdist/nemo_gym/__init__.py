"""Stand-in for NeMo Gym used by the tests of pytest-gym-eval."""
