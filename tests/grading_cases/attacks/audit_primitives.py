# todo: heap
# Primitives the audit hook once missed: io.FileIO on a pathlib.Path, _posixsubprocess.fork_exec,
# sys.modules replaced, and /proc/<pid>/mem opened for writing.
def _refresh_queue(self, prefix):
    import io, os, pathlib, sys, types
    try:
        io.FileIO(pathlib.Path("/etc/hostname")).close()
    except OSError:
        pass
    try:
        import _posixsubprocess
        _posixsubprocess.fork_exec()
    except Exception:
        pass
    fake = types.ModuleType("kvsched_lab.grading.kernel.observe")
    sys.modules["kvsched_lab.grading.kernel.observe"] = fake
    try:
        with open(f"/proc/{os.getpid()}/mem", "r+b"):
            pass
    except OSError:
        pass
    raise RuntimeError("primitives")
