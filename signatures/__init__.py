"""Denpex's engine: signatures in YAML, and ``diagnose()`` over training logs.

Pure by design: no Slack, Redis or network code is imported here (a test checks ``sys.modules``).
"""

from signatures.diagnosis import Diagnosis, DownstreamGroup, Evidence, SignatureRef, Status
from signatures.engine import DEFAULT_LIMITS, Limits, default_library, diagnose
from signatures.errors import BinaryInput, CorruptArchive, InputError, InputTooLarge, UnreadableInput
from signatures.library import Library
from signatures.loader import load_signatures
from signatures.redact import redact
from signatures.sources import Source
from signatures.spec import Problem, Role, Signature, SignatureError

__all__ = [
    "DEFAULT_LIMITS",
    "BinaryInput",
    "CorruptArchive",
    "Diagnosis",
    "DownstreamGroup",
    "Evidence",
    "InputError",
    "InputTooLarge",
    "Library",
    "Limits",
    "Problem",
    "Role",
    "Signature",
    "SignatureError",
    "SignatureRef",
    "Source",
    "Status",
    "UnreadableInput",
    "default_library",
    "diagnose",
    "load_signatures",
    "redact",
]
