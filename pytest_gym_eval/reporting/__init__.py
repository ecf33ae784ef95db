"""Reporting a Gym evaluation: one summary model that every output reads, and one module per output.

- :mod:`~pytest_gym_eval.reporting.summary`: per-rollout results, per-dataset summaries, the session verdict;
- :mod:`~pytest_gym_eval.reporting.baseline`: the comparison with an earlier report;
- :mod:`~pytest_gym_eval.reporting.terminal`: the terminal's ``gym reward summary``;
- :mod:`~pytest_gym_eval.reporting.json_report`: the ``--gym-report`` JSON file, and
  :mod:`~pytest_gym_eval.reporting.json_reading`: one read back into the summary model;
- :mod:`~pytest_gym_eval.reporting.junit`: JUnit XML properties and the testcases the session's end adds, with
  :mod:`~pytest_gym_eval.reporting.junit_values` (a testcase's values), :mod:`~pytest_gym_eval.reporting.junit_plugin`
  (around pytest's writer) and :mod:`~pytest_gym_eval.reporting.junit_file` (``merge``'s own file);
- :mod:`~pytest_gym_eval.reporting.fmt`: number and text formatting shared by the text outputs.
"""
