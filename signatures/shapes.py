"""What a failure looks like when no signature knows its wording: the generic failure layer.

Each shape is a scan pattern built on rare literals (it runs in the same multi-pattern scan as
every fingerprint, so a chunk without any costs nothing more), the literals themselves (which
locate its lines with ``bytes.find`` in a chunk the scan flagged, microseconds where a regex over
the chunk would take milliseconds) and a per-line check that only runs on the few lines found.
Three kinds:

- an *error statement*: a line in which a process states that something failed (the exception
  line of a Python traceback is read by ``tracebacks.py``; these are the others);
- a *degradation*: a line that shows the run going on worse (a limit hit, a non-finite loss);
- a *process death*: a line that reports that a process died (signal, non-zero exit code).

A line that states a failure by its shape is named with status ``unrecognized`` when no
initiating signature names a line; the same noise model (roles, time, handled errors, echoes)
applies to it as to a known signature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from signatures.shapewords import (
    CODED_ERROR_NEEDLES,
    FAILING_LEVEL,
    GLOG_HEADS,
    NAMED_LEVELS,
    NON_FINITE_NEEDLES,
    NON_FINITE_ROW,
    TF_ROOT_KINDS,
)


class ShapeKind(StrEnum):
    ERROR = "error"  # a process states that something failed
    DEGRADATION = "degradation"  # the run goes on, but slower or computing garbage
    DEATH = "death"  # a process died (signal, exit code, killed)


@dataclass(frozen=True)
class Shape:
    """One generic failure shape: how to find its lines, and the check of a line."""

    name: str
    kind: ShapeKind
    label: str  # what the shape is, in words, for the "why" of a diagnosis
    needles: tuple[bytes, ...]  # one of these is in every line of the shape
    verify: re.Pattern[str]  # searched in the unwrapped message
    pattern: str | None = None  # what a found line must match; None: a needle is enough
    ignore_case: bool = False  # of ``pattern``

    @property
    def scan(self) -> str:
        """The line check: ``pattern``, or the needles as one alternation."""
        return self.pattern or "|".join(re.escape(n.decode("ascii")) for n in self.needles)


SHAPES: tuple[Shape, ...] = (
    Shape(
        "cpp-exception",
        ShapeKind.ERROR,
        "a C++ exception that ended the process",
        (b"terminate called", b"what(): ", b"Fatal Python error"),
        re.compile(
            r"^(?:terminate called (?:after throwing|without an active exception|recursively)"
            r"|[ \t]*what\(\): +[^ \t]|Fatal Python error: )"
        ),
    ),
    Shape(
        "runtime-abort",
        ShapeKind.ERROR,
        "the C/C++ runtime's own report before it aborts the process (heap corruption, a pure virtual call)",
        (
            b"pure virtual method called",
            b"double free or corruption",
            b"free(): invalid",
            b"malloc(): ",
            b"malloc_consolidate(): ",
            b"munmap_chunk(): invalid",
            b"corrupted size vs",
            b"corrupted double-linked list",
            b"stack smashing detected",
        ),
        # glibc's heap checks (older ones inside "*** Error in `python': ..."), libstdc++'s
        # pure virtual call, the stack protector: printed by the runtime, then SIGABRT
        re.compile(
            r"^(?:\*\*\* Error in `[^`]{1,200}': )?"
            r"(?:double free or corruption\b|free\(\): invalid |malloc(?:_consolidate)?\(\): "
            r"(?:corrupted|invalid|memory corruption|unsorted)|munmap_chunk\(\): invalid "
            r"|corrupted size vs\. prev_size|corrupted double-linked list)"
            r"|^\*\*\* stack smashing detected \*\*\*|^pure virtual method called\s*$"
        ),
    ),
    Shape(
        "failed-assertion",
        ShapeKind.ERROR,
        "a failed C/CUDA assertion",
        (b"Assertion ", b"Check failed: ", b"failed assertion `"),
        # a Check after glog's head ("file.cc:12] ") or a source location ("file.h:100: ", dmlc)
        # Apple's Metal shaders say it the other way round: "X.mm:256: failed assertion `...'"
        re.compile(
            r"Assertion [`'].{1,400}['`] failed|(?:^|\] |\.\w{1,4}:\d+: )Check failed: "
            r"|\.\w{1,4}:\d+: failed assertion `"
        ),
        pattern=(r"Assertion [`'][^\n]*['`] failed|Check failed: |:[0-9]+: failed assertion `"),
    ),
    Shape(
        "logged-error",
        ShapeKind.ERROR,
        "a log record at ERROR level or above",
        (b"ERROR", b"CRITICAL", b"FATAL", *GLOG_HEADS, *NAMED_LEVELS),
        # The level comes from the record's head (glog, logging, vLLM ...) or leads the message:
        re.compile(
            # "ERROR: ...", "[ERROR] ...", "**ERROR: ...**"
            rf"^[^\w\n]{{0,4}}{FAILING_LEVEL}\b(?!_)(?:[^\w\n]|$)"
            rf"|^\S+ {{1,3}}- {{1,3}}{FAILING_LEVEL} {{1,3}}- "  # "name - ERROR - msg" (asctime stripped)
            rf"|^(?:[\w./:-]+ +){{0,3}}[-|] {{0,3}}{FAILING_LEVEL} +[-|] "  # loguru and friends
            # logfmt's level=error, JSON's "level": "error" (not an option's --level=error)
            r"""|(?:^|[ \t{,])["']?level["']?[ \t]*[:=][ \t]*["']?(?:error|fatal|critical)\b"""
        ),
        pattern=(
            r"ERROR|CRITICAL|FATAL|[EF][0-9]{3,4} [0-9]{2}:[0-9]{2}:|\[[EF] [^\]\n]*:[0-9]+\]"
            r"|(?:^|: |`)[EF] [\w./-]+:[0-9]+\]"
            r'|level=(?:error|fatal|critical)\b|"level": ?"(?:error|fatal|critical)"'
            r"|\[(?:error|fatal|critical)\] "
        ),
    ),
    Shape(
        "tool-error",
        ShapeKind.ERROR,
        "a program's or compiler's own error line",
        (b"error: ", b" fatal ", b"; error ", b"ld: cannot find "),
        re.compile(
            # slurmstepd: error: ..., main.c:4:10: fatal error: ...
            r"^[\w./<>+-]+(?::\d+){0,3}: (?:fatal )?error: \S"
            r"|^error: \S"  # setuptools, cargo
            r"|^[\w.-]+ fatal +: \S"  # nvcc fatal   : ...
            r"|^[\w.-]+ \S+, line \d+; (?:error|fatal) +: \S"  # ptxas /tmp/f.ptx, line 12; error   : ...
            r"|^(?:\S*/)?ld(?:\.\w+)?: cannot find \S"  # the linker: /usr/bin/ld: cannot find -lcurand
            r"|^loc\(.*\): error: \S"  # MLIR's diagnostics (XLA, Metal graphs): loc("mps_sub"(...)): error:
        ),
        pattern=(
            r": (?:fatal )?error: |^[ \t]*error: |^[\w.-]+ fatal +: |, line [0-9]+; (?:error|fatal) +: "
            r"|ld(?:\.[A-Za-z]+)?: cannot find "
        ),
    ),
    Shape(
        "status-code",
        ShapeKind.ERROR,
        "a framework status code",
        (
            *(f"{code}: ".encode() for code in ("RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE")),
            *(f"{code}: ".encode() for code in ("DEADLINE_EXCEEDED", "FAILED_PRECONDITION", "DATA_LOSS")),
            b"Resource exhausted: ",  # TensorFlow 1.x prints the status by name
            b"CUDA_ERROR_",
            b"_STATUS_",
            b"CUDA error: ",
            b"uda failure ",
            b"cuda runtime error (",
            *(f"nccl{code}".encode() for code in ("Unhandled", "System", "Internal", "Invalid", "Remote")),
            b"error=",
            b"error: ",
            *(f") {kind}: ".encode() for kind in TF_ROOT_KINDS),  # TensorFlow's "(1) Internal: ..."
        ),
        re.compile(
            r"\b(?:RESOURCE_EXHAUSTED|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|FAILED_PRECONDITION|DATA_LOSS): "
            rf"|^\s*\(\d+\) (?:{'|'.join(TF_ROOT_KINDS)}): "
            r"|\bResource exhausted: |\bCUDA_ERROR_(?!SUCCESS)[A-Z_]+|\b[A-Z]+_STATUS_(?!SUCCESS\b)[A-Z_]+"
            r"|CUDA error: |\b[Cc]uda failure |cuda runtime error \(|\berror=-?[1-9]\d*\b"
            r"|\berror: -?[1-9]\d*\)"  # a code closing a call's report: "(m: 768, k: 64, error: 13)"
            r"|\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b"
        ),
        pattern=(
            r"(?:RESOURCE_EXHAUSTED|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|FAILED_PRECONDITION|DATA_LOSS): "
            r"|Resource exhausted: |CUDA_ERROR_|_STATUS_|CUDA error: |uda failure |cuda runtime error \("
            r"|error=-?[1-9]|error: -?[1-9][0-9]*\)"
            rf"|\) (?:{'|'.join(TF_ROOT_KINDS)}): "
            r"|nccl(?:Unhandled|System|Internal|Invalid|Remote)"
        ),
    ),
    Shape(
        # TensorFlow logs the status of an op that failed, as a warning, before the exception that
        # carries it: found here at any level; opfailures.py keeps it only when that exception comes
        "op-failed",
        ShapeKind.ERROR,
        "a TensorFlow op's failed status",
        (b"OP_REQUIRES failed at ",),
        re.compile(r"\bOP_REQUIRES failed at \S+ : [A-Z][a-z]+(?: [a-z]+)*: \S"),
    ),
    Shape(
        "scheduler-verdict",
        ShapeKind.ERROR,
        "a scheduler's verdict on the job",
        (
            b"CANCELLED AT ",
            b"DUE TO ",
            b"oom-kill",
            b"oom_kill",
            b"OUT_OF_MEMORY",
            b"NODE_FAIL",
            b"TERM_",
            b"Evicted",
            b"OOMKill",
            b"DeadlineExceeded",
            b"BackoffLimitExceeded",
        ),
        re.compile(
            r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT |DUE TO (?:TIME LIMIT|PREEMPTION|NODE FAIL)"
            r"|oom[-_]kill event|\bOUT_OF_MEMORY\b|\bNODE_FAIL\b|^TERM_[A-Z_]+: "
            r"|(?:^|\bWarning +|[Rr]eason:? +)"
            r"(?:Evicted|OOMKilled|OOMKilling|DeadlineExceeded|BackoffLimitExceeded)\b"
        ),
        pattern=(
            r"CANCELLED AT |DUE TO |oom[-_]kill|OUT_OF_MEMORY|NODE_FAIL|^TERM_[A-Z_]+: "
            r"|Evicted|OOMKill|DeadlineExceeded|BackoffLimitExceeded"
        ),
    ),
    Shape(
        "nccl-warning",
        ShapeKind.ERROR,
        "an NCCL warning that reports a failed call",
        (b"NCCL WARN ",),
        re.compile(r"NCCL WARN "),
    ),
    Shape(
        "reported-exception",
        ShapeKind.ERROR,
        "an exception a framework or test runner reported",
        (
            b"<class '",
            b"Error: ",
            b"Exception: ",
            b"<Task finished ",
            *(f"{name}({quote}".encode() for name in ("Error", "Exception") for quote in "'\""),
        ),
        re.compile(
            r"<class '[\w.]+(?:Error|Exception)'>"
            # an exception's repr printed as the whole message: Hydra's "TypeError("f() got ...")"
            r"""|^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\((?:'[^\n]*'|"[^\n]*")\)[ \t]*$"""
            r"|^future: <Task finished .* exception=\S"  # asyncio's "Task exception was never retrieved"
            r"|(?:^|[ \t(-])(?:[a-z_][a-z0-9_]*\.)+[A-Z]\w*(?:Error|Exception)(?:: |\(')"
        ),
        pattern=(
            r"<class '|(?:[a-z_][a-z0-9_]*\.)+[A-Z][A-Za-z0-9]*(?:Error|Exception)(?:: |\(')"
            r"|<Task finished [^\n]* exception="
            r"""|(?:Error|Exception)\(["']"""
        ),
    ),
    Shape(
        # dmlc's LOG(FATAL) (MXNet, XGBoost, TVM) prints the message, then its native stack:
        # "Stack trace returned 10 entries:" or "Stack trace:", then "[bt] (0) ..." lines; the
        # header is found here, and nativestacks.py moves it to the message it belongs to
        "native-stack",
        ShapeKind.ERROR,
        "a fatal message's native stack (dmlc's [bt] frames)",
        (b"Stack trace",),
        re.compile(r"^Stack trace(?: returned \d+ entries)?:[ \t]*$"),
        pattern=r"Stack trace(?: returned [0-9]+ entries)?:[ \t]*$",
    ),
    Shape(
        "os-error",
        ShapeKind.ERROR,
        "a failed system call (errno)",
        (b"errno", b"Errno"),
        re.compile(r"\(errno:? [1-9]\d*|\[Errno [1-9]\d*\]|\berrno[= ][1-9]\d*"),
        pattern=(r"\(errno:? [1-9]|\[Errno [1-9]|errno[= ][1-9]"),
    ),
    Shape(
        # Ascend CANN's error codes head their records: "EI0009: [PID: N] <time> Transport init
        # error. Reason: ...", "EJ0001: ...", "EE9999: [PID: N] ... get error: ..." (W codes warn)
        "coded-error",
        ShapeKind.ERROR,
        "a record headed by an error code (Ascend CANN's EI0009:)",
        CODED_ERROR_NEEDLES,
        re.compile(r"^E[A-Z][0-9]{4}: +(?!Inner Error!?\s*$)\S"),
        pattern=r"(?:^|[ \]:])E[A-Z][0-9]{4}: +[^ \n]",
    ),
    Shape(
        "non-finite-metric",
        ShapeKind.DEGRADATION,
        "a loss or gradient norm that is no longer finite",
        NON_FINITE_NEEDLES,
        re.compile(
            # the name may go on past the word: "train_mel_loss_before = nan."
            # a loss named by its kind, not "loss": "SmoothL1=nan", "CrossEntropy=inf", "cost: nan"
            r"(?<![\w.])(?!(?:best|min|lowest|prev)\w*loss)"
            r"\w*(?:loss|grad[_ ]norm|gnorm|entropy|smooth_?l1|cost|criterion|objective)\w*?"
            r"\]?['\"]?[ \t]*[:=]?[ \t]*['\"]?(?:tensor\()?-?(?:nan|inf|1\.#(?:qnan|ind|inf)\d*)\b",
            re.IGNORECASE,
        ),
        pattern=(r"[ :='\"(]-?(?:nan|NaN|NAN|inf|Inf)\b|1\.#(?:QNAN|IND|INF)"),
    ),
    Shape(
        # a training table's row (ultralytics' "0/2  1.86G  nan  nan  nan  113  640: 100%|...",
        # under "Epoch gpu_mem box obj cls ..."): its columns hold the losses, unnamed on the row
        "non-finite-row",
        ShapeKind.DEGRADATION,
        "a row of a training table whose values are no longer finite",
        (b" nan ", b" inf "),
        NON_FINITE_ROW,
        pattern=r"[0-9]+/[0-9]+ .*(nan|inf) +(nan|inf) .*[0-9]%\|",
    ),
    Shape(
        "limit-hit",
        ShapeKind.DEGRADATION,
        "a configured limit that was hit",
        (b"limit",),
        # "hit config.cache_size_limit (64)", "hit recompilation cache limit (64)", "recompile_limit reached"
        re.compile(r"\bhit (?:config\.)?(?:[a-z]+ ){0,2}\w*limit\b|\b\w*limit\w* (?:reached|hit)\b"),
        pattern=(r"hit (?:config\.)?(?:[a-z]+ ){0,2}[A-Za-z0-9_]*limit|limit[A-Za-z0-9_]* (?:reached|hit)"),
    ),
    Shape(
        "signal-death",
        ShapeKind.DEATH,
        "a process killed by a signal",
        (
            *(w.encode() for w in ("Segmentation fault", "core dumped", "Bus error", "Illegal instruction")),
            *(w.encode() for w in ("Floating point exception", "Aborted", "Killed", "bus error")),
            b"zsh: ",  # zsh's report of a job's signal, in lower case
            *(w.encode() for w in ("segmentation fault", "signal", "Signal ", "eceived SIG", "killed by ")),
            *(w.encode() for w in ("killed due to ", "killed because of ", "was aborted", "were aborted")),
            b"encountered in worker",  # torch's handler in a DataLoader worker
            b"^C",  # a terminal's echo of the interrupt it sent
            *(f"SIG{name}".encode() for name in ("SEGV", "ABRT", "BUS", "ILL", "FPE", "KILL")),
        ),
        re.compile(
            r"Segmentation fault|core dumped"
            r"|^[ \t]*(?:Bus error|Illegal instruction|Floating point exception|Aborted|Killed)(?:[ \t(:.]|$)"
            r"|\b\d+ +(?:Killed|Aborted|Segmentation fault|Bus error) "  # the shell's job report
            # zsh's: "zsh: segmentation fault  python train.py", "[1]    15017 bus error  python ..."
            r"|(?:^zsh: |^\[\d+\] +\d+ )"
            r"(?:killed|abort|bus error|segmentation fault|illegal hardware instruction)\b"
            r"|\b(?:killed|terminated|exited|died) (?:by|on|with|due to) signal"
            r"|\b[Rr]eceived signal |\bSignal \d+ \(SIG|\bSIG(?:SEGV|ABRT|BUS|ILL|FPE|KILL)\b"
            r"|\bkilled (?:due to|because of|by) (?:memory pressure|the OOM killer|OOM)\b"
            r"|\bUnexpected (?:segmentation fault|bus error|floating-point exception) encountered in worker\b"
            r"|^\^C[ \t]*$"
            r"|\b[Rr]eceived SIG[A-Z]{2,4}\b[^\n]{0,40}\b(?:exiting|shutting down|terminating|aborting)\b"
            r"|\b[Rr]eceived SIG[A-Z]{2,4}(?:: ?\d+)?\.?[ \t]*$"  # the message ends in the signal it got
            # a launcher's verdict in prose: "the trainer process with rank=[3] was aborted"
            r"|\bprocess(?:es)?\b[^\n]{0,80}\b(?:was|were) aborted\b"
        ),
        pattern=(
            r"Segmentation fault|core dumped"
            r"|^[ \t]*(?:Bus error|Illegal instruction|Floating point exception|Aborted|Killed)"
            r"|[0-9] +(?:Killed|Aborted|Segmentation fault|Bus error) "
            r"|zsh: (?:killed|abort|bus error|segmentation fault|illegal hardware instruction)"
            r"|\] +[0-9]+ (?:killed|abort|bus error|segmentation fault|illegal hardware instruction)"
            r"|(?:killed|terminated|exited|died) (?:by|on|with|due to) signal"
            r"|[Rr]eceived signal |Signal [0-9]+ \(SIG|SIG(?:SEGV|ABRT|BUS|ILL|FPE|KILL)"
            r"|killed (?:due to|because of|by) (?:memory pressure|the OOM killer|OOM)"
            r"|Unexpected (?:segmentation fault|bus error|floating-point exception) encountered in worker"
            r"|^\^C[ \t]*$"
            r"|[Rr]eceived SIG[A-Z]"
            r"|(?:was|were) aborted"
        ),
    ),
    Shape(
        "exit-code",
        ShapeKind.DEATH,
        "a process that exited with a non-zero code",
        (
            b"exit code",
            b"Exit code",
            b"exit status",
            b"Exit status",
            b"exitcode",
            b"exit_code",
            b"return code",
            b"returncode",
            b"terminated with",
            b"exited with",
            b"exit with",
        ),
        re.compile(
            r"\b(?:exit|return)[ _]?(?:code|status)[:= ]+\(?-?[1-9]\d*"
            r"|\bexitcode: -?[1-9]\d*|\bterminated with (?:exit code|signal)"
            # a supervisor's or launcher's words: "Pod: p exited with code 1", horovodrun's
            # "Process 0 exit with status code 137."
            r"|\bexit(?:ed)? with (?:code|status(?: code)?) -?[1-9]",
            re.IGNORECASE,
        ),
        pattern=(
            r"(?:exit|return)[ _]?(?:code|status)[:= ]+\(?-?[1-9]"
            r"|exitcode: -?[1-9]|terminated with (?:exit code|signal)"
            r"|exit(?:ed)? with (?:code|status(?: code)?) -?[1-9]"
        ),
        ignore_case=True,
    ),
)
