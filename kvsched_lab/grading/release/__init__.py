"""The student release: ``kvsched release``, the bundle it builds, and the checks that it gives nothing away.

release.py (``kvsched release``: the command line), release_build.py (building the student bundle:
no grading/, no solutions, no withheld files), release_checks.py (verifying the bundle: no reference
line, the Colab-style install), release_nbval.py (every notebook of both editions run with its
stubs, several at once, longest first, each in a fresh kernel), release_worker.py (one nbval worker:
notebooks in turn in one copy of the bundle, put back after each), steps.py (the checks named as
they run).

It imports the rooms below it (kernel/ for its nbval runner, judging/ for the stubs and the given
code), ``kvsched_lab.i18n``, ``kvsched_lab.course``, ``kvsched_lab.sim`` and itself. The batch
imports its list of withheld files, to leave them out of the sandbox's library too.
"""
