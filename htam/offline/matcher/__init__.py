"""Stage 3 of the pipeline: canonical nodes to a :class:`~htam.offline.ir.model.Match`, the
family (elementwise, row, GEMM) and its SSA programs, or :class:`NoMatch` saying why not.
``families`` decides; ``build``, ``elementwise``, ``rows`` and ``gemm`` build the programs;
``library`` cuts a torch-computed prefix (a convolution, a GEMM) off a chain the families cover."""
