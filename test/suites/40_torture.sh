#!/usr/bin/env bash
# The short fault torture run of the test command: a primary and a
# synchronous standby of its own, >= 16 clients, crashes, restarts, worker
# kills, client kills and one failover, then the invariants
# (docs/dev/torture.md).  The long run: test/torture/run.sh --long.
exec "$(dirname "$0")/../torture/run.sh" --short
