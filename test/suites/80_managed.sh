#!/usr/bin/env bash
# The managed edition (managed/idem_gate.sql), on a managed-like server of
# the major under test: see test/managed/run.sh.  Ends with one line
# "N passed, N failed".
set -uo pipefail
exec bash "$(dirname "$0")/../managed/run.sh"
