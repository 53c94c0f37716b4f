r"""The filtered ranking protocol of link prediction (Bordes et al. 2013).

Each evaluation triple ``(h, r, t)`` asks two queries: the tail ``(h, r, ?)``
and the head ``(?, r, t)``. The true answer is ranked against every entity
(or, on graphs too large for that, against sampled negatives), after removing
the other answers known to be true -- from the training, validation and test
triples -- so a model is not punished for ranking another correct answer
first. Ties (scores within a relative 1e-5 of the answer's) count half, the
mean of the optimistic and pessimistic rank, so a model that scores everything
alike gets rank ``~N/2``, not 1.

Head queries are scored as tail queries of the reversed triple ``(t, r', h)``
where ``r'`` is the reciprocal relation ``r + R`` when the model learns
reciprocal relations, else ``r`` (DistMult and dot product are symmetric).
Known answers are looked up in one :class:`~gnncore.sampler.KnownEdges` over
``2R`` relations: ``(h, r, t)`` and ``(t, r + R, h)`` for every known triple.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gnncore.sampler.negative import KnownEdges, NegativeDraw

#: ``(head representations [B, D], relations [B]) -> query vectors [B, D]``.
QueryFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
HITS_AT = (1, 3, 10)
#: Relative score difference below which a candidate ties with the answer.
TIE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class RankingMetrics:
    """Filtered MRR, mean rank and Hits@k over ``count`` queries (both directions)."""

    mrr: float
    mean_rank: float
    hits: dict[int, float]
    count: int

    def as_dict(self, prefix: str = "", metric_names: bool = False) -> dict[str, float]:
        """``{prefix}mrr``, ``{prefix}mean_rank`` and ``{prefix}hits@k`` (with
        ``metric_names``: ``hits_at_k``, since MLflow metric names cannot hold ``@``)."""
        hits = "hits_at_" if metric_names else "hits@"
        out = {f"{prefix}mrr": self.mrr, f"{prefix}mean_rank": self.mean_rank}
        out.update({f"{prefix}{hits}{k}": v for k, v in self.hits.items()})
        return out

    @classmethod
    def from_ranks(
        cls,
        ranks: torch.Tensor,
        reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> RankingMetrics:
        """From a 1-d tensor of (possibly half-integer) ranks. With ``reduce``
        (``reduce_sum`` of a distributed run: a tensor summed over the
        processes), ``ranks`` are this process's share of the queries and the
        metrics are those of all processes' queries together: the count, the
        sums of ``1 / rank`` and ``rank`` and the hit counts are summed, so every
        process gets the same figures."""
        ranks = ranks.double()
        if reduce is not None:
            sums = torch.stack(
                [
                    torch.tensor(float(ranks.numel()), dtype=torch.float64),
                    (1.0 / ranks).sum(),
                    ranks.sum(),
                    *[(ranks <= k).double().sum() for k in HITS_AT],
                ]
            )
            count, reciprocal, total, *hits = reduce(sums).tolist()
            if count == 0:
                return cls(0.0, 0.0, {k: 0.0 for k in HITS_AT}, 0)
            return cls(
                mrr=reciprocal / count,
                mean_rank=total / count,
                hits={k: h / count for k, h in zip(HITS_AT, hits, strict=True)},
                count=int(count),
            )
        if ranks.numel() == 0:
            return cls(0.0, 0.0, {k: 0.0 for k in HITS_AT}, 0)
        return cls(
            mrr=float((1.0 / ranks).mean()),
            mean_rank=float(ranks.mean()),
            hits={k: float((ranks <= k).double().mean()) for k in HITS_AT},
            count=int(ranks.numel()),
        )


def known_edges(
    triples: list[np.ndarray], num_nodes: int, num_relations: int, symmetric: bool = False
) -> KnownEdges:
    """Every true answer of tail and head queries, over ``2 * num_relations`` ids;
    with ``symmetric`` every triple also holds reversed under its own relation
    (undirected edges stored once)."""
    t = np.concatenate([np.asarray(a, dtype=np.int64).reshape(-1, 3) for a in triples])
    if symmetric:
        t = np.concatenate([t, t[:, ::-1]])
    reverse = np.stack([t[:, 2], t[:, 1] + num_relations, t[:, 0]], axis=1)
    return KnownEdges.from_triples(np.concatenate([t, reverse]), num_nodes, 2 * num_relations)


def ranking_queries(
    triples: np.ndarray, num_relations: int, reciprocal: bool
) -> tuple[np.ndarray, ...]:
    """Both directions of ``triples`` as queries: ``(source, decoder relation,
    filter relation, answer)`` int64 arrays, tail queries first."""
    t = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    h, r, tail = t[:, 0], t[:, 1], t[:, 2]
    source = np.concatenate([h, tail])
    answer = np.concatenate([tail, h])
    filter_rel = np.concatenate([r, r + num_relations])
    decoder_rel = filter_rel if reciprocal else np.concatenate([r, r])
    return source, decoder_rel, filter_rel, answer


def _outranking(
    scores: torch.Tensor, true_score: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, candidates scoring above the answer and those tied with it.

    A tie is a score within ``TIE_TOLERANCE`` (relative) of the answer's: the
    answer's own score comes from another kernel than the candidates' matrix
    product, so equal vectors may differ in the last bits.
    """
    tolerance = TIE_TOLERANCE * true_score.abs().clamp(min=1.0)
    greater = (scores > true_score + tolerance).sum(1)
    ties = ((scores - true_score).abs() <= tolerance).sum(1)
    return greater, ties


