"""What a failed launch reports: :class:`RankFailed`, naming the rank that
caused it (:func:`blame`).

When one rank dies, its peers' collectives fail a moment later ("connection
reset by peer"), so several ranks fail together; :func:`blame` names a rank
that died (a signal, or an exit without reporting) before one that raised an
error of its own, before one whose error was the loss of a peer
(:func:`is_peer_loss`).
"""

from __future__ import annotations

import contextlib
import signal
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from gnncore.distributed.join import JoinRefused
from gnncore.errors import GnnCoreError

#: Messages of a collective that failed because a peer went away or hung.
_PEER_LOSS_MARKERS = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "timed out",
    "timeout",
    "connection refused",
    "socket closed",
    "end of file",
)


class RankFailed(GnnCoreError, RuntimeError):
    """A rank raised, died or did not finish in time; the message names it
    (``rank`` holds its number, ``None`` when no rank of this machine could be
    blamed)."""

    def __init__(self, message: str, rank: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank


def is_peer_loss(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because a peer died or hung
    (gloo's "connection reset/closed by peer", a timeout), rather than an
    error of the rank's own."""
    # lazy: torch loads in seconds; a launcher that only blames needs none of it
    import torch.distributed as dist

    if isinstance(exc, dist.DistBackendError):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _PEER_LOSS_MARKERS)


@dataclass
class RankStatus:
    """What the launcher knows about one rank when the run failed."""

    rank: int
    exitcode: int | None = None  # None: still running (or on another machine)
    error: str | None = None  # the traceback the rank reported
    peer_loss: bool = False
    finished: bool = False


def describe(status: RankStatus, world: int) -> str:
    if status.error is not None:
        return f"rank {status.rank} of {world} failed:\n{status.error}"
    code = status.exitcode
    text = f"rank {status.rank} of {world} exited with code {code} without a result"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            text += f" (killed by {signal.Signals(-code).name})"
    return text


def blame(statuses: Sequence[RankStatus], world: int, remote: Sequence[int] = ()) -> RankFailed:
    """The :class:`RankFailed` for a failed run: it names a rank that died
    without reporting, else one that raised an error of its own, else one whose
    peers were lost (lowest rank first within each kind); the others follow.
    ``remote``: ranks on other machines, named when only peer losses are seen
    here."""
    died = [s for s in statuses if s.exitcode not in (None, 0) and s.error is None]
    # SIGTERM last: the launchers stop the surviving ranks with it.
    died.sort(key=lambda s: s.exitcode == -signal.SIGTERM)
    own = [s for s in statuses if s.error is not None and not s.peer_loss]
    lost = [s for s in statuses if s.error is not None and s.peer_loss]
    ordered = died + own + lost
    if not ordered:
        return RankFailed(f"the run of {world} ranks failed without a rank reporting")
    culprit = ordered[0]
    message = describe(culprit, world)
    if culprit in lost and remote:
        message = (
            f"no rank on this machine died first: rank {culprit.rank} lost its peers; "
            f"ranks {list(remote)} run on other machines (see their launcher's error)\n" + message
        )
    others = [s for s in ordered[1:]]
    if others:
        notes = []
        for s in others:
            kind = "lost its peers" if s.peer_loss else describe(s, world).split("\n")[0]
            if not s.peer_loss and s.error is not None and "\n" not in s.error.strip():
                kind = s.error.strip()  # a one-line report (a refused join): all of it
            notes.append(f"rank {s.rank}: {kind}")
        message += "\nthen: " + "; ".join(notes)
    return RankFailed(message, culprit.rank)


def report(exc: BaseException) -> str:
    """What a failed rank reports: the one line of a refused join, else the
    traceback."""
    return str(exc) if isinstance(exc, JoinRefused) else traceback.format_exc()


def has_failed(status: RankStatus) -> bool:
    """Reported an error, or exited without a result (a result may still be in
    the pipe: :func:`~gnncore.distributed.launch.spawn.spawn_local` drains it
    before blaming)."""
    return status.error is not None or (
        not status.finished and status.exitcode is not None and status.exitcode != 0
    )


__all__ = ["RankFailed", "RankStatus", "blame", "has_failed", "is_peer_loss", "report"]
