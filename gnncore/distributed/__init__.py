"""Distributed training on ``torch.distributed`` (ALGORITHMS.md §8, docs/DISTRIBUTED.md)."""
