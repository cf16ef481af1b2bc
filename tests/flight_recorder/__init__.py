"""Flight-recorder dumps for the tests, and make_dumps.py that regenerates them."""
