"""What a session asks for: datasets (JSON lines or built in Python), policy models and sampling, the plan of rollouts,
shards and the selection gates were judged on."""
