"""The reference-scale profile: its start and its c64 throughput are the reference deployment's, and its
time-scaled environment runs the token model's rates 1 / time_scale times as fast."""

import pytest
from moesweep_sim import reference_profile as ref
from moesweep_sim import tokenmodel


def test_start_and_c64_throughput_are_the_reference_deployments():
    assert sum(ref.PHASES_S.values()) == pytest.approx(210.0)
    assert ref.expected("flashinfer_cutlass", 64) == pytest.approx(225.0, rel=1e-9)
    curve = [ref.expected("auto", c) for c in (1, 8, 32, 64)]
    assert curve == sorted(curve)  # throughput rises with concurrency, saturating


def test_time_scaled_environment():
    env = ref.env("triton", 0.1)
    assert float(env["MOESWEEP_SIM_PHASE_LOAD_S"]) == pytest.approx(15.0)
    base, alpha, prefill = ref.rates("triton")
    assert float(env["MOESWEEP_SIM_DECODE_RATE"]) == pytest.approx(base * 10)
    scaled = tokenmodel.expected_output_throughput(64, 1024, 1024, *ref.scaled_rates("triton", 0.1))
    assert scaled == pytest.approx(ref.expected("triton", 64) * 10)


def test_level_seconds_is_whole_cohorts():
    one = ref.level_seconds("auto", 64, 64)
    assert one == pytest.approx(64 * 1024 / ref.expected("auto", 64))
    assert ref.level_seconds("auto", 64, 320) == pytest.approx(5 * one)
    assert ref.level_seconds("auto", 4, 5) > ref.level_seconds("auto", 4, 4)


def test_time_scaled_drift_keeps_its_real_correlation_time():
    env = ref.env("triton", 0.1)
    cv, tau, seed = env["MOESWEEP_SIM_STEP_DRIFT"].split(",")
    assert float(cv) == ref.DRIFT_CV and float(tau) == pytest.approx(ref.DRIFT_TAU_S * 0.1)
    assert env == ref.env("triton", 0.1) and seed != ref.env("auto", 0.1)["MOESWEEP_SIM_STEP_DRIFT"].split(",")[2]
    assert len(ref.env("triton", 0.1, seed=None)["MOESWEEP_SIM_STEP_DRIFT"].split(",")) == 2
