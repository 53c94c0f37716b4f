"""What every training mode shares: options and their checks, the device, the
epoch driver and its batch sources, checkpoints, the optimiser step, prefetching,
throughput timers and the GNN architectures."""
