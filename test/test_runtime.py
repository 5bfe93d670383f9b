"""shape_sensing.runtime: the allocator setting used by the real-time estimator loops."""

from __future__ import annotations

import platform
import sys

import numpy as np
import pytest

from shape_sensing.runtime import retain_heap

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_retain_heap_is_accepted_by_glibc_and_leaves_results_alone() -> None:
    x = np.random.default_rng(0).standard_normal((300, 300))
    before = x @ x.T
    assert retain_heap() is True
    assert retain_heap(top_pad=1 << 20, mmap_threshold=1 << 20) is True  # may be called again
    assert np.array_equal(x @ x.T, before)


def test_retain_heap_refuses_negative_sizes() -> None:
    with pytest.raises(ValueError, match="retain_heap sizes must be >= 0, got top_pad=-1"):
        retain_heap(top_pad=-1)
    with pytest.raises(ValueError, match="mmap_threshold=-5"):
        retain_heap(mmap_threshold=-5)
