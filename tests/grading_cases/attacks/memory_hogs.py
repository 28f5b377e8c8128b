# todo: entry
# Four detached processes of 600 MiB each: every one under the per-process limit, the sandbox far over.
def touch(self, prefix, bytes_):
    import os, time
    for _ in range(4):
        if os.fork() == 0:
            os.setsid()
            hog = b"x" * (600 << 20)  # written, so resident
            time.sleep(60 + len(hog) * 0)
            os._exit(0)
    time.sleep(30)
    raise RuntimeError("hogs")
