"""The learner checks (`kvsched_lab.course`): right answers pass, plausible wrong ones fail usefully.

Each TODO keeps the reference, correct-but-different answers, the untouched stub and at least
four plausible wrong answers as regression cases (Kaggle learntools' habit). The answers are
tests/grading_cases/variants.py, shared with the hidden grader's tests (tests/test_grading.py):
both must fail every wrong answer and pass every alternative. This file holds answers: ship it
with the instructor copy only, like ``solutions/``.
"""
import ast
import json
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest

import kvsched_lab.course as lab
from kvsched_lab.course.hints import HINTS, HintProgress
from kvsched_lab.i18n import LANG_ENV
from kvsched_lab.i18n.messages import catalogue
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, TODO_METHODS, SchedulerSkeleton
from kvsched_lab.course.todos import load_method, reference_sources
from i18n_helpers import assert_same_message_in_chinese

ROOT = Path(__file__).resolve().parents[1]


def fn_from(name, source):
    return load_method(name, textwrap.dedent(source))


# --------------------------------------------------------------------------- variants

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

CORRECT = v.ALTERNATIVES


def wrong_cases():
    for name, variants in v.WRONG.items():
        for i, wrong in enumerate(variants):
            yield pytest.param(name, wrong.source, wrong.why, id=f"{name}-{i}")


# --------------------------------------------------------------------------- languages


@pytest.fixture(params=["en", "zh"])
def lang(request, monkeypatch):
    """Run the test in English and in Chinese (the learner's KVSCHED_LANG)."""
    monkeypatch.setenv(LANG_ENV, request.param)
    return request.param


# --------------------------------------------------------------------------- grading


@pytest.mark.parametrize("name", list(TODO_METHODS))
def test_reference_passes(name, lang, capsys):
    fn = load_method(name, reference_sources()[name])
    lab.check(name, fn, save=False)
    out = capsys.readouterr().out
    want = rf"✅ {name}: passed \(\d+ cases\)\n" if lang == "en" else rf"✅ {name}：通过（\d+ 个用例）\n"
    assert re.fullmatch(want, out), out


@pytest.mark.parametrize("name,i", [(n, i) for n, srcs in CORRECT.items() for i in range(len(srcs))])
def test_correct_but_different_answers_pass(name, i):
    result = lab.grade(name, fn_from(name, CORRECT[name][i]))
    assert result.passed, result.line()


@pytest.mark.parametrize("name,source,why", list(wrong_cases()))
def test_wrong_answers_fail_with_a_useful_message(name, source, why, lang, monkeypatch):
    result = lab.grade(name, fn_from(name, source))
    assert result.status == "failed", result.line()  # statuses are never translated
    if lang == "en":
        assert why in result.message, result.line()
    else:  # the same message, from the same template, in Chinese
        monkeypatch.setenv(LANG_ENV, "en")
        english = lab.grade(name, fn_from(name, source))
        monkeypatch.setenv(LANG_ENV, "zh")
        assert why in english.message and english.message != result.message
        assert_same_message_in_chinese(english.message, result.message)
    with pytest.raises(lab.CheckFailed) as info:
        lab.check(name, fn_from(name, source), save=False)
    assert not isinstance(info.value, lab.NotAttempted)
    rendered = info.value._render_traceback_()
    start = f"❌ {name}: failed: " if lang == "en" else f"❌ {name}：未通过："
    assert rendered == [result.line()] and rendered[0].startswith(start)


def test_at_least_four_wrong_answers_per_todo():
    assert all(len(v.WRONG[n]) >= 4 for n in TODO_METHODS) and all(len(CORRECT[n]) >= 2 for n in TODO_METHODS)


@pytest.mark.parametrize("name", list(TODO_METHODS))
def test_untouched_stub_is_not_attempted(name, lang):
    stub = getattr(SchedulerSkeleton, TODO_METHODS[name])
    result = lab.grade(name, stub)
    assert result.status == "not attempted"
    with pytest.raises(lab.NotAttempted) as info:
        lab.check(name, stub, save=False)
    assert info.value._render_traceback_() == [result.line()]
    assert ("not attempted" if lang == "en" else "尚未作答") in result.line()
    assert f"lab.hint('{name}')" in result.line()


