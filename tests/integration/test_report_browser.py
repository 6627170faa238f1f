"""The report's HTML page in a real headless browser (Debian's chromium, `make browser-deps`): every embedded
plot decodes (the page's own load-time check, read back with --dump-dom), the table has one row per point, and
a screenshot of the whole page renders. A page with a broken image must fail the same check."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.paths import FIXTURES

from moesweep.report import build_report

pytestmark = pytest.mark.slow

SIM = FIXTURES / "results" / "sim-rtx6000-0.5.9"
MEASURED = FIXTURES / "results" / "gb200-minimax-m2.7"
CHROMIUM = shutil.which("chromium")
BODY_RE = re.compile(r"<body([^>]*)>")


def chromium(profile: Path, *args: str) -> str:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed: run `make browser-deps` (Debian's chromium package)")
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_attributes(dom: str) -> dict:
    match = BODY_RE.search(dom)
    assert match, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = build_report([SIM, MEASURED], out)
    return result


def test_every_plot_loads_and_the_table_has_one_row_per_point(page, tmp_path):
    dom = chromium(tmp_path / "profile", "--dump-dom", page["html"].as_uri())
    body = body_attributes(dom)
    assert body["data-images"] == str(len(page["plots"])) == "7"
    assert body["data-images-loaded"] == "7" and body["data-images-broken"] == "0"
    assert body["data-images-ok"] == "true"
    rows = re.findall(r'<tr class="point[^"]*"[^>]*data-point="([^"]+)"', dom)
    assert len(rows) == len(page["rows"]) == 11
    assert sorted(rows) == sorted(r["point"] for r in page["rows"])


def test_a_broken_image_is_caught_by_the_same_check(page, tmp_path):
    html = page["html"].read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1))
    body = body_attributes(chromium(tmp_path / "profile", "--dump-dom", broken.as_uri()))
    assert body["data-images-broken"] == "1" and body["data-images-ok"] == "false"


def test_the_whole_page_renders_in_a_screenshot(page, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", "--hide-scrollbars", "--window-size=1400,9000", f"--screenshot={shot}",
             page["html"].as_uri())
    with Image.open(shot) as im:
        assert im.size == (1400, 9000)
        rgb = im.convert("RGB")
        # the page is drawn (text, tables, plots), not a blank or error page
        top = rgb.crop((0, 0, 1400, 1200))
        assert len(top.getcolors(maxcolors=1 << 20) or []) > 200
        # the SIMULATED banner (its background #fff1f1) is at the top of the page
        assert any(color == (255, 241, 241) for _n, color in top.getcolors(maxcolors=1 << 20))


def test_the_interconnect_plot_loads_in_the_page(tmp_path):
    """A sweep with its all-reduce measurement (the simulated VM profile): the interconnect plot is embedded and
    decodes in the browser like every other plot."""
    import json

    from helpers.allreduce_sim import write_measurement

    sweep = tmp_path / "sim"
    shutil.copytree(SIM, sweep)
    write_measurement(sweep, json.loads((sweep / "points.jsonl").read_text().splitlines()[0])["host"], tmp_path)
    result = build_report([sweep], tmp_path / "out")
    names = [p.name for p in result["plots"]]
    assert "simulated-interconnect.png" in names
    body = body_attributes(chromium(tmp_path / "profile", "--dump-dom", result["html"].as_uri()))
    assert body["data-images"] == body["data-images-loaded"] == str(len(names))
    assert body["data-images-broken"] == "0" and body["data-images-ok"] == "true"
