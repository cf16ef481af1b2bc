"""Running the service: settings read once, JSON logs with redaction, Prometheus metrics, and the
signed webhook client the CLI commands report with."""
