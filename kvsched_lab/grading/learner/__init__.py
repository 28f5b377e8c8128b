"""The learner's side as data, the lowest room of grading/: every other room may import it.

writers.py (learner text made safe wherever it is written: CSV cells, Markdown, file names),
learner_files.py (a learner's notebook or .py read as untrusted data), identity.py (a learner's
one name, relative to the arguments' common root; lookalike names refused), intake.py (finding the
learners of a class and copying their regular files into a private folder).

It imports only the standard library, ``kvsched_lab.i18n`` and itself: nothing of grading/ above it.
"""
