"""Link prediction: its configuration, data splits, models (encoder + decoder),
loop (step, evaluation) and filtered ranking metrics."""
