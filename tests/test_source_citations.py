"""The engines' source files the course cites exist in the versions it names.

Notebooks, docs and the tier code cite files of vLLM 0.33.0, SGLang 0.5.23 and LMCache 0.5.6 so a
learner can open them. Each cited path must be one of the files below, listed from those
versions' wheels (``pip download --no-deps vllm==0.33.0`` etc., read on 2026-12-01). Before this
test, notebook 09 and ``kv/tiers/placement.py`` cited ``mem_cache/hiradix_cache.py``, which
SGLang 0.5.23 no longer has (its logic moved to ``unified_radix_cache.py`` and
``unified_cache/unified_tree_core.py``). A new citation is checked against the version it names
and added here.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Files (or folders, ending in /) of the named versions, as their wheels lay them out.
SOURCES = {
    "vllm 0.33.0": {
        "vllm/v1/core/block_pool.py", "vllm/v1/core/kv_cache_utils.py", "vllm/v1/core/kv_cache_manager.py",
        "vllm/v1/core/single_type_kv_cache_manager.py",
        "vllm/v1/core/sched/scheduler.py", "vllm/v1/core/sched/request_queue.py", "vllm/v1/kv_offload/", "vllm/v1/kv_offload/cpu/spec.py",
        "vllm/v1/kv_offload/cpu/manager.py", "vllm/v1/kv_offload/cpu/policies/", "vllm/config/vllm.py",
    },
    "sglang 0.5.23": {
        "sglang/srt/mem_cache/radix_cache.py", "sglang/srt/mem_cache/unified_radix_cache.py",
        "sglang/srt/mem_cache/unified_cache/unified_tree_core.py", "sglang/srt/arg_groups/fields/memory.py",
        "sglang/srt/mem_cache/evict_policy.py", "sglang/srt/managers/schedule_policy.py",
    },
    "lmcache 0.5.6": {"lmcache/v1/config.py"},
}
KNOWN = {path for files in SOURCES.values() for path in files}
# A cited path: in backticks, starting with a folder of one of those projects.
CITED = re.compile(r"`{1,2}((?:python/sglang/srt/|sglang/srt/|vllm/|mem_cache/|v1/|cpu/|config/|arg_groups/|lmcache/)"
                   r"[\w/]*(?:\.py|/))`{1,2}")


def cited_paths():
    texts = [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("docs/*.md"), ROOT / "README.md",
             *ROOT.glob("kvsched_lab/**/*.py")]
    for path in texts:
        for m in CITED.finditer(path.read_text(encoding="utf-8")):
            yield path.relative_to(ROOT).as_posix(), m.group(1)


def known(cited: str) -> bool:
    cited = cited.removeprefix("python/")
    # a path may be cited from any folder down, e.g. `mem_cache/radix_cache.py` or `cpu/spec.py`
    return any(path == cited or path.endswith("/" + cited) for path in KNOWN)


def test_every_cited_engine_file_exists_in_the_version_named():
    found = list(cited_paths())
    assert len(found) >= 10, found  # the pattern sees the citations (notebooks 08 and 09 at least)
    missing = sorted({(where, cited) for where, cited in found if not known(cited)})
    assert not missing, missing


def test_the_retired_hiradix_file_is_cited_nowhere():
    for path in [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("kvsched_lab/**/*.py"), *ROOT.glob("docs/*.md")]:
        assert "hiradix_cache.py" not in path.read_text(encoding="utf-8"), path
