"""What each kind of job does (diagnose, follow-ups, look-ups), and the one table that registers them."""
