"""The test stack's wheelhouse: it lives in src/moesweep/sim/wheelhouse.py (`moesweep sim up` serves it for the
simulated hosts); the tests and `make demo` import it from here."""

from moesweep.sim.wheelhouse import build, cache_root, main, serve, write_simple_index  # noqa: F401

if __name__ == "__main__":
    import sys

    sys.exit(main())
