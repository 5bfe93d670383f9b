"""Process-wide settings for estimator loops that must keep up with real time.

The continuum estimator allocates and frees arrays of 0.1-2 MB at every window
step (Jacobian blocks, the banded information matrix, its factor). With glibc's
defaults such blocks are handed back to the kernel when freed (``munmap``, heap
trimming) and page-faulted in again at the next step, which measured about a
third of a step on the 19-node ``extensible`` trial. :func:`retain_heap` asks the
C library to keep freed memory for reuse instead, the usual real-time practice
of keeping the working set resident. It changes allocation only, never results.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["M_MMAP_THRESHOLD", "M_TOP_PAD", "retain_heap"]

_log = logging.getLogger(__name__)

#: glibc ``mallopt`` parameters (``<malloc.h>``).
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3


def retain_heap(top_pad: int = 64 << 20, mmap_threshold: int = 32 << 20) -> bool:
    """Keep freed heap memory in the process (glibc ``mallopt``); ``False`` where that is not available.

    Args:
        top_pad: bytes the heap keeps beyond its top when it grows or trims (``M_TOP_PAD``).
        mmap_threshold: blocks below this come from the heap, not from their own ``mmap``
            (``M_MMAP_THRESHOLD``; glibc caps it at 32 MiB on 64-bit).

    Raises:
        ValueError: a negative size.
    """
    if top_pad < 0 or mmap_threshold < 0:
        raise ValueError(f"retain_heap sizes must be >= 0, got top_pad={top_pad}, mmap_threshold={mmap_threshold}")
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_TOP_PAD, top_pad)) and bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold))
    if not ok:
        _log.debug("mallopt refused top_pad=%d mmap_threshold=%d", top_pad, mmap_threshold)
    return ok
