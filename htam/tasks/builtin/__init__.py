"""HTAM's own task suite: KernelBench-format files in level1/, level2/ and level3/ (package data)."""
