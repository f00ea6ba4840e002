"""What the host side raises when the evaluator itself cannot work."""


class EvaluatorError(Exception):
    """The evaluator itself cannot work (no device, a broken reference): not the candidate's fault."""
