"""Slack output: Block Kit rendering, posting replies, thread memory and follow-up answers."""
