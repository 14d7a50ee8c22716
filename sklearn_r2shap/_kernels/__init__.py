"""Cython kernels (nogil, OpenMP ``prange`` over rows), one file per algorithm family.

Layer: kernels. A kernel imports (at Python level) only the ground floor.
"""
