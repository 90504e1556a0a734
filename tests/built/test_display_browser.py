"""The notebook view in a real browser: headless Chromium lays it out without sideways overflow.

And in monospace under nbconvert's stylesheet (``pre { font-family: inherit }``), so that the
report's columns line up. Skipped where Chromium is not installed (``apt-get install
chromium``); a screenshot of the same page is written next to the test's temporary files for a
person to look at.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from loaderkit import DataLoaderBuilder

pytestmark = pytest.mark.timeout(120)

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")

_MEASURE = """
<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    scroll: document.documentElement.scrollWidth,
    width: window.innerWidth,
    chain: document.querySelector(".loaderkit-chain").getClientRects().length,
    lines: document.querySelector(".loaderkit-chain").textContent.split("\\n").length,
  });
  document.body.appendChild(out);
});
</script>
"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    return subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=640,2000", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )


@pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed")
def test_the_builder_view_wraps_one_call_per_line_in_chromium(tmp_path: Path) -> None:
    data = torch.utils.data.TensorDataset(torch.arange(1000))
    builder = (
        DataLoaderBuilder()
        .with_dataset(data, name="a_training_set_with_a_rather_long_name_" + "x" * 60)
        .with_batch_size(32, drop_last=True)
        .with_shuffle()
        .with_seed(1234)
        .with_workers(2, prefetch_factor=4)
        .with_distributed(world_size=2, rank=1)
    )
    page = tmp_path / "view.html"
    page.write_text(f"<html><body>{builder._repr_html_()}{_MEASURE}</body></html>")
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"'))
    assert measured["scroll"] <= measured["width"], measured  # nothing runs off to the side
    assert measured["lines"] == 7, measured  # DataLoaderBuilder() and six calls
    _chromium(f"--screenshot={tmp_path / 'view.png'}", page.as_uri())
    assert (tmp_path / "view.png").stat().st_size > 1000


_NBCONVERT_CSS = """
<style>
/* what nbconvert's HTML export does to preformatted text: the page's proportional font */
body { font-family: "Helvetica Neue", Helvetica, Arial, sans-serif; font-size: 14px; }
pre, code { font-family: inherit; }
</style>
"""

_COLUMNS = """
<script>
window.addEventListener("load", () => {
  // the width of each report line's label column ("  source      ": 14 characters)
  const widths = (pre) => {
    const node = pre.firstChild;
    const text = node.textContent;
    const out = [];
    let start = 0;
    for (const line of text.split("\\n")) {
      if (line.length > 14 && line.startsWith("  ") && line[2] !== " ") {
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, start + 14);
        out.push(range.getBoundingClientRect().width);
      }
      start += line.length + 1;
    }
    return out;
  };
  const report = document.querySelector(".loaderkit-explain");
  const control = document.querySelector("#control");
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    report: widths(report),
    control: widths(control),
    fonts: [".loaderkit-chain", ".loaderkit-explain"].map(
      (q) => getComputedStyle(document.querySelector(q)).fontFamily),
    body: getComputedStyle(document.body).fontFamily,
  });
  document.body.appendChild(out);
});
</script>
"""


@pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed")
def test_the_report_lines_up_in_monospace_under_nbconvert_css(tmp_path: Path) -> None:
    builder = (
        DataLoaderBuilder()
        .with_dataset(torch.utils.data.TensorDataset(torch.arange(100)), name="train")
        .with_batch_size(32)
        .with_shuffle()
        .with_workers(2)
    )
    markup = builder._repr_html_()
    # the control: the same report in a <pre> that takes the stylesheet's font, as before
    report = builder.compile().explain().partition("\n")[2]
    control = f'<pre id="control">{html.escape(report)}</pre>'
    page = tmp_path / "nbconvert.html"
    page.write_text(
        f"<html><head>{_NBCONVERT_CSS}</head><body>{markup}{control}{_COLUMNS}</body></html>"
    )
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    measured = json.loads(html.unescape(found.group(1)))
    assert "sans-serif" in measured["body"]
    for family in measured["fonts"]:
        assert family.endswith("monospace"), measured
    widths = measured["report"]
    assert len(widths) >= 8, measured  # source, order, batches, collator, ... fingerprint
    assert max(widths) - min(widths) < 0.5, measured  # every label column as wide: aligned
    # the measurement can tell: in the page's own font the same columns differ
    assert max(measured["control"]) - min(measured["control"]) > 1, measured
    _chromium(f"--screenshot={tmp_path / 'nbconvert.png'}", page.as_uri())
