"""The sweep's stop file as the async waits read it: present, the wait's stop is on; absent or not given, the
arguments are passed on as they are."""

from ansible_collections.moesweep.sweep.plugins.plugin_utils import stop_file


def test_the_stop_file_turns_the_stop_on_only_when_it_exists(tmp_path):
    path = tmp_path / "stop"
    args = {"results_file": "/x", "stop_file": str(path)}
    assert stop_file.requested(args) == args and "stop" not in args
    path.write_text("")
    assert stop_file.requested(args)["stop"] is True and "stop" not in args  # a copy
    assert stop_file.requested({"stop": True})["stop"] is True
    assert stop_file.requested({"results_file": "/x"}) == {"results_file": "/x"}
