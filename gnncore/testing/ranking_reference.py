"""A slow, loop-based filtered ranking (both directions) to check gnncore.train.link.ranking."""

from __future__ import annotations

import numpy as np


def filtered_ranks_reference(
    z: np.ndarray,
    relation_vectors: np.ndarray | None,
    triples: np.ndarray,
    known: set[tuple[int, int, int]],
    num_relations: int,
    reciprocal: bool,
) -> list[float]:
    """Ranks of every tail query ``(h, r, ?)``, then every head query ``(?, r, t)``.

    Scores are DistMult's ``sum(z_h * w_r * z_c)`` (dot product when
    ``relation_vectors`` is ``None``); a head query scores ``(t, r', c)`` with
    ``r' = r + R`` when ``reciprocal`` else ``r``. Candidates forming a known
    triple other than the answer are skipped; ties count half.
    """

    def score(head: int, rel: int, cand: int) -> float:
        w = relation_vectors[rel] if relation_vectors is not None else 1.0
        return float(np.sum(z[head] * w * z[cand]))

    ranks: list[float] = []
    for direction in ("tail", "head"):
        for h, r, t in np.asarray(triples).tolist():
            if direction == "tail":
                source, rel, answer = h, r, t
            else:
                source, rel, answer = t, (r + num_relations if reciprocal else r), h
            target = score(source, rel, answer)
            greater = ties = 0
            for cand in range(len(z)):
                known_triple = (h, r, cand) if direction == "tail" else (cand, r, t)
                if cand == answer or known_triple in known:
                    continue
                s = score(source, rel, cand)
                greater += s > target
                ties += s == target
            ranks.append(1.0 + greater + ties / 2.0)
    return ranks
