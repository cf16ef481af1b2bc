"""The optional language model for free-form follow-ups: the evidence pack, the client, citations."""
