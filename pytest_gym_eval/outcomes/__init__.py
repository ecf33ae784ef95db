"""What a rollout came to: Gym's records, the test outcome, root causes of failures, usage, custom metrics and the
public :class:`~pytest_gym_eval.Rollout` with its tool-call matchers."""
