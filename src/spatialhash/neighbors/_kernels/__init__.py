"""Kernels of the neighbour lists: the candidates' rows, the check of the moves, the pairs
within reach, and a user's function over them."""
