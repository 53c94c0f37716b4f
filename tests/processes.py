"""Servers, daemons and ranks that tests start for real: free ports, clean stops,
and the ranks to kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import psutil

from gnncore.distributed.launch.forked import RANK_NAME


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_group(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it
    spawned: SIGTERM to its process group, SIGKILL after ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass


def rank_pids(rank: int) -> list[int]:
    """The descendants of this process that run ``rank`` of a launch (a rank
    names itself ``gnncore-rank<N>``, what ``ps`` shows)."""
    name = RANK_NAME.format(rank=rank)
    pids = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == name:
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids
