#!/usr/bin/env bash
# The fuzzers' saved inputs, replayed: the committed seed corpus and every
# input a fuzzing run found (test/fuzz/regress/), through the canonical-JSON
# toolkit in-process under AddressSanitizer, with the checks the fuzzer
# makes (PostgreSQL's json parser decides what is json; canonical forms are
# fixed points, valid UTF-8, hashed alike) and the differential test
# against npm canonicalize (test/fuzz/README.md).  The toolkit's C does not
# depend on the major, so it runs once, on the host's PostgreSQL 15
# headers, with the suite of 15.  Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../fuzz" || exit 1
if [ -n "${IDEM_PG_MAJOR:-}" ] && [ "$IDEM_PG_MAJOR" != 15 ]; then
	echo "runs with the suites of 15 (the toolkit's C is the same on every major)"
	echo "0 passed, 0 failed"
	exit 0
fi
exec ./run.sh replay
