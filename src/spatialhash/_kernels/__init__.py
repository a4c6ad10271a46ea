"""Numba kernels: arrays and scalars in, arrays out; no validation, no public imports."""
