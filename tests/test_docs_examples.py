"""The code examples of the README and the docs site run as written.

Every ```python block of ``README.md`` and ``docs/*.md`` that needs no GPU (it names no
``cuda``, CuPy, PyTorch or Dask) runs on the CPU device, the blocks of one page in order in
one namespace (a page's later examples build on its earlier ones). Blocks written as
interpreter transcripts (``>>>``) show a GPU session's output and are not run here.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_NEEDS_GPU = re.compile(r"cuda|cupy|torch|dask|Sharding\(", re.I)


def _blocks(page):
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def _runnable(block):
    return not block.lstrip().startswith(">>>") and not _NEEDS_GPU.search(block)


def test_every_page_is_read():
    """The pages with examples are found (a renamed folder would silently test nothing)."""
    assert sum(len(_blocks(p)) for p in PAGES) >= 20
    assert sum(_runnable(b) for p in PAGES for b in _blocks(p)) >= 12


@pytest.mark.parametrize("page", [p for p in PAGES if any(_runnable(b) for b in _blocks(p))],
                         ids=lambda p: p.name)
def test_examples_run(page, monkeypatch, capsys):
    monkeypatch.setenv("FORGE_ARRAY_DEVICE", "cpu")
    namespace = {"__name__": f"docs_{page.stem}"}
    for k, block in enumerate(_blocks(page)):
        if _runnable(block):
            exec(compile(block, f"{page.name}, example {k}", "exec"), namespace)  # noqa: S102
