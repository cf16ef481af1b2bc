"""The literals and forms the generic shapes (shapes.py) are built from: log levels, glog heads,
how a non-finite value is printed, TensorFlow's status kinds."""

from __future__ import annotations

import re

# Levels of a log record that never state a failure of their own, and those that do.
QUIET_LEVELS = ("I", "D", "W")
ERROR_LEVELS = ("E", "F", "C")

FAILING_LEVEL = r"(?:ERROR|CRITICAL|FATAL)"
# glog heads: E0612 12:00:00 (c10's own: E612), [E file.cc:12], TensorFlow's "E tensorflow/..."
GLOG_HEADS = (
    # E and F: a FATAL record states its failure whether or not it is a "Check failed"
    *(f"{level}{digit}".encode() for level in "EF" for digit in range(10)),
    b"[E ",
    b"[F ",
    b": E ",
    b": F ",
    b"E tensorflow",
    b"E external",
)
# A level named in lower case: logfmt's level=error, JSON's "level": "error", a bracketed [error] head
NAMED_LEVELS = (
    *(f"level={w}".encode() for w in ("error", "fatal", "critical")),
    *(f'"level": "{w}"'.encode() for w in ("error", "fatal", "critical")),
    *(f'"level":"{w}"'.encode() for w in ("error", "fatal", "critical")),
    *(f"[{w}] ".encode() for w in ("error", "fatal", "critical")),
)
# "nan" or "inf" as a printed value ("loss: nan", "'grad_norm': nan", "loss=inf", "| loss nan |",
# "[Loss] nan"),
# never "nan_count" or "info".
NON_FINITE_NEEDLES = (
    *(
        lead + word
        for word in (b"nan", b"NaN", b"inf")
        for lead in (b": ", b"=", b"= ", b"'", b"ss ", b"rm ", b"] ", b"  ")  # "loss   nan": a column
    ),
    b"(nan",  # loss: tensor(nan, device=...)
    b"1.#QNAN",  # MSVC's printf of a NaN (CNTK on Windows: "TrainLossPerSample =  1.#QNAN000")
    b"1.#IND",
    b"1.#INF",
)


# An epoch counter opens the row, two values or more are non-finite, and a progress bar ends it.
NON_FINITE_ROW = re.compile(r"^\s*\d+/\d+\s+(?:\S+\s+)*?(?:nan|inf)\s+(?:nan|inf)\s.*\d%\|")


# TensorFlow's status kinds by name, as a root error prints them ("(0) Invalid argument: ...");
# "Out of range" (an input's end) and "Cancelled" (a consequence) state no failure of their own.
TF_ROOT_KINDS = (
    "Internal",
    "Invalid argument",
    "Resource exhausted",
    "Failed precondition",
    "Unavailable",
    "Aborted",
    "Unknown",
    "Not found",
    "Data loss",
    "Deadline exceeded",
    "Permission denied",
    "Unimplemented",
)

# An error code's record: "E" and a letter, four digits ("EI0009: ", "EE9999: ").
CODED_ERROR_NEEDLES = tuple(f"E{letter}".encode() for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
