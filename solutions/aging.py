"""Reference for the optional TODO ``aging`` (notebook 05): GDSF's priority, measured from L.

Not part of the graded chapter: `kvsched_lab.course.checks.aging.grade_aging` is its public check.
"""
from __future__ import annotations


def _aged_score(self, hits: int, size: int, last_used: int) -> float:
    chapter_score = self.chapter_score(hits, size, last_used)  # the chapter's score (TODO score)
    # TODO aging: every priority starts from the inflation value L, which each eviction raises.
    score = self.inflation + chapter_score
    return score
