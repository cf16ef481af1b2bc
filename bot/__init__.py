"""The service around the engine: the CLI, the web app, the job queue and worker, Slack output."""
