"""Node classification: its configuration, loop (step, evaluation) and metrics."""
