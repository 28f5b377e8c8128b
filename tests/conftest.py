"""Settings for the whole suite.

Under ``make test`` two xdist workers share the machine's cores; torch in each would start one
thread per core and the two spin against each other (a tiny model's prefill several-fold slower),
so a worker's torch runs one thread, as the notebook runs' kernels do (tests/test_notebooks.py).

The files run longest first. ``--dist loadfile`` hands out whole files in collection order (the
Makefile turns off xdist's own order, most tests first, which put the few-test long files such
as the grading attacks and the Colab simulation last: they ran alone at the end while the other
worker sat idle). `LONG_POLES` lists the files that take longest, slowest first (measured with
``--durations``, docs/testing.md); every other file follows, most tests first, so the short ones
fill the gaps at the end.
"""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

LONG_POLES = (
    "test_notebooks.py",
    "test_grading.py",
    "test_grading_attacks.py",
    "test_colab_sim.py",
    "test_grading_cluster.py",
)


def pytest_collection_modifyitems(config, items):
    """Longest files first (`LONG_POLES`), then the rest by their number of tests; a file's tests keep their order."""
    per_file = {}
    for item in items:
        per_file[item.path.name] = per_file.get(item.path.name, 0) + 1

    def rank(name):
        return (LONG_POLES.index(name), 0, name) if name in LONG_POLES else (len(LONG_POLES), -per_file[name], name)

    items.sort(key=lambda item: rank(item.path.name))
