"""The shared optimiser step: gradient clipping matches torch's rule, sparse included."""

from __future__ import annotations

import torch

from gnncore.train.core.steps import OptimizerStep, clip_gradients


def _dense_and_sparse_grads() -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    torch.manual_seed(0)
    weight = torch.randn(5, 3)
    embedding_grad = torch.sparse_coo_tensor(
        torch.tensor([[0, 2, 2]]), torch.randn(3, 4), (6, 4)
    )  # row 2 twice: coalescing adds them
    sparse = [torch.nn.Parameter(weight.clone()), torch.nn.Parameter(torch.zeros(6, 4))]
    sparse[0].grad = torch.randn(5, 3)
    sparse[1].grad = embedding_grad
    dense = [torch.nn.Parameter(p.detach().clone()) for p in sparse]
    dense[0].grad = sparse[0].grad.clone()
    dense[1].grad = embedding_grad.to_dense()
    return sparse, dense


def test_clipping_matches_torch_for_dense_and_sparse_gradients() -> None:
    sparse, dense = _dense_and_sparse_grads()
    expected_norm = torch.nn.utils.clip_grad_norm_(dense, max_norm=0.5)
    norm = clip_gradients(sparse, 0.5)
    assert torch.allclose(norm, expected_norm)
    assert expected_norm > 0.5  # the case clips
    for mine, reference in zip(sparse, dense):
        assert mine.grad is not None and reference.grad is not None
        assert torch.allclose(mine.grad.to_dense(), reference.grad, atol=1e-6)
    total = torch.linalg.vector_norm(torch.cat([p.grad.to_dense().flatten() for p in sparse]))
    assert abs(float(total) - 0.5) < 1e-4


def test_gradients_within_the_bound_are_left_alone() -> None:
    sparse, _ = _dense_and_sparse_grads()
    before = [p.grad.to_dense().clone() for p in sparse]
    norm = clip_gradients(sparse, 1e6)
    assert float(norm) < 1e6
    for p, grad in zip(sparse, before):
        assert torch.allclose(p.grad.to_dense(), grad)


def test_the_step_clips_before_the_update_only_when_asked() -> None:
    torch.manual_seed(1)
    updates = {}
    for max_norm in (0.0, 0.01):
        param = torch.nn.Parameter(torch.ones(4))
        step = OptimizerStep(torch.optim.SGD([param], lr=1.0), max_grad_norm=max_norm)
        step.zero_grad()
        step((param * torch.tensor([10.0, -10.0, 5.0, 0.0])).sum())
        updates[max_norm] = torch.ones(4) - param.detach()
    assert torch.allclose(updates[0.0], torch.tensor([10.0, -10.0, 5.0, 0.0]))
    assert abs(float(torch.linalg.vector_norm(updates[0.01])) - 0.01) < 1e-5
