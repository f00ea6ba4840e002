"""Whole models: a forward cut into library calls and fusible segments, stitched into one
``ModelNew``.

When no single family fits a task (a level-3 network, a convolution followed by a batch norm),
the model's own source is kept and each segment a template covers is pointed at a kernel of our
own (:mod:`.rewrite`): activations, training-mode batch norm, layer norm, softmax, and a
convolution's or linear layer's bias fused with the activation after it. Library calls
(convolutions, matrix products, pooling, recurrent layers) stay torch's. :mod:`.match` builds
the :class:`~htam.offline.ir.model.Match` of family ``model``; :mod:`.render` writes the file.
"""
