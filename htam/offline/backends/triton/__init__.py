"""The Triton backend: kernels run on the GPU, or under the Triton interpreter on the CPU."""
