"""Console entry points, one per message format (filled in by the pipelines runtime)."""
