"""The ``kvsched`` command line: one file per subcommand, the top of the import order.

- main.py: the ``kvsched`` entry point and its argument parser (doctor, replay, i18n, bench,
  grade, release); it imports each subcommand's module only when that subcommand runs.
- bench.py: ``kvsched bench`` (policy speed and hit rates, real-KV prefill, notebook run times).
- bench_libcachesim.py: libCacheSim (the optional crosscheck extra) in the bench: its caches built
  as the course's, its C loop timed next to the replays.
- doctor.py: ``kvsched doctor`` (what this machine has for the course).
- gpu_check.py: the GPU check that ``scripts/gpu-check.sh`` runs.
- selfcheck.py: the student bundle's ``make check`` (every notebook run, check cells reported).
"""
