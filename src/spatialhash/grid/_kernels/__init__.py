"""Kernels of the batch grid: the build, and the pair, radius, k-nearest, box and ray searches."""
