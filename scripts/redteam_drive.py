"""Runs `htam eval` and also prints the judge's raw escape figures (red team 12's diagnostics)."""

import json
import sys

from htam.evaluate.host import evaluator, verdict

_add = verdict.add_timing


def add_timing(result, outcome, *a, **k):
    esc = outcome.result.get("escape", {})
    keep = (
        "clock_ms",
        "reported_ms",
        "escaped_ms",
        "paired_excess_ms",
        "candidate_hidden_ms",
        "reference_hidden_ms",
        "hidden_medians_ms",
        "slack_ms",
        "rounds",
        "copy_ms",
    )
    print("ESCAPE", json.dumps({x: esc.get(x) for x in keep}), file=sys.stderr)
    print("REF_OWN", json.dumps(outcome.result.get("paired_reference")), file=sys.stderr)
    return _add(result, outcome, *a, **k)


evaluator.add_timing = add_timing
from htam.cli import main  # noqa: E402

sys.argv = ["htam", "eval", *sys.argv[1:]]
main()
