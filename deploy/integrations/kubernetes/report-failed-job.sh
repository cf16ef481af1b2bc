#!/bin/sh
# Report a failed Kubernetes Job to Denpex from outside the pod, with `kubectl logs`.
#
#   DENPEX_URL=https://denpex.example.com DENPEX_SECRET_FILE=./webhook-secret \
#     ./report-failed-job.sh NAMESPACE JOB [CLUSTER]
#
# Waits for the Job to finish; if it failed, saves every container's log of its pods and runs
# `denpex report` on them, so only the redacted diagnosis leaves this machine. Run it as a step
# after `kubectl apply` in a pipeline, or from a controller that watches Jobs.
set -eu

namespace=${1:?usage: report-failed-job.sh NAMESPACE JOB [CLUSTER]}
job=${2:?usage: report-failed-job.sh NAMESPACE JOB [CLUSTER]}
cluster=${3:-$(kubectl config current-context)}
: "${DENPEX_URL:?set DENPEX_URL}" "${DENPEX_SECRET_FILE:?set DENPEX_SECRET_FILE}"

# Wait for either condition; whichever comes first ends the wait.
kubectl -n "$namespace" wait "job/$job" --for=condition=complete --timeout=24h &
complete=$!
kubectl -n "$namespace" wait "job/$job" --for=condition=failed --timeout=24h &
failed=$!
while kill -0 "$complete" 2>/dev/null && kill -0 "$failed" 2>/dev/null; do sleep 1; done
kill "$complete" "$failed" 2>/dev/null || true

status=$(kubectl -n "$namespace" get "job/$job" \
  -o jsonpath='{.status.conditions[?(@.status=="True")].type}')
case "$status" in
  *Failed*) ;;
  *) echo "job/$job did not fail ($status): nothing to report"; exit 0 ;;
esac

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
uid=$(kubectl -n "$namespace" get "job/$job" -o jsonpath='{.metadata.uid}')
for pod in $(kubectl -n "$namespace" get pods -l "batch.kubernetes.io/job-name=$job" -o name); do
  kubectl -n "$namespace" logs "$pod" --all-containers --prefix --timestamps \
    > "$dir/${pod#pod/}.log" 2>/dev/null || true
done
exit_code=$(kubectl -n "$namespace" get pods -l "batch.kubernetes.io/job-name=$job" \
  -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.exitCode}' || true)

set -- "$dir"/*.log
[ -e "$1" ] || { echo "no logs found for job/$job"; exit 1; }
denpex report "$@" \
  --url "$DENPEX_URL" --secret-file "$DENPEX_SECRET_FILE" \
  --job-id "k8s-$uid" --job-name "$job" --cluster "$cluster" \
  ${exit_code:+--exit-code "$exit_code"}
