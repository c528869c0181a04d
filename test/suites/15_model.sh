#!/usr/bin/env bash
# The short model-based random test of the test command: about 60 s of
# random calls from a client, an operator and the superuser in several
# sessions, each answer checked against an executable model of the claim
# state machine, then a concurrent phase on shared keys that checks the
# invariants.  The long run: test/model/run.sh --seconds 1800.
# IDEM_MODEL_SECONDS and IDEM_MODEL_SEED override the length and the seed.
set -euo pipefail
args=(--seconds "${IDEM_MODEL_SECONDS:-60}")
[ -n "${IDEM_MODEL_SEED:-}" ] && args+=(--seed "$IDEM_MODEL_SEED")
[ -n "${IDEM_MODEL_SKIP:-}" ] && args+=(--skip "$IDEM_MODEL_SKIP")
exec "$(dirname "$0")/../model/run.sh" "${args[@]}"
