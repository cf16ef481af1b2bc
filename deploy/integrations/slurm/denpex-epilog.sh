#!/bin/sh
# Slurm epilog: report failed jobs to Denpex, sending only the diagnosis (never the log).
#
# Install (slurm.conf), on the controller so it runs once per job:
#   EpilogSlurmctld=/etc/slurm/denpex-epilog.sh
# The controller must see the jobs' output files (a shared file system). Where it does not, use
#   Epilog=/etc/slurm/denpex-epilog.sh
# instead: it then runs on every node of the job, and reports from the batch host only.
#
# Needs the `denpex` command, installed from a wheel built from the Denpex repository
# (`pip wheel --no-deps -w dist .` there, then `pip install dist/denpex_bot-*.whl` here).
# Never `pip install denpex`: that name on the package index is an unrelated project.
# It also needs a root-only secret file:
#   install -m 0400 /dev/stdin /etc/denpex/webhook-secret <<< "$DENPEX_WEBHOOK_SECRET"
# Settings, in /etc/default/denpex-epilog (sourced if present) or the environment:
#   DENPEX_URL          the Denpex server, e.g. https://denpex.example.com
#   DENPEX_SECRET_FILE  default /etc/denpex/webhook-secret
#   DENPEX_CLUSTER      default $SLURM_CLUSTER_NAME
#   DENPEX_BIN          default denpex (epilogs run without a search PATH: give a full path)
#
# An epilog that fails drains the node, so this script always exits 0 and gives up quietly.

PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin
[ -r /etc/default/denpex-epilog ] && . /etc/default/denpex-epilog

main() {
  job=${SLURM_JOB_ID:-}
  [ -n "$job" ] || return 0
  # Only failed jobs. SLURM_JOB_EXIT_CODE2 is "exit:signal"; SLURM_JOB_EXIT_CODE is the raw
  # wait(2) status of the batch script (exit code times 256), kept for older Slurm versions.
  if [ -n "${SLURM_JOB_EXIT_CODE2:-}" ]; then
    code=${SLURM_JOB_EXIT_CODE2%%:*}
    signal=${SLURM_JOB_EXIT_CODE2#*:}
  else
    status=${SLURM_JOB_EXIT_CODE:-0}
    code=$((status / 256))
    signal=$((status % 128))
  fi
  [ "${signal:-0}" = 0 ] || code=$((128 + signal))
  [ "$code" != 0 ] || return 0
  # As a node epilog, report from the batch host only, not once per node.
  if [ -n "${SLURMD_NODENAME:-}" ]; then
    batch_host=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*BatchHost=\([^ ]*\).*/\1/p')
    [ -z "$batch_host" ] || [ "$batch_host" = "$SLURMD_NODENAME" ] || return 0
  fi
  [ -n "${DENPEX_URL:-}" ] || return 0

  info=$(scontrol show job "$job" 2>/dev/null) || return 0
  stdout=$(printf '%s\n' "$info" | sed -n 's/^ *StdOut=//p' | head -n 1)
  stderr=$(printf '%s\n' "$info" | sed -n 's/^ *StdErr=//p' | head -n 1)
  name=$(printf '%s\n' "$info" | sed -n 's/.*JobName=\([^ ]*\).*/\1/p' | head -n 1)

  set --
  [ -r "$stdout" ] && set -- "$@" "$stdout"
  [ -r "$stderr" ] && [ "$stderr" != "$stdout" ] && set -- "$@" "$stderr"
  [ $# -gt 0 ] || return 0

  cluster=${DENPEX_CLUSTER:-${SLURM_CLUSTER_NAME:-slurm}}
  # The job id is the idempotency key: a re-run of this epilog is not reported twice.
  timeout 60 "${DENPEX_BIN:-denpex}" report "$@" \
    --url "$DENPEX_URL" \
    --secret-file "${DENPEX_SECRET_FILE:-/etc/denpex/webhook-secret}" \
    --job-id "$cluster-$job" \
    --job-name "${SLURM_JOB_NAME:-$name}" \
    --cluster "$cluster" \
    --user "${SLURM_JOB_USER:-unknown}" \
    --exit-code "$code" \
    >/dev/null 2>&1
}

main || true
exit 0
