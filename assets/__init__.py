"""assets of the Dagster platform (filled by the platform issue)."""
