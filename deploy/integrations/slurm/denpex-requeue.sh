#!/bin/sh
# Slurm: act on Denpex's advice for a failed job. Requeue it (it resumes from its last
# checkpoint), requeue it without the host Denpex blames, or stop the retries when the failure
# is deterministic or repeats.
#
# Install (slurm.conf), on the controller, which must see the jobs' output files:
#   EpilogSlurmctld=/etc/slurm/denpex-requeue.sh   (denpex-slurm-lib.sh in the same directory)
# It takes the place of denpex-epilog.sh: with DENPEX_URL set it also reports the job and waits
# for the server's advice, which knows the job's earlier runs (the same failure twice in a row is
# stopped); without DENPEX_URL it asks `denpex advise` on this machine (no history).
#
# Only jobs that allow it are requeued (Requeue=1: `sbatch --requeue`, or JobRequeue=1), and at
# most DENPEX_MAX_REQUEUES times (Slurm's own Restarts count). The batch script must resume from
# its last checkpoint by itself. What each advice does (the exit status of `denpex advise`):
#   0 restart            scontrol requeue
#   3 restart-excluding  scontrol requeuehold; scontrol update ExcNodeList=<old>,<hosts>;
#                        scontrol release (held in between, so it cannot start on the bad host)
#   4 stop               nothing: the retries stop here
#   5 investigate        nothing: a person decides (also when the log shows no failure)
# Every decision is logged to syslog (tag denpex-requeue) with the advice's sentence.
#
# Settings, in /etc/default/denpex-epilog (sourced if present) or the environment:
#   DENPEX_URL           the Denpex server (optional: without it, advice is local)
#   DENPEX_SECRET_FILE   default /etc/denpex/webhook-secret
#   DENPEX_CLUSTER       default $SLURM_CLUSTER_NAME
#   DENPEX_BIN           default denpex (epilogs run without a search PATH: give a full path)
#   DENPEX_MAX_REQUEUES  default 3
#   DENPEX_WAIT          seconds to wait for the server's advice, default 60
#
# An epilog that fails drains the node, so this script always exits 0.

PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin
[ -r /etc/default/denpex-epilog ] && . /etc/default/denpex-epilog
# A missing library must not fail the epilog (that drains the node): say so in syslog, exit 0.
lib=$(dirname "$0")/denpex-slurm-lib.sh
[ -r "$lib" ] || { logger -t denpex -- "$lib is missing: $0 did nothing" 2>/dev/null; exit 0; }
. "$lib"

say() {
  logger -t denpex-requeue -- "job ${job:-?}: $*" 2>/dev/null || true
}

field() {  # field NAME: the value of NAME= in the job's record
  printf '%s\n' "$info" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

main() {
  job=${SLURM_JOB_ID:-}
  [ -n "$job" ] || return 0
  failed_exit_code || return 0  # only failed jobs

  info=$(scontrol show job "$job" 2>/dev/null) || return 0
  set --
  output_files "$info"
  [ -r "$stdout" ] && set -- "$@" "$stdout"
  [ -r "$stderr" ] && [ "$stderr" != "$stdout" ] && set -- "$@" "$stderr"
  [ $# -gt 0 ] || { say "no readable output file: nothing to advise on"; return 0; }

  restarts=$(field Restarts)
  restarts=${restarts:-0}
  # A one-node job's host is known even when its log names none.
  host=
  [ "$(field NumNodes)" = 1 ] && host=$(field BatchHost)

  bin=${DENPEX_BIN:-denpex}
  wait=${DENPEX_WAIT:-60}
  if [ -n "${DENPEX_URL:-}" ]; then
    cluster=${DENPEX_CLUSTER:-${SLURM_CLUSTER_NAME:-slurm}}
    # One report per run: the job id keeps Slurm's id across requeues, so add the restart count.
    advice=$(timeout $((wait + 60)) "$bin" report "$@" ${host:+--host "$host"} \
      --url "$DENPEX_URL" \
      --secret-file "${DENPEX_SECRET_FILE:-/etc/denpex/webhook-secret}" \
      --job-id "$cluster-$job.$restarts" \
      --job-name "${SLURM_JOB_NAME:-$(field JobName)}" \
      --cluster "$cluster" \
      --user "${SLURM_JOB_USER:-unknown}" \
      --exit-code "$code" \
      --exit-code-advice --wait "$wait" 2>/dev/null)
    decision=$?
  else
    advice=$(timeout 120 "$bin" advise "$@" ${host:+--host "$host"} 2>/dev/null)
    decision=$?
  fi
  line=$(printf '%s\n' "$advice" | sed -n '/^[A-Z]/{p;q;}')
  hosts=$(printf '%s\n' "$advice" | sed -n 's/^exclude: //p')

  case $decision in
    0|3) ;;
    4) say "not requeued: $line"; return 0 ;;
    5) say "not requeued, a person decides: ${line:-no advice}"; return 0 ;;
    *) say "not requeued: denpex gave no advice (exit $decision)"; return 0 ;;
  esac
  if [ "$(field Requeue)" != 1 ]; then
    say "not requeued: the job does not allow requeueing (sbatch --requeue); advice: $line"
    return 0
  fi
  if [ "$restarts" -ge "${DENPEX_MAX_REQUEUES:-3}" ]; then
    say "not requeued: already requeued $restarts times (DENPEX_MAX_REQUEUES); advice: $line"
    return 0
  fi
  if [ "$decision" = 3 ] && [ -n "$hosts" ]; then
    excluded=$(field ExcNodeList)
    case $excluded in ""|"(null)") excluded=$hosts ;; *) excluded=$excluded,$hosts ;; esac
    scontrol requeuehold "$job" &&
      scontrol update JobId="$job" ExcNodeList="$excluded" &&
      scontrol release "$job" &&
      say "requeued without $hosts: $line"
  else
    scontrol requeue "$job" && say "requeued: $line"
  fi
}

main || true
exit 0
