"""Predict, then run: a learner writes a prediction in a variable before an experiment, and the
experiment's cell compares it with what the run measured, in one line.

The notebooks set a default prediction so they run headless; a learner edits it first.
"""
from __future__ import annotations

from typing import Any

from kvsched_lab.i18n import _


def prediction_line(question: str, predicted: Any, observed: Any, held: bool) -> str:
    """One line: the question, what was predicted, what the run gave, and whether it held."""
    if held:
        verdict = _("your prediction held ✅")
    else:
        verdict = _("your prediction did not hold ❌ (read on: the next cell says why)")
    return f"🔮 {question}\n" + _("   you predicted: {predicted!r}; the run gave: {observed!r}: {verdict}",
                                   predicted=predicted, observed=observed, verdict=verdict)


def compare_prediction(question: str, predicted: Any, observed: Any, held: bool) -> bool:
    """Print `prediction_line` and return `held`."""
    print(prediction_line(question, predicted, observed, held))
    return held
