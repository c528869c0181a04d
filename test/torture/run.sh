#!/usr/bin/env bash
# idem_gate fault torture: one command.
#   test/torture/run.sh [--short | --long] [--duration S] [--clients N]
#                       [--seed N] [--broken MODE] [--keep]
# Starts its own throwaway primary + synchronous standby as user postgres on
# private loopback ports under /tmp, runs the load and the faults, checks the
# invariants, cleans up, and ends with "N passed, N failed" (non-zero exit on
# any violation).  Needs idem_gate built and installed (make install).
# See docs/dev/torture.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
# scripts/test.sh sets IDEM_PG_BIN (and IDEM_PG_AS_POSTGRES) to run another
# major, which it has installed idem_gate into itself
BIN=${IDEM_PG_BIN:-/usr/lib/postgresql/15/bin}

if [ "$(id -u)" -ne 0 ]; then
	echo "run.sh: run as root (the clusters run as user postgres via runuser)" >&2
	echo "0 passed, 1 failed"; exit 1
fi
missing=()
[ -x "$PY" ] || missing+=(python3)
"$PY" -c 'import psycopg2' 2>/dev/null || missing+=(python3-psycopg2)
if [ -z "${IDEM_PG_BIN:-}" ]; then
	[ -x "$BIN/initdb" ] || missing+=(postgresql-15)
	[ -f /usr/share/postgresql/15/extension/amcheck.control ] || missing+=(postgresql-contrib)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "run.sh: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
if [ -z "${IDEM_PG_BIN:-}" ] && [ ! -f /usr/share/postgresql/15/extension/idem_gate.control ]; then
	echo "run.sh: idem_gate is not installed: run 'make with_llvm=no && make install with_llvm=no' first" >&2
	echo "0 passed, 1 failed"; exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" "$here/torture.py" "$@"
