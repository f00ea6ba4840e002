"""Which template family an operation outside the tables would need: a refusal names it, so a
user (and the bench, counting refusals apart) sees what is missing, not only what was met."""

from __future__ import annotations

import re

# (pattern on the lower-cased operation or module name, the family it belongs to); first wins
_FAMILIES = [
    (r"conv", "convolution"),
    (r"pool", "pooling"),
    (r"batch_?norm|group_?norm|instance_?norm|local_response", "normalization over channels"),
    (r"loss|cross_entropy|nll|kl_div|margin|cosine_embedding", "loss"),
    (r"attention|multihead", "attention"),
    (r"lstm|gru|rnn", "recurrent"),
    (r"cum|scan", "scan"),
    (r"einsum|tensordot|kron|outer", "einsum"),
    (r"triu|tril|diag", "structured matrix"),
    (r"interpolate|upsample|pixel_shuffle|grid_sample", "resampling"),
    (r"sort|topk|kthvalue|median|quantile|unique", "sorting and selection"),
    (r"gather|scatter|index|embedding|take", "indexing"),
    (r"cat|stack|split|chunk|narrow|select|pad|roll|flip|repeat|expand", "data movement"),
]


def missing_family(name: str) -> str:
    """The family an operation or module named ``name`` would need ("other" when unknown)."""
    low = name.lower()
    return next((family for pattern, family in _FAMILIES if re.search(pattern, low)), "other")


def family_note(name: str) -> str:
    """The suffix a refusal carries: ``[missing family: convolution]``."""
    return f" [missing family: {missing_family(name)}]"


def not_one_tensor(out: object) -> str:
    """The refusal of a reference whose output is not one tensor (a tuple of several: the
    single-kernel families write one output; the whole-model path takes tuples)."""
    if isinstance(out, (tuple, list)):
        return (
            f"the reference returns {len(out)} outputs (a {type(out).__name__}); the "
            "single-kernel families write one [missing family: multiple outputs]"
        )
    return f"the reference returns a {type(out).__name__}, not a tensor"
