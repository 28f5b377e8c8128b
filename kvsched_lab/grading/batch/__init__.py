"""Grading a class: one submission in its box, the batch around it, and what a run leaves behind.

grade.py (one submission in its sandbox, its feedback, ``grades.csv``), batch.py (the batch:
learners, ``--shard``, the journal, workers, progress; its options are one `BatchOptions`),
journal.py (each learner's grade written as it is known, read back and checked by ``--resume``),
journal_key.py (the key outside OUT that signs journal entries), shards.py
(``--shard K/N``), merge.py (``kvsched grade merge``), manifest.py (the end of a run: feedback,
``grades.csv``, ``manifest.json``), progress.py (the progress bar or lines), stamp.py (the version
stamp: grader version and code, hidden cases' SHA-256), regrade.py (``--learner PATH``: one
learner graded again in a finished run, only its row changed).

The highest room: it may import every room below it and itself; only the loose modules of
grading/ (the command lines, the grader's benchmark) import it.
"""
