# Shared by denpex-epilog.sh and denpex-requeue.sh; install it beside them (same directory).
# Sourced, not run: it defines functions and sets nothing else.

# failed_exit_code: set $code to the job's exit code (128 + N for signal N); false when the job
# succeeded. SLURM_JOB_EXIT_CODE2 is "exit:signal"; SLURM_JOB_EXIT_CODE is the raw wait(2)
# status of the batch script (exit code times 256), kept for older Slurm versions.
failed_exit_code() {
  if [ -n "${SLURM_JOB_EXIT_CODE2:-}" ]; then
    code=${SLURM_JOB_EXIT_CODE2%%:*}
    signal=${SLURM_JOB_EXIT_CODE2#*:}
  else
    status=${SLURM_JOB_EXIT_CODE:-0}
    code=$((status / 256))
    signal=$((status % 128))
  fi
  [ "${signal:-0}" = 0 ] || code=$((128 + signal))
  [ "$code" != 0 ]
}

# output_files INFO: set $stdout and $stderr to the job's output paths from `scontrol show job`
# (either may be unreadable; the caller checks). Paths may hold spaces: each has a line of its own.
output_files() {
  stdout=$(printf '%s\n' "$1" | sed -n 's/^ *StdOut=//p' | head -n 1)
  stderr=$(printf '%s\n' "$1" | sed -n 's/^ *StdErr=//p' | head -n 1)
}
