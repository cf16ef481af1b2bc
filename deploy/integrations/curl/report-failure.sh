#!/bin/sh
# Report a failed job to Denpex with nothing but sh, openssl and curl.
#
#   DENPEX_URL=https://denpex.example.com DENPEX_SECRET_FILE=/etc/denpex/webhook-secret \
#     ./report-failure.sh body.json
#
# body.json is the report (see docs/webhooks.md), for example:
#   {"job_id": "4242", "job_name": "llama-70b", "cluster": "prod", "exit_code": 137,
#    "log": "...the end of the job's output..."}
#
# The signature is the hex HMAC-SHA256 of "v1:<unix seconds>:<body bytes>" with the shared
# secret, sent as "X-Denpex-Signature: v1=<hex>" next to "X-Denpex-Timestamp: <unix seconds>".
# The server refuses timestamps more than five minutes off its clock.
set -eu

body_file=${1:?usage: report-failure.sh BODY.json}
url=${DENPEX_URL:?set DENPEX_URL to the Denpex server}
secret_file=${DENPEX_SECRET_FILE:?set DENPEX_SECRET_FILE to the file holding the webhook secret}

secret=$(cat "$secret_file")
ts=$(date +%s)
# Note: -hmac puts the secret on openssl's command line, visible to other users of this host
# through ps for the instant openssl runs. Use `denpex report` where that matters.
sig=$({ printf 'v1:%s:' "$ts"; cat "$body_file"; } \
  | openssl dgst -sha256 -hmac "$secret" | sed 's/^.*= //')

exec curl --silent --show-error --fail-with-body --max-time 30 \
  -X POST "${url%/}/webhooks/job-failure" \
  -H 'Content-Type: application/json' \
  -H "X-Denpex-Timestamp: $ts" \
  -H "X-Denpex-Signature: v1=$sig" \
  --data-binary "@$body_file"
