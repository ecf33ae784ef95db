"""Reporting a Gym evaluation: one summary model that every output reads, and one module per output.

- :mod:`~pytest_gym_eval.reporting.summary`: per-rollout results, per-dataset summaries, the session verdict;
- :mod:`~pytest_gym_eval.reporting.baseline`: the comparison with an earlier report;
- :mod:`~pytest_gym_eval.reporting.terminal`: the terminal's ``gym reward summary``;
- :mod:`~pytest_gym_eval.reporting.json_report`: the ``--gym-report`` JSON file;
- :mod:`~pytest_gym_eval.reporting.junit`: JUnit XML properties;
- :mod:`~pytest_gym_eval.reporting.fmt`: number and text formatting shared by the text outputs.
"""
