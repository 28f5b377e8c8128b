"""The zh-output tests' judge of English prose (tests/english_prose.py) on lines it must tell apart."""
import pytest

from english_prose import english_prose, is_code, output_lines


@pytest.mark.parametrize("line", [
    "kvsched_lab 0.1.0 loaded from /work/h23b",  # the setup line before the language was set
    "ok  python               3.11.7",  # the doctor's mark
    "1.4062         5  'd'     stale: re-scored since",  # the heap table's status
    "chapter score (yours or seed)  下午命中率 87.2%",  # an English label in a Chinese line
    "policy    block hits  prefix hits   wasted",  # a table header
    "score = share of the lru-to-belady gap closed, mean over cells.",
    "## score (_score): passed, 20/20",  # the grader's heading
    "requests_finished 30" if False else "requests finished         30",
])
def test_english_is_caught(line):
    assert english_prose(line), line


@pytest.mark.parametrize("line", [
    "kvsched_lab 0.1.0 已从 /work/h23b 加载",
    "正常 python               3.11.7",
    "✅ my_scheduler：使用的是你自己的五个方法（score、heap、stale、entry、snapshot）",
    "prefill token：45,396 个中计算了 43,764 个 -> 3.6% 由已缓存的块提供",
    "lru            17.6%        17.6%        0",  # a policy name and numbers
    " 1   belady   19.1%  25.5%  32.2%  36.6%  36.6%   +100.0%",
    "t=4 touch('c', 56) -> evict:b, add:c         | a(hits=2, p=2.4219)  c(hits=1, p=1.3906)",
    "    entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)",  # printed source
    "# TODO 1 (score): reuse counts most, recency half as much",  # a comment in printed source
    "return score",
    "conversation（后一半）@4000  差距弥合",
    "['add:a', 'add:b', 'reuse:a', 'evict:b', 'add:c']",
    "<matplotlib.legend.Legend at 0x7fb0be7e1650>",  # a cell's last value (Jupyter hides it after a ';')
])
def test_chinese_code_and_data_pass(line):
    assert english_prose(line) == [], line


def test_code_lines_are_told_from_prose():
    assert is_code("def _score(self, hits: int, size: int, last_used: int) -> float:")
    assert is_code("else:") and is_code("self.time = 0")
    assert not is_code("for the instructor") and not is_code("live") and not is_code("stale: re-scored since")


def test_output_lines_read_streams_html_and_errors_but_not_figures():
    outputs = [
        {"output_type": "stream", "name": "stdout", "text": "a line\nanother\n"},
        {"output_type": "stream", "name": "stderr", "text": "bar: 10%\rbar: 100%\n"},
        {"output_type": "execute_result", "data": {"text/html": "<table><tr><th>策略</th><th>policy</th></tr></table>",
                                                   "text/plain": "ignored"}},
        {"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure size 700x420>"}},
        {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []},
    ]
    lines = [line.strip() for line in output_lines(outputs)]
    assert lines == ["a line", "another", "bar: 100%", "策略    policy", "ValueError: bad"]
