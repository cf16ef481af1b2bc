"""The web process: the Bolt app on aiohttp, the webhook route, health and metrics endpoints."""
