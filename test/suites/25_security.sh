#!/usr/bin/env bash
# The attack matrix (test/security/matrix.py, docs/security.md): every
# actor x lever x entry point x extension table x kind of attached code,
# plus the background janitor under a database owner's settings, LISTEN
# and the extension scripts.  Against the server that the libpq variables
# name (a superuser in PGUSER); it makes and drops its own databases and
# roles.  Ends with one line "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec /usr/bin/python3 "$ROOT/test/security/matrix.py" "$@"
