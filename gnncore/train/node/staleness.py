r"""SANCUS staleness bounds: when a rank's embedding rows must be sent again.

SANCUS (ALGORITHMS.md §8; Liang et al., §4.3.5) lets a rank skip sending the
embedding rows a peer already holds from an earlier epoch while they are not
*too stale*. Staleness is tracked per layer and per (owner, peer) pair, since
each owner sends every peer only the rows it reads (its halo), not the whole
block:

* ``always``: send every epoch (the always-broadcast baseline, CAGNET).
* ``epoch-fixed`` (Definition 1, Algorithm 4): the owner sends when the peer's
  copy would be more than ``bound`` epochs old (``bound = 1``: every other epoch).
* ``epoch-adaptive`` (Definition 2, Algorithm 5): the same age bound, checked by
  the *receiver* on its own cached versions; it asks the owners of copies
  older than ``bound`` epochs to send. Every rank of this implementation runs
  every epoch in lock-step, so each pair's schedule is that of
  ``epoch-fixed`` with the same bound (the two part only where ranks drift
  apart, which lock-step training never does); it is here to be measured
  beside the others, as in the paper.
* ``variation`` (Definition 3, Algorithm 6): the owner sends when the rows
  changed by more than ``bound`` since it last sent them, relative to their
  norm: ``‖H - H̃‖_F > bound · ‖H̃‖_F``.

A pair with nothing cached (the first epoch, a resumed run) always sends.
These functions are pure: :mod:`gnncore.distributed.sancus` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: The staleness policies of ``--staleness``.
StalenessPolicy = Literal["always", "epoch-fixed", "epoch-adaptive", "variation"]
STALENESS_POLICIES: tuple[str, ...] = get_args(StalenessPolicy)
#: The bound each policy takes when ``staleness_bound`` is 0.
DEFAULT_BOUNDS: dict[str, float] = {
    "always": 0.0,
    "epoch-fixed": 1.0,
    "epoch-adaptive": 1.0,
    "variation": 0.05,
}
#: ``last`` epoch of a pair that has never exchanged rows.
NEVER = 0


@dataclass(frozen=True)
class Staleness:
    """A staleness policy and its bound (see the module docstring).

    Attributes:
        policy (str): One of :data:`STALENESS_POLICIES`.
        bound (float): Epochs a copy may lag (``epoch-*``, a whole number >= 1),
            or the relative change tolerated (``variation``, > 0); unused by
            ``always``.
    """

    policy: str
    bound: float

    @classmethod
    def of(cls, policy: str, bound: float = 0.0) -> Staleness:
        """The policy with ``bound``, or its :data:`DEFAULT_BOUNDS` entry when
        ``bound`` is 0.

        Raises:
            ValueError: An unknown policy, or a bound it cannot take.
        """
        if policy not in STALENESS_POLICIES:
            raise ValueError(f"staleness {policy!r}: choose one of {STALENESS_POLICIES}")
        bound = float(bound) or DEFAULT_BOUNDS[policy]
        if policy.startswith("epoch-") and (bound < 1 or bound != int(bound)):
            raise ValueError(f"staleness {policy}: the bound is whole epochs >= 1, got {bound}")
        if policy == "variation" and not bound > 0:
            raise ValueError(f"staleness variation: the bound must be > 0, got {bound}")
        return cls(policy, bound)

    @property
    def receiver_driven(self) -> bool:
        """Whether receivers ask for rows (``epoch-adaptive``) rather than owners
        deciding to send them."""
        return self.policy == "epoch-adaptive"

    @property
    def needs_change(self) -> bool:
        """Whether the owner's decision reads the rows' relative change."""
        return self.policy == "variation"

    def owner_sends(self, epoch: int, last_sent: int, change: float | None = None) -> bool:
        """Whether an owner sends a peer its rows in ``epoch`` (1-based), having
        last sent them in epoch ``last_sent`` (:data:`NEVER`: not yet); ``change``
        is ``‖H - H̃‖_F / ‖H̃‖_F`` (``variation`` only)."""
        if self.receiver_driven:
            raise ValueError("epoch-adaptive is decided by the receivers (receiver_asks)")
        if last_sent == NEVER or self.policy == "always":
            return True
        if self.policy == "epoch-fixed":
            return epoch - last_sent > self.bound
        if change is None:
            raise ValueError("staleness variation needs the rows' relative change")
        return change > self.bound

    def receiver_asks(self, epoch: int, last_received: int) -> bool:
        """``epoch-adaptive``: whether a receiver whose copy dates from epoch
        ``last_received`` (:data:`NEVER`: none) asks its owner for fresh rows."""
        return last_received == NEVER or epoch - last_received > self.bound


def relative_change(squared_diff: float, squared_norm: float) -> float:
    """``sqrt(squared_diff / squared_norm)``; a change from all-zero rows is
    infinite unless the rows are still zero."""
    if squared_norm > 0:
        return float((squared_diff / squared_norm) ** 0.5)
    return 0.0 if squared_diff == 0 else float("inf")


__all__ = [
    "DEFAULT_BOUNDS",
    "NEVER",
    "STALENESS_POLICIES",
    "Staleness",
    "StalenessPolicy",
    "relative_change",
]
