"""HTAM: LLM-driven GPU operator optimization with a Hierarchical Transition Graph memory."""

__version__ = "0.1.0"
