"""Settings for the whole suite.

Under ``make test`` two xdist workers share the machine's cores; torch in each would start one
thread per core and the two spin against each other (a tiny model's prefill several-fold slower),
so a worker's torch runs one thread, as the notebook runs' kernels do (tests/test_notebooks.py).
"""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
