"""The C++ backend: OpenMP loops built with torch.utils.cpp_extension, for the CPU."""
