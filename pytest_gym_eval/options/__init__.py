"""The plugin's options: the table of every ``--gym-*`` option and ``gym_*`` ini option, their registration, their
resolution (:class:`~pytest_gym_eval.options.gym_options.GymOptions`, with the readers of single options in
:mod:`~pytest_gym_eval.options.readers`) and the per-dataset settings."""
