"""The Dagster code location: jobs, schedules and the single Definitions object."""
