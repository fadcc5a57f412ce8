"""The goal verdicts that ``make bench`` writes under the GAM tables of the Performance page."""

from __future__ import annotations

import pytest
from _benchmarks import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_gam_fused")


def test_rate_verdict_uses_the_lowest_ratio_and_the_70_percent_line(bench):
    text = bench.verdict_rate({"fused": [0.77, 0.70], "recompute": [0.80, 0.699], "explicit": []})
    assert "fused path met (lowest 70%)" in text
    assert "recompute path not met (lowest 70%)" in text  # 69.9% rounds to 70% but misses
    assert "explicit" not in text  # no measurement at n >= 1024, no verdict


def test_memory_verdict_judges_each_fused_path_at_n_4096(bench):
    peaks = {
        1024: {"mha": 5.0, "fused": 14.0, "recompute": 8.0, "explicit": 100.0},
        4096: {"mha": 18.0, "fused": 36.1, "recompute": 36.0},
    }
    text = bench.verdict_memory(peaks)
    assert "fused not met (2.0×)" in text  # 36.1 / 18 = 2.006: over the line
    assert "recompute met (2.0×)" in text  # exactly 2×
    assert "mha ×3.6 from n = 1024 to 4096 (n ×4)" in text
    assert "explicit" not in text  # measured at one n only: no growth to report


def test_explicit_cap_counts_five_n_by_n_tensors_per_head_and_brain(bench):
    n = 1024
    assert bench.explicit_bytes(n) == 5 * bench.H * bench.N_BRAINS * n * n * 4


def test_memory_verdict_judges_at_4096_and_8192_by_the_worse_of_the_two(bench):
    peaks = {
        1024: {"mha": 5.0, "fused": 14.0, "recompute": 8.0, "tiled": 9.0},
        4096: {"mha": 18.0, "fused": 50.0, "recompute": 25.0, "tiled": 30.0},
        8192: {"mha": 34.0, "fused": 95.0, "recompute": 46.0, "tiled": 70.0},
    }
    text = bench.verdict_memory(peaks)
    assert "at n = 4096 and 8192" in text
    assert "tiled not met (1.7×, 2.1×)" in text  # met at 4096, missed at 8192: not met
    assert "recompute met (1.4×, 1.4×)" in text
    assert "tiled ×7.8 from n = 1024 to 8192 (n ×8)" in text
