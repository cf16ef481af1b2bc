"""Getting a job's logs onto local disk: Slack files, pasted text and allow-listed remote URLs."""
