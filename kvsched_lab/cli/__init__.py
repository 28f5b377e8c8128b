"""The ``kvsched`` command line: one file per subcommand, the top of the import order.

- main.py: the ``kvsched`` entry point and its argument parser (doctor, replay, i18n, bench,
  grade, release); ``grade`` and ``release`` are ``kvsched_lab.grading``'s.
- replay.py: ``kvsched replay`` (one trace through one policy; real KV blocks; concurrent engine);
  replay_tiers.py: its host and disk tiers (``--host-blocks``, ``--disk-blocks``, ``--write-policy``).
- i18n.py: ``kvsched i18n`` (update the PO files, build notebooks/zh, list what is stale).
- bench.py: ``kvsched bench``: runs the sections below and prints the report (JSON or markdown);
  bench_policies.py (replay speed, heap records, hit rates, the sweep), bench_kv.py (prefill on
  real KV blocks), bench_tiers.py (copying a block between tiers against recomputing it, the
  break-even), bench_notebooks.py (each notebook top to bottom), bench_report.py (markdown).
- doctor.py: ``kvsched doctor`` (what this machine has for the course).
- gpu_check.py: the GPU check that ``scripts/gpu-check.sh`` runs.
- selfcheck.py: the student bundle's ``make check`` (every notebook run, check cells reported).
"""
