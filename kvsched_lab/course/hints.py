"""Four-tier hints for every TODO, and `reveal` of the reference when it ships.

Tiers: 1 the idea (why this piece exists); 2 where to look (which fields, in which order);
3 the mistakes the public check catches, quoted from its own failure messages; 4 nearly there.
No tier holds the answer's code line (tests/test_course_checks.py pastes every code fragment of
every tier into the stub and checks that none passes).

``lab.hint(name)`` shows the next tier each time it is called and counts it; ``lab.hint(name, level)``
shows that tier and counts nothing, so the tour (notebook 00) and a look back never spend a
learner's hints. Which tier comes next is `HintProgress`, a small JSON file in the answers folder
(`kvsched_lab.course.answers.answers_dir`): it belongs to the learner's session, not to a
kernel, so re-running a cell, restarting the kernel or opening another notebook never resets
or skips a tier, and ``lab.hint_reset(name)`` starts a TODO's hints over.

Every tier is one English literal marked ``N_`` and translated where it is shown (``_``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional, Tuple

from kvsched_lab.course.checks import NOTEBOOK_OF, TODO_NAMES
from kvsched_lab.course.practice_admission import ADMISSION_HINTS
from kvsched_lab.course.practice_tiers import TIER_CHOICE_HINTS
from kvsched_lab.i18n import N_, _, join
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS

NUM_TIERS = 4
HINTS_FILENAME = "hint_progress.json"  # in the answers folder; not a TODO answer

HINTS: Dict[str, Tuple[str, str, str, str]] = {
    "score": (
        N_("Eviction needs one number per entry that says how much it is worth keeping. The chapter "
           "mixes three reasons into it: reuse (LFU), recency (LRU) and the room the entry takes."),
        N_("The three ingredients are already computed in the cell: reuse_bonus, recency and "
           "size_penalty. Step 3 of notebook 02 gives each one's weight and whether it adds or subtracts."),
        N_("The check reports: “the reuse term weighs too little”; “the recency term weighs too much”; "
           "“the size penalty weighs too much”; “a bigger entry must score lower (size is a penalty)”. "
           "Each names the term to fix and which way it is off."),
        N_("One arithmetic expression assigned to `score`: the reuse bonus at full weight, plus one half "
           "of the recency, minus one quarter of the size penalty. Test it: hits=1, size=0, just touched "
           "gives 1.5."),
    ),
    "heap": (
        N_("To evict fast, the scheduler keeps a min-heap of records, and `heapq` pops the record that "
           "compares smallest. Eviction wants the entry least worth keeping, so the smallest must be "
           "the lowest priority."),
        N_("A record is a tuple compared field by field. Look at the entry just re-scored: its "
           "`priority` decides first, its `last_used` breaks ties (older leaves first), and the key "
           "`prefix` tells the evictor which entry the record is about."),
        N_("The check reports: “the record's priority is negated”; “your records compare by last use "
           "before priority”; “your record holds the CacheEntry object itself”; “the newest heap record "
           "must carry the entry's new priority”."),
        N_("Build `queue_item` as a 3-tuple from three values already in scope: the entry's current "
           "priority (as it is), the entry's last_used, and prefix. The given `heapq.heappush` line adds it."),
    ),
    "stale": (
        N_("Every hit pushed a new record and left the old one in the heap (lazy deletion), so a popped "
           "record may describe its entry as it was some touches ago. Trusting it evicts the wrong entry."),
        N_("Compare the popped record with the live entry `entry`: the record's `priority` and "
           "`last_used` were copied when it was pushed; the entry's fields are the truth now."),
        N_("The check reports: “used a record whose priority still matches but whose last_used is out of "
           "date”; “used a record whose last_used still matches but whose priority is out of date”; and, "
           "naming the entry, that its current record “was popped and dropped” although “only out-of-date "
           "records may be skipped”."),
        N_("`is_stale` is one comparison: the record is stale when its (priority, last_used) pair differs "
           "from the entry's current pair. Both fields count."),
    ),
    "entry": (
        N_("A miss means the prefix is not cached: after making room, the scheduler creates its "
           "`CacheEntry`, the object every later hit updates and the heap records point to."),
        N_("Look at the `CacheEntry` dataclass: priority, last_used, prefix, hits, bytes. This access is "
           "the entry's first use, at the clock value already advanced by `self.time += 1`, holding "
           "`bytes_` bytes. `_refresh_queue` sets the real priority right after."),
        N_("The check reports: “the newest entry must start with one hit (this access counts)”; “a new "
           "entry's last_used must be the current time”; “the new entry's hits and bytes are swapped”; "
           "“the new entry must record its own prefix”."),
        N_("Assign `entry = CacheEntry(...)` with keyword arguments: a 0.0 placeholder priority, "
           "last_used the current time, the prefix, one hit, and the requested size in bytes."),
    ),
    "snapshot": (
        N_("A snapshot shows what the scheduler decided: live entries from most to least worth keeping, "
           "always in the same order, so two runs of the same requests print the same table."),
        N_("Sort `self.entries.values()` with `sorted(..., key=...)`. Order by the priority (highest "
           "first), then `last_used` (older first, the order eviction takes them), then `prefix`."),
        N_("The check reports: “entries came out lowest priority first; the highest must come first”; "
           "“entries must be ordered by their full priority; rounding is for display only”; “two "
           "entries with equal priority came out newest first; the older goes first”."),
        N_("A key function returning a tuple: the priority negated (so the highest sorts first), then "
           "last_used, then prefix. Assign the sorted list to `ordered_entries`."),
    ),
    "aging": (
        N_("The chapter's score never ages: hits collected long ago protect an entry forever. GDSF keeps "
           "one number, the inflation value L, that rises at every eviction; every new priority starts "
           "from L, so old hits lose their edge without re-scoring anybody."),
        N_("Two values are in scope: `self.inflation` (L, which the scheduler raises to each victim's "
           "priority) and `chapter_score` (notebook 02's score for this entry). Your priority combines them."),
        N_("The check reports: “the score ignores self.inflation (L)”; “a higher inflation value must raise "
           "the score, not lower it”; “your score scales self.inflation up”; “a bigger entry must still score "
           "lower (keep the chapter's size penalty)”."),
        N_("One addition assigned to `score`: the inflation value plus the chapter's score, each "
           "as it is."),
    ),
}

# Practice TODOs with hints (not graded; their checks are in kvsched_lab/course/practice*.py).
PRACTICE_HINTS: Dict[str, Tuple[str, str, str, str]] = {"tier_choice": TIER_CHOICE_HINTS, "admission": ADMISSION_HINTS}
PRACTICE_NOTEBOOK_OF = {"tier_choice": "09", "admission": "10"}


def _tiers(name: str) -> Tuple[str, str, str, str]:
    return HINTS[name] if name in HINTS else PRACTICE_HINTS[name]


class HintProgress:
    """The highest tier shown per TODO, kept in ``<answers folder>/hint_progress.json``.

    A missing or unreadable file means no tier shown yet; a folder that cannot be written
    leaves the file as it was (the tier is still shown, and the caller says so).
    """

    def __init__(self, folder: Path):
        self.path = Path(folder) / HINTS_FILENAME

    def shown(self) -> Dict[str, int]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items()
                if (k in HINTS or k in PRACTICE_HINTS) and isinstance(v, int) and 0 < v <= NUM_TIERS}

    def record(self, name: str, tier: int) -> None:
        """Remember that `tier` of `name` was shown (a lower tier never lowers the record)."""
        shown = self.shown()
        shown[name] = max(shown.get(name, 0), tier)
        self._write(shown)

    def reset(self, name: Optional[str] = None) -> None:
        """Forget the tiers shown for `name`, or for every TODO."""
        shown = self.shown()
        for key in ([name] if name else list(shown)):
            shown.pop(key, None)
        self._write(shown)

    def _write(self, shown: Dict[str, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(shown, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.path)


def _known(name: str) -> None:
    if name not in HINTS and name not in PRACTICE_HINTS:
        optional = [n for n in ALL_TODO_METHODS if n not in TODO_NAMES]
        raise ValueError(_("unknown TODO {name!r}; the five are {todos} (optional: {optional})",
                           name=name, todos=join(TODO_NAMES), optional=join(optional)))


def _progress() -> HintProgress:
    from kvsched_lab.course.answers import answers_dir

    return HintProgress(answers_dir())


def hint(name: str, level: Optional[int] = None) -> None:
    """Print the next hint tier for TODO `name` (1 the idea ... 4 nearly there) and count it, or
    tier `level` without counting it."""
    _known(name)
    progress = _progress()
    if level is None:
        shown = min(progress.shown().get(name, 0) + 1, NUM_TIERS)
    else:
        shown = min(max(int(level), 1), NUM_TIERS)
    print(_("💡 {name}, hint {tier}/{tiers}: {text}", name=name, tier=shown, tiers=NUM_TIERS,
            text=_(_tiers(name)[shown - 1])))
    if level is not None:  # asked for by number: a look, not a step (the tour's cell is one)
        following = min(progress.shown().get(name, 0) + 1, NUM_TIERS)
        print(_("   (a hint asked for by its number is not counted: lab.hint({name!r}) goes on from hint {tier})",
                name=name, tier=following))
        return
    try:
        progress.record(name, shown)
    except OSError as e:
        print(_("   (which hints you saw was not saved: {error}; ask for a tier with lab.hint({name!r}, level=...))",
                error=e, name=name))
    if shown < NUM_TIERS:
        print(_("   still stuck? run lab.hint({name!r}) again for hint {tier}", name=name, tier=shown + 1))
    else:
        print(_("   after that: lab.reveal({name!r}) shows the reference, where your instructor ships it; "
                "lab.hint_reset({name!r}) starts these hints over", name=name))


def hint_reset(name: Optional[str] = None) -> None:
    """Start the hints of TODO `name` (or of every TODO) over at tier 1."""
    if name is not None:
        _known(name)
    _progress().reset(name)
    if name is None:
        print(_("hints for every TODO start over at hint 1"))
    else:
        print(_("hints for {name} start over at hint 1", name=name))


def reveal(name: str) -> None:
    """Print the reference for TODO `name`, when the instructor's `solutions` is installed."""
    _known(name)
    from kvsched_lab.course.todos import practice_reference_sources, reference_sources

    try:
        source = practice_reference_sources()[name] if name in PRACTICE_HINTS else reference_sources(optional=True)[name]
    except ImportError:
        print(_("🔒 {name}: the reference solution is withheld in this release (no `solutions` package). "
                "Use lab.hint({name!r}, level={tier}), or ask your instructor.", name=name, tier=NUM_TIERS))
        return
    print(_("🔓 {name}: the reference method (its TODO lives in notebook {notebook}):", name=name,
            notebook=PRACTICE_NOTEBOOK_OF.get(name) or NOTEBOOK_OF[name]) + "\n")
    print(_comments_translated(source))


def _comments_translated(source: str) -> str:
    """`source` with each comment in the reader's language (the runtime catalogue holds the
    reference's comments, see `kvsched_lab.i18n.catalogue.comment_messages`); code untouched."""
    import io
    import tokenize

    lines = source.splitlines(keepends=True)
    comments = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    for tok in reversed(comments):  # from the end, so earlier columns stay valid
        row, col = tok.start
        line = lines[row - 1]
        lines[row - 1] = line[:col] + "# " + _(tok.string[1:].strip()) + line[tok.end[1]:]
    return "".join(lines)
