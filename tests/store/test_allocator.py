"""glibc's mmap threshold (`store.allocator.fix_mmap_threshold`): fixed when a Store opens, so
LanceDB's freed multi-MB buffers go back to the system instead of staying in its arenas."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from retrieval import limits
from retrieval.store.allocator import M_MMAP_THRESHOLD, fix_mmap_threshold, process_glibc

REPO = Path(__file__).resolve().parents[2]


class RecordingLibc:
    def __init__(self, answer: int = 1):
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.answer


def test_the_threshold_is_set_unless_zero_or_chosen_for_glibc_already():
    libc = RecordingLibc()
    assert fix_mmap_threshold(1 << 20, {}, libc) is True
    assert libc.calls == [(M_MMAP_THRESHOLD, 1 << 20)] and M_MMAP_THRESHOLD == -3
    assert fix_mmap_threshold(0, {}, libc) is False  # 0: glibc's default stays
    assert fix_mmap_threshold(1 << 20, {"MALLOC_MMAP_THRESHOLD_": "65536"}, libc) is False  # the user's own
    assert len(libc.calls) == 1
    assert fix_mmap_threshold(64 << 20, {}, RecordingLibc(answer=0)) is False  # glibc refused it
    assert limits.MALLOC_MMAP_THRESHOLD == 1 << 20
    assert process_glibc() is not None  # Debian and the CI image run glibc


# In a fresh process: a 4 MiB block is mapped and freed (glibc's default then raises its threshold
# to 4 MiB), and a 2 MiB block is allocated. With the threshold fixed at 1 MiB the 2 MiB block is
# a mapping of its own (mapped bytes grow by it), else it comes from the heap (they do not).
PROBE = textwrap.dedent("""
    import ctypes, sys
    from retrieval.store import Store

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                   "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    Store(sys.argv[1])
    block = libc.malloc(4 << 20)
    libc.free(block)
    mapped = libc.mallinfo2().hblkhd
    block = libc.malloc(2 << 20)
    print(libc.mallinfo2().hblkhd - mapped)
    libc.free(block)
""")


def mapped_growth(tmp_path: Path, threshold: str) -> int:
    env = {**os.environ, "WORKBENCH_MALLOC_MMAP_THRESHOLD": threshold}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / f"db{threshold}")], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1])


def test_a_store_fixes_the_threshold_for_its_process(tmp_path):
    assert mapped_growth(tmp_path, str(1 << 20)) >= 2 << 20  # fixed: the 2 MiB block is mapped
    assert mapped_growth(tmp_path, "0") == 0  # glibc's default: it rose to 4 MiB, the block is in the heap
