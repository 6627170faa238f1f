"""moesweep: sweep SGLang MoE kernel backends on GPU hosts with Ansible (see docs/api.md).

    import moesweep
    result = moesweep.sweep("inventory/mine.yml", ["flashinfer_cutlass", "triton"])
"""

from moesweep import _collection  # noqa: F401  (makes the in-repo collection importable by FQCN)

__version__ = "0.1.0"

_API = ("sweep", "iter_sweep", "load_results", "gather_facts", "provision", "check", "SweepResult", "PointResult",
        "RestoreResult", "Level", "Event", "MoesweepError")
__all__ = list(_API) + ["__version__"]


def __getattr__(name):
    # The API is imported on first use, so `moesweep --help` and the commands that do not need it stay fast.
    if name in _API:
        from moesweep import api

        return getattr(api, name)
    raise AttributeError(f"module 'moesweep' has no attribute {name!r}")
