"""pytest-gym-eval: run NVIDIA NeMo Gym evaluations as pytest tests."""

__version__ = "0.1.0"
