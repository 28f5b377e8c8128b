"""Answers that outlive one Colab machine: Google Drive on opt-in, or one file to download and upload.

Each Colab notebook gets a fresh machine, so ``./kvsched_answers`` is lost between notebooks.
Two ways keep them:

* `use_drive()` (the setup cell's ``ANSWERS_ON_DRIVE = True``): mount the learner's Drive and
  point ``$KVSCHED_ANSWERS`` at ``MyDrive/kvsched_answers``; answers already saved on this
  machine are copied there first (never over one already on Drive).
* `download_answers()` writes every saved answer into one JSON file (and hands it to the browser
  on Colab); in a later notebook `upload_answers()` shows a core ipywidgets ``FileUpload``
  whose file `restore_answers` checks and writes back. It works with ipywidgets 7 (Colab) and 8.

A rejected file changes nothing: every record is checked before any is written.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from kvsched_lab.course.answers import (ANSWERS_ENV, answers_dir, record_function, saved_records,
                                        write_record)
from kvsched_lab.course.checks import TODO_NAMES, grade
from kvsched_lab.i18n import _, join

DRIVE_MOUNTPOINT = "/content/drive"  # where Colab mounts Google Drive
DRIVE_ANSWERS = Path("MyDrive") / "kvsched_answers"  # the answers folder, under the mountpoint
BUNDLE_NAME = "kvsched_answers.json"  # the file download_answers writes
BUNDLE_FORMAT = "kvsched-answers/1"  # the bundle's "format" field: what restore_answers accepts


def on_colab() -> bool:
    """True inside a Google Colab kernel (its `google.colab` module is loaded at start)."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def use_drive(mountpoint: Optional[str] = None) -> Path:
    """Mount Google Drive (Colab asks for access once) and keep answers there from now on.

    `mountpoint` defaults to `DRIVE_MOUNTPOINT`, read at each call."""
    if not on_colab():
        raise RuntimeError(_("Google Drive can only be mounted from Colab; elsewhere answers stay in "
                             "{folder} (or set ${env})", folder=answers_dir(), env=ANSWERS_ENV))
    from google.colab import drive

    mountpoint = mountpoint or DRIVE_MOUNTPOINT
    drive.mount(mountpoint)
    folder = Path(mountpoint) / DRIVE_ANSWERS
    folder.mkdir(parents=True, exist_ok=True)
    local = answers_dir()
    if local.is_dir() and local.resolve() != folder.resolve():
        for path in sorted(local.glob("*.json")):
            if not (folder / path.name).exists():  # what is on Drive already stays
                shutil.copy2(path, folder / path.name)
    os.environ[ANSWERS_ENV] = str(folder)
    return folder


def announce_answers_home(use_drive_now: bool) -> None:
    """One line: where answers are kept; with `use_drive_now` on Colab, move them to Drive first."""
    if use_drive_now and on_colab():
        print(_("answers kept on your Google Drive: {folder}", folder=use_drive()))
    elif use_drive_now:
        print(_("ANSWERS_ON_DRIVE applies on Colab only; answers are saved in {folder}", folder=answers_dir()))
    else:
        print(_("answers are saved in {folder}, which goes when this Colab machine does: set "
                "ANSWERS_ON_DRIVE = True above, or use lab.download_answers() now and lab.upload_answers() later",
                folder=answers_dir()))


def export_answers(path: Optional[Path] = None) -> Path:
    """Write every saved answer into one JSON file (default ``./kvsched_answers.json``); its path."""
    records = saved_records()
    if not records:
        raise FileNotFoundError(_("no saved answers in {folder}: run a TODO's check cell first", folder=answers_dir()))
    path = Path(path) if path is not None else Path.cwd() / BUNDLE_NAME
    bundle = {"format": BUNDLE_FORMAT, "answers": records}
    path.write_text(json.dumps(bundle, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def download_answers(path: Optional[Path] = None) -> Path:
    """Save your answers as one file; on Colab the browser downloads it. Restore: `upload_answers()`."""
    path = export_answers(path)
    if on_colab():
        from google.colab import files

        files.download(str(path))
    print(_("{count} answers saved in {path}; in a later notebook, lab.upload_answers() restores them",
            count=len(saved_records()), path=path))
    return path


def _parse_bundle(data: bytes, name: str) -> Dict[str, dict]:
    try:
        bundle = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(_("{name} is not a kvsched answers file (not JSON): use the file lab.download_answers() "
                           "wrote", name=name)) from None
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT \
            or not isinstance(bundle.get("answers"), dict):
        raise ValueError(_("{name} is not a kvsched answers file: use the file lab.download_answers() wrote",
                           name=name))
    records = bundle["answers"]
    for todo, record in records.items():
        if todo not in TODO_NAMES:
            raise ValueError(_("{name}: unknown TODO {todo!r}; the five are {todos}", name=name, todo=todo,
                               todos=join(TODO_NAMES)))
        if not isinstance(record, dict) or not isinstance(record.get("source"), str):
            raise ValueError(_("{name}: the answer for {todo!r} has no source", name=name, todo=todo))
    return records


def restore_answers(data: bytes, name: str = BUNDLE_NAME) -> Dict[str, str]:
    """Write back the answers in a `download_answers` file; ``{todo: what happened}``.

    Each uploaded answer is re-checked. It replaces the one saved here unless that one passes
    and the uploaded one does not. A file that is not an answers file raises ValueError and
    nothing is written.
    """
    records = _parse_bundle(data, name)
    local = saved_records()
    plan: List[Tuple[str, dict]] = []
    outcome: Dict[str, str] = {}
    for todo, record in records.items():
        fn = record_function(todo, record)
        uploaded = grade(todo, fn).status if fn is not None else "broken"
        here_fn = record_function(todo, local[todo]) if todo in local else None
        if here_fn is not None and grade(todo, here_fn).passed and uploaded != "passed":
            outcome[todo] = _("kept the passing answer saved here (uploaded one: {status})", status=uploaded)
            continue
        plan.append((todo, dict(record, status=uploaded)))
        outcome[todo] = _("restored ({status})", status=uploaded)
    for todo, record in plan:
        write_record(todo, record)
    return outcome


def uploaded_files(value: Any) -> List[Tuple[str, bytes]]:
    """``[(file name, bytes)]`` from a FileUpload's ``value`` in ipywidgets 7 or 8.

    ipywidgets 7 (Colab): ``{name: {"metadata": {...}, "content": bytes}}``;
    ipywidgets 8: a tuple of ``{"name": ..., "content": memoryview, ...}``.
    """
    if isinstance(value, dict):
        return [(name, bytes(item["content"])) for name, item in value.items()]
    return [(item["name"], bytes(item["content"])) for item in value]


def upload_answers():
    """A file picker for a `download_answers` file; choosing one restores the answers in it."""
    import ipywidgets as w

    picker = w.FileUpload(accept=".json", multiple=False, description=_("answers file"))
    out = w.Output()

    def restore(_change=None) -> None:
        files = uploaded_files(picker.value)
        if not files:
            return
        with out:
            out.clear_output()
            for name, data in files:
                try:
                    outcome = restore_answers(data, name)
                except ValueError as e:
                    print(f"❌ {e}")
                    continue
                print(f"✅ {name}: " + "; ".join(f"{todo} {what}" for todo, what in outcome.items()))
                print(_("answers folder: {folder}; lab.status() lists them", folder=answers_dir()))

    picker.observe(restore, names="value")
    return w.VBox([w.Label(_("Choose the kvsched_answers.json that lab.download_answers() gave you:")), picker, out])
