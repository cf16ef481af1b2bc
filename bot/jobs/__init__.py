"""The job queue on Redis: keys, connection, stream queue, store, the worker loop and engine pool."""
