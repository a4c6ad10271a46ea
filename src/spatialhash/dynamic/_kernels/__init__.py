"""Kernels of the dynamic hash: storage, moves, the sort of entries, pairs, queries, rays."""
