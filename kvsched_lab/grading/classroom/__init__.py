"""Around the grades of a class: what an ``--out`` folder holds, and the instructor's tools on it.

overrides.py (the instructor's corrections, `apply_overrides`), class_files.py (grades.csv rows,
details.json, feedback names), feedback_html.py (feedback as a self-contained page), roster.py
(submissions to student ids), late.py (the late rule), export.py (Canvas and Moodle CSVs),
report.py (the class report), similarity.py (pairs to review).

It imports the rooms below it (learner/ for safe writing, judging/ for the points and the stubs),
``kvsched_lab.i18n``, ``kvsched_lab.sim``, ``kvsched_lab.course`` and itself; never the batch, which
writes a class's files with what is here.
"""
