#!/bin/sh
# Slurm: run a job step under `denpex watch`, so its first failure or degradation is reported
# while the job still runs (the epilog reports only after the job ended).
#
# Use it in a batch script in place of `srun`, with the same arguments:
#   denpex-watch-srun.sh --ntasks-per-node=8 python train.py
# The step's output is passed through unchanged and read as it is written; the step's exit code
# is this script's. Reports go to the Denpex server's job-failure webhook, under the same job id
# as the epilog's ("<cluster>-<jobid>"), so the final report and the epilog's are one message.
# To follow per-rank files instead of the step's output, set DENPEX_WATCH_PATHS, e.g.
#   DENPEX_WATCH_PATHS='logs/rank*.log'   (a glob: files that appear later are followed too)
#
# Settings, in /etc/default/denpex-epilog (sourced if present) or the environment:
#   DENPEX_URL          the Denpex server, e.g. https://denpex.example.com (unset: the reports
#                       are JSON lines on standard output, and the step's output goes to
#                       standard error)
#   DENPEX_SECRET_FILE  default /etc/denpex/webhook-secret
#   DENPEX_CLUSTER      default $SLURM_CLUSTER_NAME
#   DENPEX_BIN          default denpex
#   DENPEX_WATCH_METRICS_PORT  serve Prometheus counters on this port (see deploy/watch-alerts.yaml)
#
# Needs the `denpex` command on the batch host, installed from a wheel built from the Denpex
# repository (the distribution is denpex-bot). If it is missing, the step runs unwatched.

[ -r /etc/default/denpex-epilog ] && . /etc/default/denpex-epilog
bin=${DENPEX_BIN:-denpex}
if ! command -v "$bin" >/dev/null 2>&1; then
  echo "denpex-watch-srun: $bin not found; running the step unwatched" >&2
  exec srun "$@"
fi

# Build the command line in front of the step's: options first, then `-- srun ARGS...`.
set -- -- srun "$@"
[ -n "${DENPEX_WATCH_METRICS_PORT:-}" ] && set -- --metrics-port "$DENPEX_WATCH_METRICS_PORT" "$@"
[ -n "${DENPEX_CLUSTER:-}" ] && set -- --cluster "$DENPEX_CLUSTER" "$@"
if [ -n "${DENPEX_URL:-}" ]; then
  set -- --url "$DENPEX_URL" --secret-file "${DENPEX_SECRET_FILE:-/etc/denpex/webhook-secret}" "$@"
else
  set -- --json "$@"
fi
if [ -n "${DENPEX_WATCH_PATHS:-}" ]; then
  set -f  # the patterns are for the watch to expand, now and as files appear
  # shellcheck disable=SC2086  # a list of patterns, split on purpose
  set -- $DENPEX_WATCH_PATHS "$@"
  set +f
fi
# The watch runs the step itself: it ends when the step ends and exits with the step's code.
exec "$bin" watch "$@"
