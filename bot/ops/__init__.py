"""Running the service: settings read once, JSON logs with redaction, Prometheus metrics."""
