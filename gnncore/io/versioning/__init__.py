"""Which dataset a graph directory holds: ingestion into directories named by
the input's digest (:mod:`~gnncore.io.versioning.versioned`) and the drop
folder whose new or changed files are new dataset versions
(:mod:`~gnncore.io.versioning.inbox`)."""
