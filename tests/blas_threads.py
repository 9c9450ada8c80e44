"""Imported first by conftest.py.

Every test process runs BLAS on one thread (set before numpy loads it; the processes a test
starts inherit it): the workers of ``make test`` occupy every core, and a BLAS that spreads a small
product over cores busy with another worker spins instead of computing (measured on two loaded
cores: 12 small QR factorisations 0.19 s on one thread, 7.1 s on two). A test that needs more
threads sets them itself (threadpoolctl).
"""
import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
