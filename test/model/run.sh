#!/usr/bin/env bash
# idem_gate model-based random test: one command.
#   test/model/run.sh [--seconds S] [--seed N] [--steps N] [--sessions N]
#                     [--serial] [--skip CASE,...] [--keep]
#                     [--ext-version V [--update]]
# Runs against the server given by PGHOST/PGPORT/PGUSER/PGDATABASE (PGUSER a
# superuser; idem_gate 1.2 built and installed on that server).  Creates its
# own database and roles, drops them at the end, and ends with one line
# "N passed, N failed" (non-zero exit on a failure).
#   short run (the test command, test/suites/15_model.sh): --seconds 60
#   long run, on demand:                                   --seconds 1800
# A failure prints the seed, the session, the step and the history of the
# key involved; replay it with the same --seed (add --steps N --serial to
# stop at that step with the sessions interleaved in one thread).
# See docs/dev/model.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3

missing=()
[ -x "$PY" ] || missing+=(python3)
"$PY" -c 'import psycopg2' 2>/dev/null || missing+=(python3-psycopg2)
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "run.sh: install ${missing[*]}" >&2
		echo "0 passed, 1 failed"; exit 1
	fi
	echo "run.sh: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" "$here/model.py" "$@"
