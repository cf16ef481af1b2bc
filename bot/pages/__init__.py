"""The full incident report: one HTML page per diagnosis, its rank timeline, and signed links to it."""
