"""The web process: the Bolt app on aiohttp, the webhook and report routes, health and metrics endpoints."""
