"""Whether a C++ call releases the GIL, told by a thread that can only run if it does."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable


def another_thread_runs_during(call: Callable[[], object], tries: int) -> bool:
    """Whether a second Python thread made progress during any of ``tries`` calls
    of ``call()``.

    With a switch interval far longer than the test (20 s), a thread waiting for
    the GIL gets it only when the calling thread releases it: the spinning
    thread's counter can advance between ``before`` and the check only if
    ``call`` released the GIL. (A GIL-holding call of the same length, e.g.
    ``bytes.count`` on 64 MiB, leaves it still.) Several tries, because a loaded
    machine may not schedule the thread at once.
    """
    counter = [0]
    stop, started = threading.Event(), threading.Event()

    def spin() -> None:
        started.set()
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0.0001)  # hand the GIL back so the calling thread can go on

    old = sys.getswitchinterval()
    sys.setswitchinterval(20.0)
    worker = threading.Thread(target=spin, daemon=True)
    try:
        worker.start()
        started.wait()
        for _ in range(tries):
            before = counter[0]
            call()
            if counter[0] > before:
                return True
        return False
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(old)
