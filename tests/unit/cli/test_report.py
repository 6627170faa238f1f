"""``moesweep report``: the files it writes, the SIMULATED labels, and clear exit-2 errors for bad input, on the
recorded sweeps of tests/fixtures/results/. No browser here (tests/integration/test_report_browser.py opens the
page)."""

from __future__ import annotations

import base64
import re
import shutil
import stat
from html.parser import HTMLParser

import pytest
from helpers.paths import FIXTURES

from moesweep import report
from moesweep.cli import main

SIM = FIXTURES / "results" / "sim-rtx6000-0.5.9"
MEASURED = FIXTURES / "results" / "gb200-minimax-m2.7"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.rows, self.links, self.scripts = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        elif tag == "tr" and "point" in (a.get("class") or "").split():
            self.rows.append(a)
        elif tag in ("link", "script") and (a.get("src") or a.get("href")):
            self.links.append(a)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "out"
    rc = main(["report", str(SIM), str(MEASURED / "points.jsonl"), "--out", str(out)])
    assert rc == 0
    return out


def _page(out):
    page = Page()
    page.feed((out / "report.html").read_text())
    return page


def test_writes_markdown_html_and_one_png_per_plot(both, capsys):
    plots = sorted(p.name for p in (both / "plots").iterdir())
    assert plots == sorted(["measured-throughput.png", "measured-pareto.png", "simulated-throughput.png",
                            "simulated-latency.png", "simulated-pareto.png", "simulated-startup.png",
                            "simulated-gpu.png"])
    for p in (both / "plots").iterdir():
        assert p.read_bytes().startswith(PNG_MAGIC)
    md = (both / "report.md").read_text()
    for name in re.findall(r"\]\(plots/([^)]+)\)", md):
        assert (both / "plots" / name).is_file()
    assert len(re.findall(r"\]\(plots/", md)) == len(plots)
    # what the measured sweep's source does not give is said, not drawn
    assert "Not drawn: Latency against throughput (measured) (no ok level has TTFT / ITL figures)." in md


def test_files_are_private_like_the_results(both):
    assert stat.S_IMODE((both).stat().st_mode) == 0o700
    assert stat.S_IMODE((both / "plots").stat().st_mode) == 0o700
    for p in [both / "report.md", both / "report.html", *(both / "plots").iterdir()]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_html_is_self_contained_with_every_plot_embedded(both):
    page = _page(both)
    assert page.links == []  # no external script or stylesheet
    html = (both / "report.html").read_text()
    assert not re.search(r"""(src|href)=["'](https?:|//|file:)""", html.replace('href="https://github.com', ""))
    assert len(page.imgs) == len(list((both / "plots").iterdir()))
    for img in page.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        png = base64.b64decode(img["src"].split(",", 1)[1])
        assert png == (both / "plots" / img["data-name"]).read_bytes()
    assert 'document.body.setAttribute("data-images-ok"' in html


def test_one_table_row_per_point_and_simulated_rows_say_so(both):
    page = _page(both)
    assert len(page.rows) == 11
    assert [r["data-point"] for r in page.rows if r["data-simulated"] == "true"] == [
        "flashinfer_cutlass", "cutlass", "flashinfer_trtllm", "triton", "auto", "deep_gemm", "flashinfer_cutedsl"]
    html = (both / "report.html").read_text()
    for tr in re.findall(r'<tr class="[^"]*simulated[^"]*".*?</tr>', html):
        assert '<td class="data">SIMULATED</td>' in tr
    for tr in re.findall(r'<tr class="point (?:passed|fail)" .*?</tr>', html):
        assert '<td class="data">measured</td>' in tr


def test_every_simulated_plot_title_and_heading_says_simulated(both):
    page = _page(both)
    for img in page.imgs:
        assert img["alt"].startswith("SIMULATED") == img["data-name"].startswith("simulated-"), img["alt"]
        if img["data-name"].startswith("measured-"):
            assert img["alt"].endswith("(measured)")
    md = (both / "report.md").read_text()
    assert md.startswith("# moesweep report: sim-rtx6000-0.5.9, gb200-minimax-m2.7 (measured and SIMULATED "
                         "points, kept apart)\n")
    for heading in re.findall(r"^### (.+)$", md, re.M):
        if "sim-h1" in heading:
            assert "(SIMULATED)" in heading


