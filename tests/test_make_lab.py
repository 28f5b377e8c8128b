"""`make lab` (the README's first command) really serves JupyterLab on notebooks/, headless."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
@pytest.mark.skipif(not (ROOT / ".venv" / ".ready").exists(), reason="run through `make test` (needs .venv)")
def test_make_lab_serves_the_notebooks():
    port = _free_port()
    proc = subprocess.Popen(["make", "lab", f"PORT={port}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url, output = None, []
        deadline = time.monotonic() + 90
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            output.append(line)
            m = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=\w+)", line)
            url = m.group(1) if m else None
        assert url, "make lab printed no URL:\n" + "".join(output[-20:])
        names, error = set(), None
        while not names and time.monotonic() < deadline:  # the URL is printed a moment before it serves
            try:
                with urllib.request.urlopen(url.replace("/lab?", "/api/contents?"), timeout=10) as resp:
                    names = {item["name"] for item in json.load(resp)["content"]}
            except OSError as e:
                error = e
                time.sleep(1)
        assert "00_setup_and_tour.ipynb" in names, f"JupyterLab did not list the notebooks ({error})"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