def test_a_wrong_answer_in_one_todo_never_fails_another_check():
    # Grade every wrong variant (endless loops included), then every reference again: the
    # graders share no state, and the step budget leaves no tracer or alarm behind.
    old_trace = sys.gettrace()
    old_alarm = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    for param in wrong_cases():
        name, source, _ = param.values
        assert not lab.grade(name, fn_from(name, source)).passed
        for other, src in reference_sources().items():
            if other != name:
                assert lab.grade(other, load_method(other, src)).passed, (name, other)
    assert sys.gettrace() is old_trace
    if old_alarm is not None:
        assert signal.getsignal(signal.SIGALRM) is old_alarm


def test_endless_loop_is_stopped_quickly():
    import time

    start = time.perf_counter()
    result = lab.grade("snapshot", fn_from("snapshot", "def snapshot(self):\n    while True:\n        pass\n"))
    assert result.status == "failed" and "did not finish" in result.message
    assert time.perf_counter() - start < 15


def test_bad_arguments():
    assert "pass the function itself" in lab.grade("score", 3.0).message
    with pytest.raises(ValueError, match="unknown TODO"):
        lab.grade("scores", lambda self: 0)


# --------------------------------------------------------------------------- answers


@pytest.fixture
def answers(tmp_path, monkeypatch):
    folder = tmp_path / "answers"
    monkeypatch.setenv(lab.ANSWERS_ENV, str(folder))
    return folder


def _score_right(self, hits, size, last_used):
    return float(hits) + 0.5 / (1.0 + max(self.time - last_used, 0)) - 0.25 * size / max(self.capacity_bytes, 1)


def _score_wrong(self, hits, size, last_used):
    return float(hits)


def test_check_saves_the_source_and_status(answers, capsys):
    lab.check("score", _score_right)
    record = json.loads((answers / "score.json").read_text())
    assert record["status"] == "passed" and record["method"] == "_score"
    assert record["source"].startswith("def _score_right(self, hits, size, last_used):")
    with pytest.raises(lab.CheckFailed):
        lab.check("score", _score_wrong)
    assert json.loads((answers / "score.json").read_text())["status"] == "failed"
    # An untouched stub is not saved, so it never overwrites an answer.
    lab.check("score", _score_right)
    with pytest.raises(lab.NotAttempted):
        lab.check("score", SchedulerSkeleton._score)
    assert json.loads((answers / "score.json").read_text())["status"] == "passed"


