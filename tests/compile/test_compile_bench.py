"""The benchmark report (``benchmarks/bench_compiled.py``, loaded as ``sparsedyn bench`` loads it)
runs end to end (a smoke test: benchmarks are never asserted on)."""

import pytest

from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.cli import benchmark_module

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_bench_report_smoke():
    bench = benchmark_module("bench_compiled")
    text = bench.bench_report(models=("chain3",), kernels=("rnea", "minv"), batch=40, cold=False, calls=False)
    lines = [ln for ln in text.splitlines() if ln.startswith("chain3")]
    assert len(lines) == 2 and "rnea" in lines[0] and "minv" in lines[1]
    assert "differ" not in text                 # Pinocchio and MuJoCo agreed before being timed
    assert "build times" in text and "reuse" in text
