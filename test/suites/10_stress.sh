#!/usr/bin/env bash
# The short stress run of the test command (the long one: CONTRIBUTING.md).
exec "$(dirname "$0")/../stress/run.sh"
