"""Shared by the tests of translated messages: is a Chinese message the translation of an English one?"""
import re
import string

from kvsched_lab.i18n.messages import catalogue


def _template_regex(template):
    """`template` as a regex: its literal text exactly, each field as any text."""
    parts = [re.escape(lit) + ("(.*?)" if field is not None else "")
             for lit, field, _, _ in string.Formatter().parse(template)]
    return re.compile("".join(parts), re.S)


def assert_same_message_in_chinese(english, chinese):
    """`chinese` is the zh catalogue's translation of the template that produced `english`."""
    zh = catalogue("zh")
    outer = [t for t in zh if _template_regex(t).fullmatch(english)]
    assert outer, f"no catalogue template renders {english!r}"
    assert any(_template_regex(zh[t]).fullmatch(chinese) for t in outer), (english, chinese)
    assert re.search(r"[\u4e00-\u9fff]", chinese), chinese
