"""Slow pure-Python references of the samplers' random draws and of per-layer sampling.

:class:`KernelRng` and :func:`sample_row_reference` replay, in plain Python
integers, the generator and the uniform row sampling of
``gnncore/csrc/sampler/uniform.h`` (xoshiro256++ seeded through splitmix64,
Lemire's unbiased bounded integers, Floyd's algorithm or a partial
Fisher-Yates shuffle). :func:`sample_per_layer_reference` builds on them, so it
consumes exactly the random numbers ``_C.sample_per_layer`` (and, with
``resample=False``, ``_C.sample_neighbors`` and ``_C.sample_dense_pyg``)
consumes and agrees with it exactly for every seed. Use them on small inputs
only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnncore.testing.reference import sample_hops_reference

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """The splitmix64 finaliser (``gnncore::mix64``) on a Python int modulo 2**64."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _MASK


class KernelRng:
    """``sampling::Rng``: xoshiro256++ whose state is seeded from ``key`` via splitmix64."""

    def __init__(self, key: int) -> None:
        key &= _MASK
        self._s: list[int] = []
        for _ in range(4):
            key = (key + _GOLDEN) & _MASK
            self._s.append(mix64(key))

    def next(self) -> int:
        """The next 64-bit output."""
        s0, s1, s2, s3 = self._s
        result = (_rotl((s0 + s3) & _MASK, 23) + s0) & _MASK
        t = (s1 << 17) & _MASK
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _rotl(s3, 45)
        self._s = [s0, s1, s2, s3]
        return result

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)``, ``n > 0`` (Lemire's multiply-shift with rejection)."""
        m = self.next() * n
        low = m & _MASK
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next() * n
                low = m & _MASK
        return m >> 64


def node_rng(seed: int, hop: int, pos: int) -> KernelRng:
    """``sampling::node_rng``: the generator of frontier position ``pos`` at hop ``hop``."""
    return KernelRng(mix64((mix64((mix64(seed) + hop) & _MASK) + pos) & _MASK))


def sample_without_replacement_reference(rng: KernelRng, n: int, k: int) -> list[int]:
    """``sampling::sample_without_replacement``: ``k < n`` distinct offsets of ``[0, n)``, sorted.

    Floyd's algorithm, except for ``k > 64`` with ``n <= 4k``, where the kernel
    runs a partial Fisher-Yates shuffle (which consumes the generator differently).
    """
    out: list[int] = []
    if k > 64 and n <= 4 * k:
        scratch = list(range(n))
        for i in range(k):
            r = i + rng.below(n - i)
            scratch[i], scratch[r] = scratch[r], scratch[i]
            out.append(scratch[i])
    else:
        chosen: set[int] = set()
        for j in range(n - k, n):
            t = rng.below(j + 1)
            pick = j if t in chosen else t
            chosen.add(pick)
            out.append(pick)
    return sorted(out)


def sample_row_reference(
    seed: int, hop: int, pos: int, degree: int, fanout: int, replace: bool
) -> list[int]:
    """The row offsets that ``sampling::draw_hop`` picks for frontier position ``pos``.

    All ``degree`` offsets when ``fanout == -1`` or (without replacement)
    ``fanout >= degree``; ``fanout`` sorted uniform draws with ``replace``;
    otherwise ``fanout`` distinct sorted offsets. None for ``degree == 0``.
    """
    if degree == 0:
        return []
    if fanout < 0 or (not replace and fanout >= degree):
        return list(range(degree))
    rng = node_rng(seed, hop, pos)
    if replace:
        return sorted(rng.below(degree) for _ in range(fanout))
    return sample_without_replacement_reference(rng, degree, fanout)


def sample_per_layer_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    fanouts: Sequence[int],
    seed: int,
    replace: bool = False,
    resample: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]:
    """Per-layer (DGL / classic PyG) sampling with the output of ``_C.sample_per_layer``.

    ``node`` starts with the unique seeds in order. Hop ``h`` expands the whole
    frontier ``node[:n_h]`` -- every node known before the hop, seeds included,
    so nodes reached earlier are sampled again -- drawing the row of the node
    at position ``i`` with ``node_rng(seed, h, i)``. Each sampled CSR position
    ``j`` of row ``v`` emits ``row`` = local id of ``indices[j]`` (new nodes
    appended in first-seen order), ``col`` = local id of ``v`` and
    ``edge = j``. ``num_sampled_nodes`` lists the unique seeds and the nodes
    new at each hop; ``num_sampled_edges`` the edges emitted per hop.

    With ``resample=False`` hop ``h`` expands only the nodes first reached at
    hop ``h - 1`` (the seeds at hop 0), the node at position ``i`` of that
    block drawing with ``node_rng(seed, h, i)``: the output of
    ``_C.sample_neighbors`` and of DENSE's ``_C.sample_dense_pyg``.
    """
    seed &= _MASK

    def draw(hop: int, pos: int, degree: int, fanout: int) -> list[int]:
        return sample_row_reference(seed, hop, pos, degree, fanout, replace)

    return sample_hops_reference(indptr, indices, seeds, fanouts, draw, resample=resample)