def test_failures_quote_their_decisive_lines_and_sources(both):
    md = (both / "report.md").read_text()
    failures = md.split("## Failures")[1].split("## Caveats")[0]
    assert "### sim-h1 / triton (SIMULATED): crashed" in failures
    assert ("- decisive line: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: self.server_args.mem_fraction_static=0.92") in failures
    assert "- source: https://github.com/sgl-project/sglang/blob/v0.5.9/" in failures
    assert "### gb200-01 / flashinfer_mxfp4: refused" in failures
    assert "Scheduler hit an exception: Traceback (most recent call last):" in failures
    assert "## Caveats from the preflight" in md and "s9-flashinfer-cutlass-sm120-compute-120a" in md
    assert "| sim-rtx6000-0.5.9 | sim-h1 | SIMULATED | best | flashinfer_cutlass | passed |" in md


def test_a_simulated_sweep_alone_is_simulated_in_its_title(tmp_path, capsys):
    rc = main(["report", str(SIM), "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0
    assert (tmp_path / "r" / "report.md").read_text().startswith("# moesweep report: sim-rtx6000-0.5.9 (SIMULATED)\n")
    assert "<h1>moesweep report: sim-rtx6000-0.5.9 (SIMULATED)</h1>" in (tmp_path / "r" / "report.html").read_text()
    assert all(i["alt"].startswith("SIMULATED \u2014 ") for i in _page(tmp_path / "r").imgs)
    assert "== SIMULATED hosts" in out and "Measured" not in out  # the printed table
    assert out.rstrip().endswith("report.html")


def test_default_out_dir_and_a_bare_sweep_id(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    shutil.copytree(SIM, results / SIM.name)
    monkeypatch.chdir(tmp_path)
    assert main(["report", SIM.name, "--reference-concurrency", "4"]) == 0
    assert (results / SIM.name / "report" / "report.html").is_file()
    assert "Reference concurrency: c4" in (results / SIM.name / "report" / "report.md").read_text()
    shutil.copytree(MEASURED, results / MEASURED.name)
    assert main(["report", "results/" + SIM.name, "results/" + MEASURED.name]) == 0
    assert (results / f"report-{SIM.name}+{MEASURED.name}" / "report.html").is_file()


def _bad(capsys, argv):
    rc = main(["report", *argv])
    captured = capsys.readouterr()
    assert rc == 2, captured
    assert "Traceback" not in captured.err and captured.out == ""
    assert captured.err.startswith("moesweep report: ") and captured.err.count("\n") == 1
    return captured.err


def test_bad_input_is_a_clear_exit_2_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    err = _bad(capsys, [str(tmp_path), "--out", str(out)])
    assert "holds no points.jsonl: it is not a sweep's results directory" in err
    err = _bad(capsys, [str(tmp_path / "missing"), "--out", str(out)])
    assert "does not exist" in err
    binary = tmp_path / "bin"
    binary.mkdir()
    (binary / "points.jsonl").write_bytes(b"\x00\x01\x02 not text\n")
    assert "is not a text file" in _bad(capsys, [str(binary), "--out", str(out)])
    torn_only = tmp_path / "torn"
    torn_only.mkdir()
    (torn_only / "points.jsonl").write_text((SIM / "points.jsonl").read_text().splitlines()[0][:500])
    assert "holds no point record yet" in _bad(capsys, [str(torn_only), "--out", str(out)])
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert f"--out {afile} is a file, not a directory" in _bad(capsys, [str(SIM), "--out", str(afile)])
    assert "is a file, so the directory cannot be created" in _bad(capsys, [str(SIM), "--out", str(afile / "sub")])
    err = _bad(capsys, [str(SIM), "--reference-concurrency", "64", "--out", str(out)])
    assert "--reference-concurrency 64: no point ran that level; the sweeps ran c1, c4, c16" in err
    assert "give a positive" in _bad(capsys, [str(SIM), "--reference-concurrency", "0", "--out", str(out)])
    assert not out.exists()


def test_unwritable_output_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report.os, "access", lambda *_a: False)
    assert "is not writable" in _bad(capsys, [str(SIM), "--out", str(tmp_path / "o")])


def test_no_matplotlib_is_exit_3_naming_the_fix(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    rc = main(["report", str(SIM), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 3 and "matplotlib is not installed" in err and "make venv" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = capsys.readouterr().out
    assert "Exit status: 0 the report was written; 2 bad input" in text


def test_pareto_frontier_is_vllms():
    # vllm/benchmarks/sweep/plot_pareto.py _pareto_frontier: points no other beats on both axes
    pairs = [(10.0, 1.0), (8.0, 3.0), (8.0, 2.0), (5.0, 2.5), (2.0, 6.0), (1.0, 5.0)]
    assert report.pareto_frontier(pairs) == [(2.0, 6.0), (8.0, 3.0), (10.0, 1.0)]


def test_the_interconnect_plot_and_column_from_a_recorded_measurement(tmp_path, capsys):
    """A sweep with an all-reduce measurement beside it (interconnect.jsonl, the simulator's VM profile read by the
    module's parser): the plot is drawn with the decode sizes marked, and the table has the all-reduce column."""
    import json

    from helpers.allreduce_sim import write_measurement

    sweep = tmp_path / "sim"
    shutil.copytree(SIM, sweep)
    host = json.loads((sweep / "points.jsonl").read_text().splitlines()[0])["host"]
    rec = write_measurement(sweep, host, tmp_path)
    assert main(["report", str(sweep), "--out", str(tmp_path / "out")]) == 0
    png = tmp_path / "out" / "plots" / "simulated-interconnect.png"
    assert png.read_bytes().startswith(PNG_MAGIC)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "plots/simulated-interconnect.png" in md and "all-reduce % of ITL" in md
    points = report.load_sweeps([str(sweep)])[0][1]
    assert report.decode_sizes(rec, points) == {1: 12288, 4: 49152, 16: 196608}
    assert report.load_interconnect([str(sweep)]) == [rec]
def test_intervals_draw_error_bars_and_the_table_says_ties(tmp_path, capsys, monkeypatch):
    """Levels with a steady-state interval: an error bar per level on the throughput plot, the interval and the
    requests in the table, the tie rule in the definitions."""
    import json

    import matplotlib.axes

    lines = (SIM / "points.jsonl").read_text().splitlines()
    out_lines = []
    for line in lines:
        rec = json.loads(line)
        for lv in (rec.get("benchmark") or {}).get("levels") or []:
            value = (lv.get("figures") or {}).get("output_throughput")
            if lv.get("ok") and value:
                lv["stats"] = {"steady_output_throughput": {"value": value * 1.01, "low": value, "high": value * 1.02,
                                                            "half_width": value * 0.01, "half_width_rel": 0.0099,
                                                            "requests": 40},
                               "precision_target": 0.02}
        out_lines.append(json.dumps(rec))
    src = tmp_path / "sweep"
    src.mkdir()
    (src / "points.jsonl").write_text("\n".join(out_lines) + "\n")
    bars = []
    real = matplotlib.axes.Axes.errorbar
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", lambda self, *a, **k: bars.append(a) or real(self, *a, **k))
    assert main(["report", str(src), "--out", str(tmp_path / "out")]) == 0
    assert bars  # one per ok level with an interval
    md = (tmp_path / "out" / "report.md").read_text()
    assert "95 % CI, requests" in md and "40 req" in md and "Ties: " in md and "steady state, 95 % interval" not in md
def test_host_checks_table_lists_each_hosts_checks_once_per_sweep():
    records = report.load_sweeps([SIM])[0][1]
    assert report.host_checks_table(records) == []  # recorded before the host checks existed
    points = [r for r in records if r.get("kind") == "point"]
    check = {"name": "shm", "verdict": "warn", "evidence": "/dev/shm is 64 MiB", "fix": "enlarge /dev/shm",
             "source": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"}
    for r in points:
        r["facts"] = dict(r.get("facts") or {}, host_checks=[check])
    rows = report.host_checks_table(records)
    hosts = {(r.get("sweep_id"), r.get("host")) for r in points}
    assert len(rows) == len(hosts) and rows[0][2:] == ("shm", "warn", "/dev/shm is 64 MiB", "enlarge /dev/shm")


def test_the_transport_nccl_reported_is_a_table_with_its_line_beside_the_latency(tmp_path):
    """A record whose measurement holds NCCL's own account (interconnect.transport, read from the simulated VM's NCCL
    lines): one row per transport naming the pairs, what it means, the all-reduce time at the decode size and
    NCCL's line; the markdown has the section."""
    import json
    import os
    import subprocess
    import sys

    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect, nccl_log
    from helpers.paths import REPO

    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"gpu_model": "rtx-pro-6000", "gpu_count": 8}))
    env = dict(os.environ, MOESWEEP_SIM_PROFILE=str(prof), MOESWEEP_SIM_TIME_SCALE="0", NCCL_DEBUG="INFO")
    out = subprocess.run([sys.executable, str(REPO / "simulator" / "bin" / "allreduce-perf-sim"), "--ngpus", "8",
                          "--max-bytes", "8192"], capture_output=True, text=True, env=env, check=True).stdout
    transport = nccl_log.record(nccl_log.read("\n".join(interconnect.split_output(out)[1])))
    records = report.load_sweeps([SIM])[0][1]
    points = [r for r in records if r.get("kind") == "point"]
    for r in points:
        r["interconnect"] = {"key": "k", "environment_text": "(NCCL defaults)", "transport": transport}
        r["diagnosis"] = dict(r.get("diagnosis") or {}, interconnect={"latency_us": 43.2, "message_bytes": 98304})
    rows = report.transport_table(records)
    assert rows and rows[0][4] == "SHM" and rows[0][5].startswith("GPU0 -> GPU1, GPU1 -> GPU0, GPU1 -> GPU2")
    assert "(15 pairs)" in rows[0][5] and "every all-reduce goes through host memory" in rows[0][6]
    assert rows[0][7] == "43.2 us at 96 KiB" and rows[0][8].endswith("NCCL INFO Channel 00 : 0[0] -> 1[1] via "
                                                                       "SHM/direct/direct")
    md = report.render_markdown(records, [], [], None)
    assert "## Interconnect, as NCCL reported it" in md and "via SHM/direct/direct" in md


def test_the_report_shows_what_sglangs_own_argument_handling_answered():
    dry_ok = {"verdict": "accepted", "where": "controller", "gpus": "facts", "sglang_version": "0.5.23",
              "resolved": {"attention_backend": "dsa", "moe_runner_backend": "auto", "kv_cache_dtype": "fp8_e4m3",
                           "page_size": 64}, "notices": ["Use dsa attention backend for DeepSeek DSA models."]}
    dry_no = {"verdict": "refused", "where": "host", "gpus": "real", "sglang_version": "0.5.9", "stage": "server_args",
              "error": {"type": "ValueError", "file": "sglang/srt/utils/hf_transformers_utils.py", "line": 315,
                        "message": "The checkpoint you are trying to load has model type `glm_moe_dsa` but "
                                   "Transformers does not recognize this architecture.\nYou can update..."}}
    records = [{"kind": "point", "host": "vm", "point": "auto", "status": "passed",
                "preflight": {"dry_run": dry_ok}},
               {"kind": "point", "host": "vm", "point": "triton", "status": "refused",
                "preflight": {"dry_run": dry_no}}]
    rows = report.dry_run_rows(records)
    assert rows[0] == ["vm", "auto", "0.5.23", "controller", "facts", "accepted", "dsa", "auto", "fp8_e4m3", 64,
                       "Use dsa attention backend for DeepSeek DSA models."]
    assert rows[1][5] == "refused" and rows[1][-1] == (
        "The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does not recognize this "
        "architecture. (sglang/srt/utils/hf_transformers_utils.py:315)")
    assert report.dry_run_rows([{"kind": "point", "preflight": {}}]) == []
