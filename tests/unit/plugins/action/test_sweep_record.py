"""sweep_record's interconnect step: whether the host's all-reduce was measured under the point's NCCL environment
(this run's measurements, then the sweep's interconnect.jsonl, unless the sweep reruns), and the record of a new
measurement the callback appends."""

from __future__ import annotations

import json
from unittest import mock

from ansible_collections.moesweep.sweep.plugins.action import sweep_record as action
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records

LAUNCH = {"flags": {"tp-size": 8}, "environment": {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8"}}


def run(tmp_path, rerun=False, **args):
    sweep = {"sweep_id": "s1", "dir": str(tmp_path / "s1"), "points": ["a"], "rerun": rerun}
    task = mock.MagicMock()
    task.args = dict(state="interconnect", sweep=sweep, point="a", **args)
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(action, "moesweep_version", return_value={}):
        return plugin.run(task_vars={"inventory_hostname": "h1"})


def test_not_measured_yet(tmp_path):
    res = run(tmp_path, launch=LAUNCH)
    assert res["found"] is False and res["ranks"] == 8 and res["nccl_environment"] == {"NCCL_P2P_LEVEL": "PHB"}
    assert res["msg"] == "the all-reduce over 8 GPU(s) under NCCL_P2P_LEVEL=PHB: to measure"
    assert "moesweep_event" not in res


def test_measured_earlier_in_this_run(tmp_path):
    key = run(tmp_path, launch=LAUNCH)["key"]
    res = run(tmp_path, launch=LAUNCH, measured={key: {"key": key, "ranks": 8}})
    assert res["found"] is True and res["measurement"]["key"] == key


def test_a_resumed_sweep_finds_the_recorded_measurement_unless_it_reruns(tmp_path):
    key = run(tmp_path, launch=LAUNCH)["key"]
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / records.INTERCONNECT_FILE).write_text(json.dumps(
        {"kind": "interconnect", "host": "h1", "key": key, "finished": "2026-12-06T05:00:00+00:00"}) + "\n")
    res = run(tmp_path, launch=LAUNCH)
    assert res["found"] is True and "measured on h1 (2026-12-06T05:00:00+00:00): not measured again" in res["msg"]
    assert run(tmp_path, rerun=True, launch=LAUNCH)["found"] is False
    # another NCCL environment is measured again
    other = dict(LAUNCH, environment={"NCCL_P2P_LEVEL": "SYS"})
    assert run(tmp_path, launch=other)["found"] is False


def test_a_new_measurement_becomes_a_record_for_the_callback(tmp_path):
    m = {"key": "k", "ranks": 8, "rows": [{"size": 4096, "time_us": 43.18}], "environment_text": "NCCL_P2P_LEVEL=PHB",
         "elapsed": 2.2}
    res = run(tmp_path, interconnect=m)
    assert res["moesweep_event"] == "interconnect" and res["moesweep_record"]["kind"] == "interconnect"
    assert res["moesweep_record"]["host"] == "h1" and res["measurement"]["rows"] == m["rows"]
    assert res["msg"] == "h1: all-reduce over 8 GPU(s) under NCCL_P2P_LEVEL=PHB measured in 2.2 s"
