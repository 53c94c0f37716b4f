"""Partition buffer orderings: BETA's swaps and coverage against Eq. 5.1/5.2 and
a brute-force check, COMET's bucket assignment, the node-classification policies."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gnncore.outofcore import (
    beta_states,
    beta_swap_count,
    comet_epoch,
    comet_settings,
    first_cover_buckets,
    node_classification_states,
    static_cache_states,
    swap_count,
    swap_lower_bound,
)


def pairs_met(states) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for s in states for a, b in itertools.combinations(s, 2)}


def test_beta_meets_every_pair_with_eq_5_2_swaps_for_all_small_buffers():
    for p in range(2, 33):
        for c in range(2, p + 1):
            states = beta_states(p, c)
            assert all(len(set(s)) == c for s in states)
            assert all(sum(a != b for a, b in zip(s, t)) == 1 for s, t in zip(states, states[1:]))
            assert swap_count(states) == beta_swap_count(p, c), (p, c)
            assert pairs_met(states) == set(itertools.combinations(range(p), 2)), (p, c)
            assert swap_lower_bound(p, c) <= beta_swap_count(p, c)


def test_worked_example_p4_c2_is_five_swaps():
    assert beta_swap_count(4, 2) == 5
    assert swap_lower_bound(4, 2) == 5
    assert beta_states(4, 2) == [(0, 1), (0, 2), (0, 3), (1, 3), (1, 2), (3, 2)]


def test_randomised_beta_keeps_the_swap_count_and_coverage():
    rng = np.random.default_rng(0)
    for p, c in [(8, 3), (16, 4), (32, 8)]:
        states = beta_states(p, c, rng)
        assert swap_count(states) == beta_swap_count(p, c)
        assert len(pairs_met(states)) == p * (p - 1) // 2
    assert beta_states(8, 3, np.random.default_rng(1)) != beta_states(8, 3)


def test_each_bucket_is_trained_once_where_its_ends_first_meet():
    states = beta_states(6, 3)
    buckets = first_cover_buckets(states, 6)
    flat = [b for per_state in buckets for b in per_state]
    assert sorted(flat) == [(i, j) for i in range(6) for j in range(6)]
    for state, per_state in zip(states, buckets):
        assert all(i in state and j in state for i, j in per_state)
    # After the first state, one new partition brings at most 2(c - 1) + 1 buckets.
    assert all(len(b) <= 2 * 2 + 1 for b in buckets[1:])


def test_comet_assigns_every_physical_bucket_once_to_a_state_holding_it():
    rng = np.random.default_rng(3)
    plan = comet_epoch(16, 8, 4, rng)
    assert sorted(q for g in plan.logical or [] for q in g) == list(range(16))
    assert {len(g) for g in plan.logical or []} == {2}
    flat = [b for per_state in plan.buckets for b in per_state]
    assert sorted(flat) == [(i, j) for i in range(16) for j in range(16)]
    for state, per_state in zip(plan.states, plan.buckets):
        assert all(i in state and j in state for i, j in per_state)
    # One logical swap reads one logical partition: 2 physical ones here.
    assert plan.swaps == 2 * beta_swap_count(8, 4)
    again = comet_epoch(16, 8, 4, np.random.default_rng(3))
    assert again.buckets == plan.buckets and again.logical == plan.logical
    other = comet_epoch(16, 8, 4, np.random.default_rng(4))
    assert other.logical != plan.logical


def test_comet_spreads_buckets_over_states_unlike_beta():
    """BETA trains every bucket as early as possible, so the first states take
    the most; COMET's random choice among the holding states evens that out."""
    rng = np.random.default_rng(0)
    plan = comet_epoch(32, 8, 4, rng)
    per_state = np.array([len(b) for b in plan.buckets])
    beta = np.array([len(b) for b in first_cover_buckets(beta_states(8, 4), 8)])
    assert per_state.std() / per_state.mean() < beta.std() / beta.mean()


def test_node_classification_policies():
    rng = np.random.default_rng(0)
    states = node_classification_states(10, 3, rng)
    assert swap_count(states) == 10 - 3  # every partition read exactly once
    assert {q for s in states for q in s} == set(range(10))
    (state,) = static_cache_states(2, 10, 4, rng)
    assert state[:2] == (0, 1) and len(set(state)) == 4
    with pytest.raises(ValueError, match="k < c"):
        static_cache_states(4, 10, 4, rng)


def test_bad_buffers_are_refused():
    with pytest.raises(ValueError, match="2 <= c <= p"):
        beta_states(4, 5)
    with pytest.raises(ValueError, match="2 <= c <= p"):
        beta_swap_count(4, 1)


def test_comet_settings_follow_the_auto_tuning_rules():
    gib = 1 << 30
    p, c, logical = comet_settings(node_bytes=64 * gib, edge_bytes=256 * gib, memory_bytes=16 * gib)
    assert p == int(min(64 * 1024, (256 * 1024) ** 0.5))  # 512 with 1 MiB blocks
    part, bucket = 64 * gib / p, 256 * gib / p**2
    assert c * part + 2 * c * c * bucket < 16 * gib <= (c + 1) * part + 2 * (c + 1) ** 2 * bucket
    assert logical == round(2 * p / c)
    with pytest.raises(ValueError, match="cannot hold 2"):
        comet_settings(node_bytes=64 * gib, edge_bytes=256 * gib, memory_bytes=gib // 8)