def test_answers_round_trip_and_my_scheduler_builds_the_learners_class(answers, capsys):
    for name, src in reference_sources().items():
        lab.save_answer(name, load_method(name, src), source=src)
    loaded = lab.load_answers()
    assert set(loaded) == set(TODO_METHODS)
    assert all(lab.grade(n, fn).passed for n, fn in loaded.items())
    Sim = lab.my_scheduler()
    assert "YOUR five methods" in capsys.readouterr().out
    assert Sim.__name__ == "MyKVCacheSchedulerSim" and issubclass(Sim, SchedulerSkeleton)
    sim = Sim(capacity_bytes=128)
    assert sim.schedule([("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40)]) == [
        "add:a", "add:b", "reuse:a", "evict:b", "add:c", "evict:c", "add:d", "reuse:a"]
    assert sim.snapshot() == [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]


def test_my_scheduler_falls_back_with_one_clear_line(answers, capsys):
    from kvsched_lab.sim.policies import POLICIES

    assert lab.my_scheduler() is POLICIES["seed"]
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "seed" in out[0]
    for name in TODO_METHODS:
        assert f"{name} missing" in out[0]
    # One answer saved but wrong: named as failing, with its notebook.
    lab.save_answer("score", _score_wrong)
    for name, src in reference_sources().items():
        if name != "score":
            lab.save_answer(name, load_method(name, src), source=src)
    assert lab.my_scheduler() is POLICIES["seed"]
    out = capsys.readouterr().out
    assert "score failing (notebook 02)" in out and "heap" not in out.split(":", 2)[1].split(";")[0]
    # A tampered file counts as missing, never crashes.
    (answers / "heap.json").write_text("{not json")
    lab.my_scheduler()
    assert "heap missing (notebook 03)" in capsys.readouterr().out


def test_status_lists_every_todo(answers, capsys):
    lab.status()
    out = capsys.readouterr().out
    assert str(answers) in out and all(name in out for name in TODO_METHODS)


def test_answers_default_to_a_folder_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(lab.ANSWERS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert lab.answers_dir() == tmp_path / "kvsched_answers"


def test_both_editions_of_a_course_share_one_answers_folder(tmp_path, monkeypatch, capsys):
    """The zh edition (notebooks/zh/ beside the English notebooks) saves where the English does:
    a TODO passed in English counts in Chinese (zh/06 once said heap was missing)."""
    monkeypatch.delenv(lab.ANSWERS_ENV, raising=False)
    zh = tmp_path / "notebooks" / "zh"
    zh.mkdir(parents=True)
    for folder in (zh.parent, zh):
        (folder / "03_eviction_heap_and_lazy_deletion.ipynb").write_text("{}")
    monkeypatch.chdir(zh.parent)
    heap = reference_sources()["heap"]
    lab.save_answer("heap", load_method("heap", heap), source=heap)
    monkeypatch.chdir(zh)
    assert lab.answers_dir() == zh.parent / "kvsched_answers"
    assert lab.answer_status()["heap"].passed
    # A folder named zh that is not an edition beside the English notebooks keeps its own answers.
    alone = tmp_path / "elsewhere" / "zh"
    alone.mkdir(parents=True)
    (alone / "03_eviction_heap_and_lazy_deletion.ipynb").write_text("{}")
    monkeypatch.chdir(alone)
    assert lab.answers_dir() == alone / "kvsched_answers"


# --------------------------------------------------------------------------- hints, reveal


@pytest.fixture
def answers(tmp_path, monkeypatch):
    """A fresh answers folder for this test (hint progress lives there)."""
    monkeypatch.setenv(lab.ANSWERS_ENV, str(tmp_path / "answers"))
    return tmp_path / "answers"


@pytest.mark.parametrize("name", list(ALL_TODO_METHODS))
def test_each_call_of_hint_shows_the_next_of_four_tiers(name, answers, capsys):
    texts = []
    for tier in (1, 2, 3, 4):
        lab.hint(name)
        texts.append(capsys.readouterr().out)
        assert f"hint {tier}/4: {HINTS[name][tier - 1]}" in texts[-1]
    assert len(set(texts)) == 4
    lab.hint(name)  # past the last tier: the last one again, and where to go next
    again = capsys.readouterr().out
    assert f"hint 4/4: {HINTS[name][3]}" in again and f"lab.reveal({name!r})" in again
    lab.hint(name, 2)  # an explicit tier still works, and does not lower the progress
    assert f"hint 2/4: {HINTS[name][1]}" in capsys.readouterr().out
    assert HintProgress(answers).shown()[name] == 4
    lab.hint(name, 9)
    assert f"hint 4/4: {HINTS[name][3]}" in capsys.readouterr().out


def test_a_hint_asked_for_by_number_spends_nothing(answers, capsys):
    """Before: every call counted, so running notebook 00's tour twice spent tiers 1-2 of `score`
    and the zh tour, run next, showed the near-answer tier 3."""
    for _ in range(3):  # the tour, run three times (either edition: one answers folder)
        lab.hint("score", 1)
        out = capsys.readouterr().out
        assert f"hint 1/4: {HINTS['score'][0]}" in out and "not counted" in out and "goes on from hint 1" in out
    assert HintProgress(answers).shown() == {}
    lab.hint("score")  # the learner's own first ask, in notebook 02: tier 1
    assert "hint 1/4" in capsys.readouterr().out
    lab.hint("score", 3)
    assert "goes on from hint 2" in capsys.readouterr().out
    lab.hint("score")
    assert "hint 2/4" in capsys.readouterr().out


def test_the_tour_asks_for_its_hint_by_number():
    from kvsched_lab.notebook_files import cell_source, read_notebook

    for path in (ROOT / "notebooks" / "00_setup_and_tour.ipynb", ROOT / "notebooks" / "zh" / "00_setup_and_tour.ipynb"):
        calls = [line for c in read_notebook(path)["cells"] if c["cell_type"] == "code"
                 for line in cell_source(c).splitlines() if "lab.hint(" in line]
        assert calls and all(re.search(r"lab\.hint\(\"\w+\", \d\)", line) for line in calls), calls


def test_hint_progress_is_per_session_folder_and_survives_a_new_import(answers, tmp_path, monkeypatch, capsys):
    lab.hint("heap")
    lab.hint("heap")
    capsys.readouterr()
    # A re-run cell or a restarted kernel re-imports nothing we keep: the file is the state.
    import importlib

    import kvsched_lab.course.hints as hints_module

    importlib.reload(hints_module)
    hints_module.hint("heap")
    assert "hint 3/4" in capsys.readouterr().out
    lab.hint("stale")  # another TODO starts at tier 1
    assert "hint 1/4" in capsys.readouterr().out
    monkeypatch.setenv(lab.ANSWERS_ENV, str(tmp_path / "another-learner"))
    lab.hint("heap")  # another session folder: its own progress
    assert "hint 1/4" in capsys.readouterr().out
    monkeypatch.setenv(lab.ANSWERS_ENV, str(answers))
    lab.hint_reset("heap")
    lab.hint("heap")
    assert "hint 1/4" in capsys.readouterr().out
    assert json.loads((answers / "hint_progress.json").read_text()) == {"heap": 1, "stale": 1}


def test_a_broken_progress_file_counts_as_no_hint_seen(answers, capsys):
    answers.mkdir(parents=True)
    (answers / "hint_progress.json").write_text("{not json")
    lab.hint("entry")
    assert "hint 1/4" in capsys.readouterr().out
    (answers / "hint_progress.json").write_text('{"entry": 99, "nope": 2}')
    lab.hint("entry")
    assert "hint 1/4" in capsys.readouterr().out


def test_tier_3_quotes_only_what_the_check_really_says():
    source = "\n".join(f.read_text() for f in sorted((ROOT / "kvsched_lab" / "course" / "checks").glob("*.py")))
    source = re.sub(r"[\"']\s*\n\s*f?[\"']", "", source)  # adjacent string literals, joined as Python does
    for name, tiers in HINTS.items():
        quotes = re.findall(r"“([^”]+)”", tiers[2])
        assert len(quotes) >= 3, (name, tiers[2])
        for quote in quotes:
            assert quote in source, (name, quote)
        assert not any("“" in t for t in (tiers[0], tiers[1], tiers[3])), name


def test_zh_tier_3_quotes_the_zh_check_messages_it_stands_for():
    """Quote by quote: the English quote comes from a check message; the Chinese quote in the same
    place must come from that message's Chinese (a zh learner searches the zh output for it)."""
    from kvsched_lab.i18n.catalogue import extract

    zh = catalogue("zh")
    check_messages = [m for m, where in extract().items() if any(w.startswith("kvsched_lab/course/checks/")
                                                                   for w in where)]
    for name, tiers in HINTS.items():
        english = re.findall(r"“([^”]+)”", tiers[2])
        chinese = re.findall(r"“([^”]+)”", zh[tiers[2]])
        assert len(chinese) == len(english), (name, zh[tiers[2]])
        for en_quote, zh_quote in zip(english, chinese):
            sources = [m for m in check_messages if en_quote in m]
            assert sources, (name, en_quote)
            assert any(zh_quote in zh[m] for m in sources), (name, en_quote, zh_quote)
        assert not any("“" in zh[t] for t in (tiers[0], tiers[1], tiers[3])), name


@pytest.mark.parametrize("name", list(ALL_TODO_METHODS))
def test_hint_and_reveal_speak_the_learners_language(name, answers, monkeypatch, capsys):
    monkeypatch.setenv(LANG_ENV, "zh")
    lab.hint(name)
    out = capsys.readouterr().out
    assert f"💡 {name}，提示 1/4：{catalogue('zh')[HINTS[name][0]]}" in out and "还是卡住了" in out
    lab.hint(name, 4)
    assert catalogue("zh")[HINTS[name][3]] in capsys.readouterr().out
    lab.hint_reset(name)
    assert "从第 1 级重新开始" in capsys.readouterr().out


def _code_fragments(text):
    """Every `code` span of a hint, alone and as the right-hand side of its TODO's answer variable."""
    return re.findall(r"`([^`]+)`", text)


ANSWER_VARIABLE = {"score": "score", "heap": "queue_item", "stale": "is_stale", "entry": "entry",
                   "snapshot": "ordered_entries", "aging": "score"}


@pytest.mark.parametrize("name", list(ALL_TODO_METHODS))
def test_no_hint_tier_holds_the_answer_line_or_an_equivalent(name):
    answer = _reference_answer_line(name)
    rhs = answer.split("=", 1)[1].strip()
    squash = lambda t: re.sub(r"\s+", "", t)  # noqa: E731
    stub = _stub_source(name)
    zh = catalogue("zh")
    for tier, text in [*enumerate(HINTS[name], start=1), *enumerate((zh[t] for t in HINTS[name]), start=1)]:
        assert squash(rhs) not in squash(text), (name, tier)
        # Any code the tier shows, pasted in as the answer line, must not pass the check.
        for fragment in _code_fragments(text):
            for line in (fragment, f"{ANSWER_VARIABLE[name]} = {fragment}"):
                pasted = stub.replace(_raise_line(stub), " " * _indent(stub) + line)
                try:
                    fn = load_method(name, pasted)
                except Exception:  # not even valid code: cannot be the answer
                    continue
                assert not lab.grade(name, fn).passed, (name, tier, line)


def _reference_answer_line(name):
    """The reference's answer line: the first line after its ``# TODO`` comment."""
    body = reference_sources(optional=True)[name].splitlines()
    line = next(body[i + 1].strip() for i, text in enumerate(body) if text.strip().startswith("# TODO"))
    assert line.startswith(ANSWER_VARIABLE[name] + " = "), (name, line)
    return line


def _stub_source(name):
    from kvsched_lab.course.todos import tagged_cells
    from kvsched_lab.notebook_files import cell_source, read_notebook

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = read_notebook(path)
        idx = tagged_cells(nb, "todo").get(name)
        if idx:
            return cell_source(nb["cells"][idx[0]])
    raise AssertionError(f"no todo:{name} cell")


def _raise_line(stub):
    return next(line for line in stub.splitlines() if line.strip().startswith("raise NotImplementedError("))


def _indent(stub):
    line = _raise_line(stub)
    return len(line) - len(line.lstrip())


def test_pasting_the_reference_line_into_the_stub_passes_for_every_todo():
    # The no-answer test above is only meaningful if pasting the real answer line does pass.
    for name in ALL_TODO_METHODS:
        answer = _reference_answer_line(name)
        stub = _stub_source(name)
        fn = load_method(name, stub.replace(_raise_line(stub), " " * _indent(stub) + answer))
        assert lab.grade(name, fn).passed, name


def test_hint_unknown_name():
    with pytest.raises(ValueError):
        lab.hint("heapq")


def test_reveal_with_solutions(capsys):
    lab.reveal("score")
    out = capsys.readouterr().out
    assert "def _score(self" in out


@pytest.mark.parametrize("name", ["score", "stale", "aging", "tier_choice", "admission"])
def test_reveal_prints_the_references_comments_in_the_learners_language(name, monkeypatch, capsys):
    """Before: the zh edition printed the reference's comments in English. Only comments change:
    the code after them is the reference's, character for character."""
    from kvsched_lab.course.todos import practice_reference_sources, reference_sources

    source = {**reference_sources(optional=True), **practice_reference_sources()}[name]
    monkeypatch.setenv(LANG_ENV, "zh")
    lab.reveal(name)
    shown = capsys.readouterr().out
    comments = [line.split("#", 1)[1].strip() for line in source.splitlines() if "#" in line]
    assert comments, name
    for comment in comments:
        assert comment not in shown and f"# {catalogue('zh')[comment]}" in shown, (name, comment)
    code = [line.split("#", 1)[0].rstrip() for line in source.splitlines()]
    assert [line.split("#", 1)[0].rstrip() for line in shown.split("\n\n", 1)[1].splitlines()][:len(code)] == code


def test_reveal_without_solutions(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "solutions", None)  # import solutions -> ImportError
    lab.reveal("stale")
    out = capsys.readouterr().out
    assert "withheld in this release" in out and "instructor" in out and "def " not in out


# --------------------------------------------------------------------------- no answers in the public checks


def _solution_lines():
    """Reference lines a learner could copy: the before-stop hook's rule (28+ chars, not trivial)."""
    out = set()
    for path in (ROOT / "solutions").rglob("*.py"):
        for line in path.read_text().splitlines():
            s = line.strip()
            if len(s) >= 28 and not s.startswith(("#", "import ", "from ", "def ", "class ", '"""', "'''", "@",
                                                  "return [(")):
                out.add(re.sub(r"\s+", " ", s))
    return out


def _answer_lines():
    """The five TODO answers as the reference writes them (the line after each TODO comment)."""
    lines = []
    for src in reference_sources().values():
        body = src.splitlines()
        for i, line in enumerate(body):
            if line.strip().startswith("# TODO"):
                lines.append(re.sub(r"\s+", " ", body[i + 1].strip()))
    assert len(lines) == 5
    return lines


# The one door from the course to the instructor's reference: todos.py's two loaders, which
# `lab.reveal`, the grader and the benchmarks call, and which fail where `solutions` is absent.
REFERENCE_DOORS = {("todos.py", "reference_sources"), ("todos.py", "practice_reference_sources")}


def _solutions_imports(path):
    """(function, line) of every import of ``solutions`` in `path` (function None at module level)."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            names = ([a.name for a in child.names] if isinstance(child, ast.Import)
                     else [child.module or ""] if isinstance(child, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "solutions" for n in names):
                found.append((function, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text()), None)
    return found


def test_course_module_holds_no_reference_lines():
    sol = _solution_lines()
    answers = _answer_lines()
    for path in sorted((ROOT / "kvsched_lab" / "course").rglob("*.py")):
        text = path.read_text()
        stray = [(fn, line) for fn, line in _solutions_imports(path) if (path.name, fn) not in REFERENCE_DOORS]
        assert not stray, (path, stray)
        code = {re.sub(r"\s+", " ", l.strip()) for l in text.splitlines()}
        assert not (code & sol), (path, code & sol)
        flat = re.sub(r"\s+", " ", text)
        for answer in answers:
            rhs = answer.split("=", 1)[1].strip()
            assert rhs not in flat, (path, answer)


def test_fallback_is_seed_here_and_lru_where_seed_is_withheld(monkeypatch, tmp_path, capsys):
    """The student release withholds seed (kvsched release); my_scheduler then gives LRU, labelled."""
    import kvsched_lab.course as lab
    import kvsched_lab.sim.policies as policies

    monkeypatch.setenv("KVSCHED_ANSWERS", str(tmp_path))
    assert lab.my_scheduler() is policies.POLICIES["seed"] and lab.is_chapter_scheduler(policies.POLICIES["seed"])
    assert "'seed' policy" in capsys.readouterr().out
    without = {k: v for k, v in policies.POLICIES.items() if k not in ("seed", "seed-compact")}
    monkeypatch.setattr(policies, "POLICIES", without)
    monkeypatch.setattr(policies, "WITHHELD", ("seed", "seed-compact"))
    cls = lab.my_scheduler()
    out = capsys.readouterr().out
    assert cls is without["lru"] and "FALLBACK: the library's 'lru' policy, NOT the chapter's scheduler" in out
    assert lab.needs_chapter(cls, "the table") is False and "skipped the table" in capsys.readouterr().out
    with pytest.raises(ValueError, match="withheld in the student release.*lab.my_scheduler"):
        policies.make_policy("seed", 64)


# --------------------------------------------------------------------------- optional TODO aging

AGING_RIGHT = {  # same decisions as GDSF over the base score in scope, written differently
    "reference order swapped": "score = chapter_score + self.inflation",
    "the base score asked for again": "score = self.inflation + self.chapter_score(hits, size, last_used)",
    "the chapter's score doubled (all priorities double, decisions do not change)":
        "score = self.inflation + 2 * chapter_score",
}
AGING_WRONG = {  # plausible mistakes, each with a phrase its message must contain
    "no aging": ("score = chapter_score", "ignores self.inflation"),
    "L subtracted": ("score = chapter_score - self.inflation", "must raise the score, not lower it"),
    "L multiplied": ("score = self.inflation * chapter_score", "more than L itself rose"),
    "L counted twice": ("score = 2 * self.inflation + chapter_score", "more than L itself rose"),
    "L halved": ("score = 0.5 * self.inflation + chapter_score", "less than L itself rose"),
    "size dropped": ("score = self.inflation + hits", "bigger entry must still score lower"),
    "hits squared": ("score = self.inflation + hits * hits + 0.5 - 0.25 * size / self.capacity_bytes",
                     "'hot' was never evicted"),
    "size weighted ten times": ("score = self.inflation + hits + 0.5 - 2.5 * size / self.capacity_bytes",
                                "eviction #"),
    "L only for new entries": ("score = self.inflation + chapter_score if hits == 1 else chapter_score",
                               "ignores self.inflation"),
    "a NaN score": ("score = float('nan')", "must return a finite number, it returned nan"),
    "hits dropped": ("score = self.inflation + 0.5 - 0.25 * size / self.capacity_bytes",
                     "more hits must still give a higher score"),
    # Right on the probes (time 10), then raises once the scheduler's clock passes 100.
    "fails late": ("score = self.inflation + chapter_score if self.time < 100 else {}['late']",
                   "it raised KeyError: 'late'"),
}


def _aging_fn(line):
    stub = _stub_source("aging")
    return load_method("aging", stub.replace(_raise_line(stub), " " * _indent(stub) + line))


def test_aging_reference_passes_and_is_not_one_of_the_graded_five(capsys):
    fn = load_method("aging", reference_sources(optional=True)["aging"])
    lab.check("aging", fn, save=False)
    assert re.fullmatch(r"✅ aging: passed \(\d+ cases\)\n", capsys.readouterr().out)
    assert "aging" not in TODO_METHODS and "aging" not in reference_sources()


@pytest.mark.parametrize("why", list(AGING_RIGHT))
def test_aging_right_but_different_answers_pass(why):
    result = lab.grade("aging", _aging_fn(AGING_RIGHT[why]))
    assert result.passed, (why, result.line())


@pytest.mark.parametrize("why", list(AGING_WRONG))
def test_aging_wrong_answers_fail_with_a_useful_message(why, lang, monkeypatch):
    line, phrase = AGING_WRONG[why]
    result = lab.grade("aging", _aging_fn(line))
    assert result.status == "failed", (why, result.line())
    if lang == "en":
        assert phrase in result.message, (why, result.line())
    else:  # the same message, from the same template, in Chinese
        monkeypatch.setenv(LANG_ENV, "en")
        english = lab.grade("aging", _aging_fn(line))
        monkeypatch.setenv(LANG_ENV, "zh")
        assert phrase in english.message and english.message != result.message
        assert_same_message_in_chinese(english.message, result.message)
    assert "lab.hint('aging')" in result.line()


def test_aging_stub_is_not_attempted():
    stub = load_method("aging", _stub_source("aging"))
    assert lab.grade("aging", stub).status == "not attempted"


def test_optional_aging_left_alone_says_so_without_stopping_run_all(lang, capsys):
    """An optional TODO left alone prints "not attempted" and returns (Run All goes on, notebook
    05 failed here before); a wrong attempt still raises, like the graded five's."""
    assert lab.check("aging", load_method("aging", _stub_source("aging")), save=False) is None
    out = capsys.readouterr().out
    assert {"en": "not attempted (optional", "zh": "尚未作答（选做"}[lang] in out and "lab.hint('aging')" in out
    with pytest.raises(lab.CheckFailed):
        lab.check("aging", _aging_fn("score = chapter_score"), save=False)
    with pytest.raises(lab.NotAttempted):  # a graded TODO left alone still stops the notebook
        lab.check("score", load_method("score", _stub_source("score")), save=False)


def test_aging_scheduler_without_aging_decides_like_the_chapters_scheduler():
    # The harness itself: with L left out it must evict exactly what the chapter's scheduler evicts,
    # so the aging TODO's measured effect is the aging alone.
    import random

    from kvsched_lab.course.aging import AgingScheduler
    from solutions import KVCacheSchedulerSim

    rng = random.Random(3)
    touches = [(f"p{rng.randrange(30)}", rng.choice([8, 16, 24])) for _ in range(2000)]
    plain = AgingScheduler(200, lambda self, h, s, lu: self.chapter_score(h, s, lu), KVCacheSchedulerSim._score)
    chapter = KVCacheSchedulerSim(200)
    for key, size in touches:
        plain.touch(key, size)
        chapter.touch(key, size)
    assert list(plain.log) == chapter.log
    assert plain.snapshot() == chapter.snapshot() and plain.inflation > 0


def test_aging_scheduler_fast_replay_matches_touch_by_touch():
    import random

    from kvsched_lab.course.aging import AgingScheduler
    from kvsched_lab.sim.policies.base import generic_replay_requests
    from solutions import KVCacheSchedulerSim
    from solutions.aging import _aged_score

    rng = random.Random(5)
    lists = [[rng.randrange(60) for _ in range(rng.randint(1, 6))] for _ in range(400)]
    base = KVCacheSchedulerSim._score  # the learner's notebook 02 score, in the notebook
    fast, slow = AgingScheduler(25, _aged_score, base), AgingScheduler(25, _aged_score, base)
    assert fast.replay_requests(lists, 1) == generic_replay_requests(slow, lists, 1)
    assert list(fast.log) == list(slow.log) and fast.inflation == slow.inflation > 0
    assert fast.snapshot() == slow.snapshot() and fast.hits == slow.hits


# --------------------------------------------------------------------------- the assembled class, predictions


def test_show_scheduler_prints_the_learners_five_methods_in_the_chapters_layout(answers, capsys):
    import ast

    refs = reference_sources()
    for name in ("score", "stale"):  # two answers saved, three missing
        lab.save_answer(name, load_method(name, refs[name]), source=refs[name])
    text = lab.scheduler_source()
    ast.parse(text)  # one valid class
    order = [text.index(marker) for marker in ("def __init__", "def _score", "TODO heap: no saved answer",
                                               "def _evict_until_fit", "TODO entry: no saved answer",
                                               "def schedule", "TODO snapshot: no saved answer")]
    assert order == sorted(order)
    assert "# yours: TODO score (passed)" in text and "notebook 03" in text
    for name in TODO_METHODS:
        lab.save_answer(name, load_method(name, refs[name]), source=refs[name])
    lab.show_scheduler()
    shown = capsys.readouterr().out
    assert all(f"# yours: TODO {name} (passed)" in shown for name in TODO_METHODS)
    assert "no saved answer" not in shown and refs["snapshot"].splitlines()[0] in shown


def test_compare_prediction_says_whether_it_held(capsys):
    assert lab.compare_prediction("how many?", 3, 3, True) is True
    assert "your prediction held" in capsys.readouterr().out
    assert lab.compare_prediction("how many?", 0, 5, False) is False
    out = capsys.readouterr().out
    assert "you predicted: 0; the run gave: 5" in out and "did not hold" in out
