"""Kernels shared by the batch grid and the dynamic hash: cell arithmetic, ray traversal,
shape tests, the k-nearest heap, the heap of a ray's hits waiting for a user's function,
point padding, and calls to a kernel by its address.

Arrays and scalars in, arrays out; no validation, no public imports.
"""
