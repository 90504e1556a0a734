"""The notebook view (``_repr_html_``) of built loaders, map-style and streamed."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset

from loaderkit import DataLoaderBuilder
from loaderkit.plan.display import MONOSPACE

pytestmark = pytest.mark.timeout(120)

HOSTILE = "<script>alert('x')</script>&lt;"


class _Squares(Dataset[int]):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> int:
        return index * index


class _Stream(IterableDataset[int]):
    def __iter__(self) -> Iterator[int]:
        return iter(range(10))


HostileMap = type(HOSTILE, (_Squares,), {"__module__": __name__})
HostileStream = type(HOSTILE, (_Stream,), {"__module__": __name__})


class Page(HTMLParser):
    """The tags of a page, its ``<pre>`` texts by class, and its table rows' cell texts."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.pres: dict[str, str] = {}
        self.rows: list[list[str]] = []
        self.title = ""
        self.styles: list[tuple[str, str]] = []
        """``(tag, inline style)`` of each ``<pre>`` and ``<code>``."""
        self._stack: list[tuple[str, str]] = []
        self._text: list[str] = []
        self.feed(markup)
        self.close()
        assert not self._stack, f"unclosed tags: {self._stack}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._stack.append((tag, dict(attrs).get("class") or ""))
        if tag in ("pre", "td", "tr", "code"):
            self._text = []
        if tag == "tr":
            self.rows.append([])
        if tag in ("pre", "code"):
            self.styles.append((tag, dict(attrs).get("style") or ""))

    def handle_endtag(self, tag: str) -> None:
        open_tag, cls = self._stack.pop()
        assert open_tag == tag
        text = "".join(self._text)
        if tag == "pre":
            self.pres[cls] = text
        elif tag == "td":
            self.rows[-1].append(text)
            self._text = []
        elif tag == "code" and not self.title:
            self.title = text

    def handle_data(self, data: str) -> None:
        self._text.append(data)


@pytest.mark.parametrize("dataset", [HostileMap(), HostileStream()], ids=["map", "stream"])
def test_a_loader_shows_its_position_settings_and_report_escaped(dataset):
    plan = DataLoaderBuilder().with_dataset(dataset).with_batch_size(4).compile()
    with plan.build() as loader:
        next(iter(loader))
        markup = loader._repr_html_()
        explained, shown = loader.explain(), repr(loader)
    assert "<script" not in markup
    page = Page(markup)
    assert "script" not in page.tags
    assert page.pres["loaderkit-explain"] == explained.partition("\n")[2]  # no title line
    assert HOSTILE in explained and "resolved" in explained  # the loader's report, not the plan's
    assert shown.startswith(type(loader).__name__ + "(")
    # its position (batch 1), without the plan's short fingerprint: the report has it in full
    assert page.title == shown[len(type(loader).__name__) :].replace(
        f"plan={plan.fingerprint[:12]}, ", ""
    )
    assert "batch=1" in page.title
    assert markup.count(plan.fingerprint[:12]) == 1
    assert [repr(f"{__name__}.{HOSTILE}")] == [
        cells[2] for cells in page.rows if cells and cells[1] == "type"
    ]
    assert plan.fingerprint in markup
    assert page.styles and all(MONOSPACE in style for _, style in page.styles), page.styles


def test_a_loader_from_a_plain_tensor_dataset_renders():
    data = torch.utils.data.TensorDataset(torch.arange(6))
    plan = DataLoaderBuilder().with_dataset(data).with_batch_size(2).with_shuffle().compile()
    with plan.build() as loader:
        page = Page(loader._repr_html_())
    assert ["order", "shuffle", "True"] in page.rows
    assert "batch=0/3" in page.title
