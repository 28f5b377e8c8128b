"""The verdict: what a submission is judged on and how its points are given.

cases.py (the hidden cases), submissions.py (each TODO's code, parsed as data, nothing run),
stubs.py (the untouched stubs and the given code), compare.py (the first difference from the
reference's observations), verdict.py (the expected observations, validating what a box sent
back, points).

It imports the rooms below it (learner/, kernel/ for the cases' shape and the observations),
``kvsched_lab.i18n``, ``kvsched_lab.sim``, ``kvsched_lab.course`` and itself.
"""
