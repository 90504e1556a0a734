"""The notebook view in a real browser: headless Chromium lays it out without sideways overflow.

Skipped where Chromium is not installed (``apt-get install chromium``); a screenshot of the
same page is written next to the test's temporary files for a person to look at.
"""

from __future__ import annotations

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
