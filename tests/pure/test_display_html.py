"""The notebook view (``_repr_html_``) of builders and plans: structure, defaults, escaping."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given

from loaderkit import DataLoaderBuilder, PlanError
from loaderkit.plan.display import flatten, settings_rows
from loaderkit.testing.strategies import builders

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>&amp;"
"""A dataset type name that would run code if it reached the page unescaped."""

Hostile = type(HOSTILE, (list,), {})


class Page(HTMLParser):
    """What a browser would see: the tags, the table rows, and the text of each part."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.rows: list[tuple[dict[str, str | None], list[str]]] = []
        self.pres: list[tuple[str, str]] = []
        self.codes: list[str] = []
        self.headers: list[str] = []
        self.fonts: list[tuple[str, str | None]] = []
        """``(tag, font-family of its inline style)`` of each ``<pre>`` and ``<code>``."""
        self._open: list[str] = []
        self._text: list[str] = []
        self._row_attrs: dict[str, str | None] = {}
        self._cells: list[str] = []
        self._pre_class = ""
        self.feed(markup)
        self.close()
        assert not self._open, f"unclosed tags: {self._open}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._open.append(tag)
        if tag == "tr":
            self._row_attrs, self._cells = dict(attrs), []
        if tag in ("td", "th", "pre", "code"):
            self._text = []
        if tag == "pre":
            self._pre_class = dict(attrs).get("class") or ""
        if tag in ("pre", "code"):
            self.fonts.append((tag, font_family(dict(attrs).get("style") or "")))

    def handle_endtag(self, tag: str) -> None:
        assert self._open and self._open[-1] == tag, f"</{tag}> closes {self._open[-1:]}"
        self._open.pop()
        text = "".join(self._text)
        if tag == "td":
            self._cells.append(text)
        elif tag == "th":
            self.headers.append(text)
        elif tag == "tr" and self._cells:
            self.rows.append((self._row_attrs, self._cells))
        elif tag == "pre":
            self.pres.append((self._pre_class, text))
        elif tag == "code" and "td" not in self._open:
            self.codes.append(text)

    def handle_data(self, data: str) -> None:
        self._text.append(data)

    def text(self, pre_class: str) -> str:
        [found] = [text for cls, text in self.pres if cls == pre_class]
        return found


def font_family(style: str) -> str | None:
    """The ``font-family`` of an inline ``style`` attribute (``None`` without one)."""
    for declaration in style.split(";"):
        name, _, value = declaration.partition(":")
        if name.strip() == "font-family":
            return value.strip()
    return None


def assert_monospace(page: Page) -> None:
    """Every ``<pre>`` and ``<code>`` names its font: monospace fonts, ending with the generic.

    Set on the element itself, so that a notebook's stylesheet (nbconvert's ``pre {
    font-family: inherit }``) cannot lay the report out in a proportional font.
    """
    assert page.fonts, "no <pre> or <code> in the page"
    for tag, family in page.fonts:
        assert family is not None, f"<{tag}> names no font-family"
        fonts = [f.strip().strip("'") for f in family.split(",")]
        assert fonts[-1] == "monospace", (tag, family)
        assert '"' not in family  # inside style="...": a double quote would end the attribute
        assert "Liberation Mono" in fonts and "Consolas" in fonts and "Menlo" in fonts


def explained(report: str) -> str:
    """``explain()`` as the page shows it: without its title line, which the frame's title is."""
    return report.partition("\n")[2]


def chain(builder: DataLoaderBuilder) -> str:
    """The builder's repr, one call per line as the page shows it."""
    head, *calls = builder._chain()
    assert "".join([head, *calls]) == repr(builder)
    return "\n".join([head, *(f"    {call}" for call in calls)])


def assert_each_fact_once(markup: str, fingerprint: str) -> None:
    """The fingerprint appears once (in full, at the report's end), its short form nowhere else."""
    page = Page(markup)
    text = "".join(text for _, text in page.pres) + "".join(page.codes)
    assert text.count(fingerprint[:12]) == 1, text
    assert text.count(fingerprint) == 1


def test_a_hostile_dataset_name_is_shown_as_text_never_as_markup():
    builder = DataLoaderBuilder().with_dataset(Hostile(range(10))).with_batch_size(4)
    plan = builder.compile()
    for markup in (builder._repr_html_(), plan._repr_html_()):
        assert "<script" not in markup and "<img" not in markup
        page = Page(markup)
        assert "script" not in page.tags and "img" not in page.tags
        assert HOSTILE in page.text("loaderkit-explain")  # the text survives, unescaped once
        values = {cells[1]: cells[2] for _, cells in page.rows if cells[1] == "type"}
        assert values == {"type": repr(f"{__name__}.{HOSTILE}")}


def test_the_plan_view_has_its_settings_explain_and_fingerprint():
    plan = (
        DataLoaderBuilder()
        .with_dataset(list(range(100)), name="train")
        .with_batch_size(8)
        .with_shuffle()
        .compile()
    )
    page = Page(plan._repr_html_())
    assert page.headers == ["section", "field", "value"]
    assert page.text("loaderkit-explain") == explained(plan.explain())
    assert_each_fact_once(plan._repr_html_(), plan.fingerprint)
    shown = {}
    section = ""
    for attrs, (name, field, value) in page.rows:
        section = name or section  # a section is named on its first row only
        shown[f"{section}.{field}"] = (value, attrs.get("title") == "default")
    assert shown["dataset.binding"] == ("'train'", False)
    assert shown["batch.batch_size"] == ("8", False)
    assert shown["order.shuffle"] == ("True", False)
    assert shown["order.seed"] == ("0", True)  # dimmed: the default
    assert shown["workers.num_workers"] == ("0", True)
    assert_monospace(page)
    assert len(page.fonts) == 2 + len(page.rows)  # title, report and every value
    reseeded = Page(plan.to_builder().with_seed(7).compile()._repr_html_())
    assert any(cells[1:] == ["seed", "7"] and not attrs for attrs, cells in reseeded.rows)


def test_a_builder_that_does_not_compile_shows_every_problem():
    builder = DataLoaderBuilder().with_batch_size(4).with_workers(0, prefetch_factor=2)
    page = Page(builder._repr_html_())
    assert page.text("loaderkit-chain") == chain(builder)
    problems = page.text("loaderkit-problems")
    assert "dataset: no dataset" in problems
    assert "workers.prefetch_factor" in problems
    assert "does not compile yet: 2 problems" in page.codes[0]
    assert page.rows == []
    assert_monospace(page)
    assert [tag for tag, _ in page.fonts] == ["code", "pre", "pre"]  # title, chain, problems


@given(builders())
def test_every_builder_shows_its_plan_or_its_problems(builder):
    page = Page(builder._repr_html_())
    assert page.text("loaderkit-chain") == chain(builder)
    try:
        plan = builder.compile()
    except PlanError as exc:
        assert page.text("loaderkit-problems") == str(exc)
        assert page.rows == []
        return
    assert page.text("loaderkit-explain") == explained(plan.explain())
    assert_each_fact_once(builder._repr_html_(), plan.fingerprint)
    assert_monospace(page)
    paths = [p for p in flatten(plan.to_dict()) if p != "schema_version"]
    assert len(page.rows) == len(paths) == len(settings_rows(plan))
    dimmed = [attrs.get("title") == "default" for attrs, _ in page.rows]
    assert dimmed == [row[3] for row in settings_rows(plan)]
    assert not any(d for d, p in zip(dimmed, paths, strict=True) if p.startswith("dataset."))
