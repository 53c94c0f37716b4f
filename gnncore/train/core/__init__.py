"""What every training mode shares: options and their checks, the device, the
epoch driver and its batch sources, checkpoints, the optimiser step, prefetching,
throughput timers, the GNN architectures and layer-wise inference (every node once
per layer: `gnncore predict` and exact evaluation)."""
