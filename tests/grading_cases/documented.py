"""The files docs/grading.md documents: its code blocks that open with ``# NAME: ...``, by NAME.

The cluster tests (test_grading_cluster.py, test_grading_k8s.py) run or
check these exact texts, so the page and what was tested cannot drift apart.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documented_files() -> dict:
    text = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:bash|yaml)\n(.*?)```", text, flags=re.S)
    files = {}
    for block in blocks:
        m = re.match(r"(?:#!/bin/bash\n)?# ([\w.-]+): ", block)
        if m:
            files[m.group(1)] = block
    return files
