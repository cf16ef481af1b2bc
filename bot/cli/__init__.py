"""The ``denpex`` command: one module per group of sub-commands, wired in ``main``."""
