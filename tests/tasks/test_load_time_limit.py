"""A task that hangs while it loads (its module, or its reference's one run at the small size)
is a one-line TaskError after the time limit, not a silent hang of every command (newcomer
round 8: `htam eval`, `optimize` and `tasks list` printed nothing until killed)."""

import pytest

from htam.tasks import loader
from htam.tasks.task import TaskError

BODY = """
import time
import torch
import torch.nn as nn
{at_import}

class Model(nn.Module):
    def forward(self, x):
        {in_forward}
        return x.relu()


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("at_import", "in_forward", "said"),
    [
        ("time.sleep(600)", "pass", "its module and its reference's run"),
        ("", "time.sleep(600)", "its module and its reference's run"),
    ],
)
def test_a_task_that_hangs_while_it_loads_is_refused(
    tmp_path, monkeypatch, at_import, in_forward, said
):
    monkeypatch.setattr(loader, "LOAD_TIMEOUT_S", 1.0)
    path = tmp_path / "hangs.py"
    path.write_text(BODY.format(at_import=at_import, in_forward=in_forward))
    with pytest.raises(TaskError) as caught:
        loader.load_task(path)
    assert f"{said} at the small size did not finish within 1 s" in str(caught.value)
