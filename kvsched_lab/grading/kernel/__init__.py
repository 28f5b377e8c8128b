"""The sandbox's side: the only part of grading/ the sandbox's library holds (this folder, whole).

harness.py (the kernel's side: one learner method run in forked children), observe.py (running a
case and recording what it shows; the grader runs it on the reference too), fakes.py (the
stand-ins around one TODO), audit.py (the advisory runtime audit hook), nbrun.py (the box's entry
point, and the release's nbval runs), cells.py (the box's cell runner: the grading notebook's cells
in one isolated IPython process), kernel_launcher.py (the kernel's clean import path and limits).

It imports only the standard library, nbval/ipykernel/IPython, ``kvsched_lab.sim``, ``kvsched_lab.course``
and itself: no other room of grading/, since none of them is in the box (tests/test_layout.py).
Empty on purpose: ``python -m kvsched_lab.grading.kernel.nbrun`` loads only what it needs.
"""
