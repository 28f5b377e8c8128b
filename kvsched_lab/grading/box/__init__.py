"""The box itself: the bubblewrap sandbox one submission is graded in, and what bounds it.

sandbox.py (bubblewrap: the box's mounts, namespaces and uid, and running nbval in it),
limits.py (caps on all of one sandbox's processes together: memory, processes, time),
leases.py (sandbox uids no other running batch holds).

It imports only the standard library, ``kvsched_lab.i18n`` and itself (the command it runs in the
box, ``kvsched_lab.grading.kernel.nbrun``, is named, not imported).
"""
