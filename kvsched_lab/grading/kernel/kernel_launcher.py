"""Start an IPython kernel for grading or release checks, with a clean import path and limits.

The grader copies this file next to a kernelspec and starts it as
``python -I kernel_launcher.py --lib DIR --memory-mb N --log FILE -f CONNECTION_FILE`` (an ipykernel,
for nbval), or, in the grading box, with ``--cells FD`` instead of ``-f ...`` (cells.py's runner on
the socket FD, no ipykernel):

* ``-I`` ignores PYTHONPATH and user site-packages; the editable install's finders, which map
  ``kvsched_lab`` and ``solutions`` to the instructor's checkout, are removed, and ``solutions``
  and the grader-only modules are refused (the sandbox holds neither anyway), so the kernel imports
  ``kvsched_lab`` from ``DIR`` only;
* address space, file size and core dumps are limited (children inherit the limits);
* stdout/stderr go to ``FILE``, so output written straight to the file descriptors can neither
  flood the grader's pipes nor reach them.

Standard library only: it runs before anything else is importable.
"""
import os
import resource
import sys

# The grader's side of kvsched_lab.grading: every room but this one (kernel/, all the sandbox holds of it)
# and the loose modules; tests/test_layout.py checks that this names every one.
REFUSED = ("solutions", *(f"kvsched_lab.grading.{name}" for name in (
    "learner", "box", "judging", "release", "classroom", "batch", "bench", "class_commands", "command")))


class _Refuse:
    """Meta-path finder that makes the instructor-only packages unimportable."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if any(name == r or name.startswith(r + ".") for r in REFUSED):
            raise ModuleNotFoundError(f"No module named {name!r} (not available while grading)", name=name)
        return None


def isolate(lib: str) -> None:
    """Import `kvsched_lab` from `lib` only and refuse the instructor-only packages."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")
                         and "__editable__" not in getattr(h, "__qualname__", "")]
    sys.path[:] = [lib] + [p for p in sys.path if "__editable__" not in p and p not in ("", ".")]
    sys.path_importer_cache.clear()
    sys.meta_path.insert(0, _Refuse)


def limit(memory_mb: int) -> None:
    mem = memory_mb << 20
    for what, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, 256 << 20), (resource.RLIMIT_CORE, 0)):
        try:
            resource.setrlimit(what, (value, value))
        except (ValueError, OSError):  # a lower hard limit is already in place: keep it
            pass


def main() -> None:
    args = sys.argv[1:]
    opts = {}
    while args and args[0] in ("--lib", "--memory-mb", "--log", "--cells"):
        opts[args[0]] = args[1]
        args = args[2:]
    isolate(os.path.abspath(opts["--lib"]))
    limit(int(opts.get("--memory-mb", "2048")))
    log = os.open(opts.get("--log", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if "--cells" in opts:  # imported from DIR, now that the import path is clean
        from kvsched_lab.grading.kernel.cells import serve

        sys.argv = sys.argv[:1]  # the cells need no arguments
        serve(int(opts["--cells"]))
        return
    from ipykernel.kernelapp import launch_new_instance

    # No history database: nothing a cell ran is kept where later code could read it back.
    sys.argv = [sys.argv[0], "--HistoryManager.enabled=False"] + args
    launch_new_instance()


if __name__ == "__main__":
    main()
