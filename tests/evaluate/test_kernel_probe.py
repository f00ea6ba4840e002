"""The candidate side of the kernel probe (candidate/kernels.py): the wrappers pass calls on
outside a probe, and during one count them and spoil what the kernel produced. The judge's
decisions on whole solutions (torch-only, dead code, a kernel on a side input) are the corpus's
cheat files (test_corpus.py)."""

import types

import torch

from htam.evaluate.candidate.kernels import Observer


def _extension(observer: Observer):
    def scale(x, factor):
        return x * factor

    def fill_out(x, out):
        out.copy_(x + 1)

    def argmax(x):
        return x.argmax(dim=-1)

    module = types.ModuleType("fake_ext")
    module.scale, module.fill_out, module.argmax = scale, fill_out, argmax
    module.Helper = type("Helper", (), {})  # a class is left alone
    return observer.extension(module, "fake_ext")


def test_outside_a_probe_the_wrappers_pass_calls_on():
    observer = Observer()
    ext = _extension(observer)
    x = torch.arange(4.0)
    assert torch.equal(ext.scale(x, 2.0), x * 2)
    assert observer.stop() == {"calls": 0, "kernels": []}


def test_a_probe_counts_calls_and_spoils_what_the_kernels_produced():
    observer = Observer()
    ext = _extension(observer)
    x = torch.arange(6.0).reshape(2, 3)
    out = torch.zeros(2, 3)
    bound = ext.scale  # bound before the probe, as an __init__ would
    observer.start()
    y = bound(x, 3.0)
    ext.fill_out(x, out)
    idx = ext.argmax(x)
    seen = observer.stop()
    assert seen == {
        "calls": 3,
        "kernels": ["fake_ext.argmax", "fake_ext.fill_out", "fake_ext.scale"],
    }
    assert torch.isnan(y).all() and torch.isnan(out).all()  # returned, and written in place
    assert torch.equal(x, torch.arange(6.0).reshape(2, 3))  # an input it only read is untouched
    assert torch.equal(idx, ~torch.tensor([2, 2]))  # integers inverted


def test_a_wrapper_is_not_wrapped_twice():
    observer = Observer()
    ext = _extension(observer)
    first = ext.scale
    observer.extension(ext, "fake_ext")
    assert ext.scale is first
