"""Stages 1 and 2 of the pipeline: trace the reference ``Model`` (fake tensors, every node's
shape and dtype) and lower its fx graph to canonical nodes, one spelling per operation. Also
here: the argument tables (``specs``, ``modules``) and the copy of ``Model.__init__``."""
