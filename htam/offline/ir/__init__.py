"""The IR layer: what the matcher hands to the backends, and what both backends share.

``model``: SSA programs over kernel operands and the :class:`Match`; ``expr``: one expression
per primitive op, in Triton or C++; ``passes``: the row schedule (online softmax, Welford);
``views``: the forward's views of the tensors (rows as ``(outer, R, inner)``, GEMM operands as
strided batched matrices, a GEMM epilogue as its own program)."""
