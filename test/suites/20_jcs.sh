#!/usr/bin/env bash
# Canonical JSON suite: RFC 8785 vectors (test/jcs/vectors, see its
# README.md), the ES6 number file regenerated and checked against its
# published checksums, the differential test against the canonicalize
# reference, the 'safe' number policy oracle and the 50 MB memory check.
# Needs a running server with idem_gate installed in $PGDATABASE (libpq
# environment variables), node and npm.  Reads nothing outside the
# repository.  Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../jcs" || exit 1

if ! { npm ci --no-audit --no-fund --loglevel=error >/tmp/idem_jcs_npm.$$ 2>&1 ||
	   npm install --no-audit --no-fund --loglevel=error >>/tmp/idem_jcs_npm.$$ 2>&1; }; then
	cat /tmp/idem_jcs_npm.$$
	rm -f /tmp/idem_jcs_npm.$$
	echo "not ok - npm could not install the test dependencies"
	echo "0 passed, 1 failed"
	exit 1
fi
rm -f /tmp/idem_jcs_npm.$$
exec node run.mjs