@torch.no_grad()
def filtered_ranks(
    z: torch.Tensor,
    query: QueryFn,
    triples: np.ndarray,
    known: KnownEdges,
    num_relations: int,
    reciprocal: bool = True,
    batch_size: int = 1024,
    num_negatives: int = 0,
    negatives: NegativeDraw | None = None,
    seed: int = 0,
    entity_chunk: int = 1 << 20,
) -> torch.Tensor:
    r"""Filtered ranks of the answers of every query of ``triples`` (both directions).

    Args:
        z (Tensor): ``[N, D]`` representations of all nodes (on the scoring
            device).
        query (callable): ``query(z_heads, relations) -> [B, D]`` (the
            decoder's :meth:`~gnncore.train.link.models.LinkDecoder.query`).
        triples (array): int64 ``[T, 3]`` ``(head, relation, tail)``.
        known (KnownEdges): From :func:`known_edges` (all known triples).
        num_relations (int): Relations of the graph (not doubled).
        reciprocal (bool): Head queries use relation ``r + R``.
        batch_size (int): Queries scored at once.
        num_negatives (int): ``0`` ranks against all entities; otherwise
            against this many negatives drawn per query batch by
            ``negatives`` (known answers among them are filtered).
        negatives (NegativeDraw, optional): Negative distribution when
            ``num_negatives > 0``; uniform by default.
        seed (int): Seed of the negative draws.
        entity_chunk (int): Entities scored at once (memory: about four
            ``batch_size * entity_chunk`` float/bool buffers).

    Returns:
        Tensor: float64 ranks, ``2 T`` of them (tail queries, then head queries).
    """
    source, decoder_rel, filter_rel, answer = ranking_queries(triples, num_relations, reciprocal)
    device = z.device
    num_nodes = z.size(0)
    rng = np.random.default_rng(seed)
    draw = negatives or NegativeDraw(num_nodes)
    ranks = []
    for start in range(0, len(source), batch_size):
        sl = slice(start, start + batch_size)
        src = torch.from_numpy(source[sl]).to(device)
        target = torch.from_numpy(answer[sl]).to(device)
        q = query(z[src], torch.from_numpy(decoder_rel[sl]).to(device)).float()
        true_score = (q * z[target].float()).sum(-1, keepdim=True)
        rows, cols = known.true_tails(source[sl], filter_rel[sl])
        if num_negatives > 0:
            candidates = draw(rng, num_negatives)
            scores = q @ z[torch.from_numpy(candidates).to(device)].float().t()
            mask = known.contains(source[sl][:, None], filter_rel[sl][:, None], candidates[None, :])
            scores[torch.from_numpy(mask).to(device)] = float("-inf")
            greater, ties = _outranking(scores, true_score)
        else:
            greater = torch.zeros(len(src), dtype=torch.long, device=device)
            ties = torch.zeros_like(greater)
            for lo in range(0, num_nodes, entity_chunk):
                hi = min(lo + entity_chunk, num_nodes)
                scores = q @ z[lo:hi].float().t()
                inside = (cols >= lo) & (cols < hi)  # known answers (the target too)
                scores[
                    torch.from_numpy(rows[inside]).to(device),
                    torch.from_numpy(cols[inside] - lo).to(device),
                ] = float("-inf")
                chunk_greater, chunk_ties = _outranking(scores, true_score)
                greater += chunk_greater
                ties += chunk_ties
        ranks.append(1.0 + greater.double() + ties.double() / 2.0)
    return torch.cat(ranks).cpu() if ranks else torch.zeros(0, dtype=torch.float64)
