#!/bin/sh
# Slurm epilog: report failed jobs to Denpex, sending only the diagnosis (never the log).
#
# Install (slurm.conf), on the controller so it runs once per job:
#   EpilogSlurmctld=/etc/slurm/denpex-epilog.sh
# with denpex-slurm-lib.sh in the same directory. The controller must see the jobs' output
# files (a shared file system). Where it does not, use
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
# A missing library must not fail the epilog (that drains the node): say so in syslog, exit 0.
lib=$(dirname "$0")/denpex-slurm-lib.sh
[ -r "$lib" ] || { logger -t denpex -- "$lib is missing: $0 did nothing" 2>/dev/null; exit 0; }
. "$lib"

main() {
  job=${SLURM_JOB_ID:-}
  [ -n "$job" ] || return 0
  failed_exit_code || return 0  # only failed jobs
  # As a node epilog, report from the batch host only, not once per node.
  if [ -n "${SLURMD_NODENAME:-}" ]; then
    batch_host=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*BatchHost=\([^ ]*\).*/\1/p')
    [ -z "$batch_host" ] || [ "$batch_host" = "$SLURMD_NODENAME" ] || return 0
  fi
  [ -n "${DENPEX_URL:-}" ] || return 0

  info=$(scontrol show job "$job" 2>/dev/null) || return 0
  output_files "$info"
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
