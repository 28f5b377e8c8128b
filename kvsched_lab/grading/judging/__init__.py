"""The verdict: what a submission is judged on and how its points are given.

cases.py (the hidden cases), submissions.py (each TODO's code, parsed as data, nothing run),
stubs.py (the untouched stubs and the given code), compare.py (the first difference from the
reference's observations), verdict.py (the expected observations, validating what a box sent
back, points), box_texts.py, unfinished.py, review_texts.py and error_texts.py (the harness's, the cell
runner's, the review notes' and the submission errors' English texts, read back into the feedback's
language).

It imports the rooms below it (learner/, kernel/ for the cases' shape, the observations and the
harness's texts, box/ for the sandbox's memory notes),
``kvsched_lab.i18n``, ``kvsched_lab.sim``, ``kvsched_lab.course`` and itself.
"""
