#!/usr/bin/env bash
# The inbox and alerts in a real n8n, driven by headless Chromium (NOT part of
# CI: it installs n8n).  It is e2e.sh with only the inbox drills
# (test/n8n/inbox-browser.mjs): the documented set-up of docs/n8n.md ("Gate a
# webhook", "Operate the inbox", "Alerts") as written, then
#   inbox-a  n8n killed during the side effect -> needs_review -> alert -> the
#            page -> resolve completed -> a duplicate with that receipt
#   inbox-b  failing 5 times -> alert -> replay from the page, in the history
#   inbox-c  resolve retry -> replay; 401, reason, form token, per-workflow access
#   inbox-d  the list's load time with 100 items
#   inbox-e  the alerts after a PostgreSQL restart (the digest)
#   inbox-f  a team through nginx (examples/nginx/inbox.conf): two operators,
#            each named in the history; a forged identity header refused
#   inbox-g  alerts: a claim failing 6 times announced once; none for a
#            workflow the inbox role may not see
#   inbox-h  bulk decisions: 20 claims by filter (retry), 3 ticked (release),
#            one audit row each naming the person; a replayed or changed
#            confirmation refused
#   inbox-i  paging through 1,200 claims, each once and in order; search by
#            key and key prefix; a bad age 400
#   inbox-j  the link to a claim's n8n execution, served by n8n
#   inbox-k  bulk bad input answered per key (not_found, already_decided,
#            not_permitted); forged, foreign or oversized forms refused
# Debian's chromium (apt-get install chromium) through puppeteer-core from the
# npm registry, which downloads no browser.  Needs idem_gate 1.2 (idem_gate.inbox).
#
#   test/n8n/browser.sh                     # the newest pinned n8n (2.41.1)
#   N8N_VERSION=2.8.4 test/n8n/browser.sh   # another
#   test/n8n/browser.sh --screenshots       # also writes docs/img/n8n-inbox-*.png
#   test/n8n/browser.sh --all               # every pinned version, one line each
#
# The screenshots go to $E2E_INBOX_SHOTS (default /tmp/idem_gate_inbox_shots-<version>).
# Every variable of e2e.sh applies (PG_CONFIG, PG_BIN, IDEM_E2E_*).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
args=()
all=0
for a in "$@"; do
  case "$a" in
    --all) all=1 ;;
    --screenshots) args+=(--inbox-screenshots) ;;
    *) echo "usage: $0 [--screenshots] [--all]" >&2; exit 2 ;;
  esac
done
export E2E_ONLY="${E2E_ONLY:-inbox}"
run_one() {
  local v=$1 t0 rc
  t0=$(date +%s)
  export E2E_INBOX_SHOTS="${E2E_INBOX_SHOTS_BASE:-/tmp/idem_gate_inbox_shots}-$v"
  N8N_VERSION="$v" N8N_CACHE= "$HERE/e2e.sh" "${args[@]}"
  rc=$?
  echo "n8n $v: browser drills exit $rc in $(( $(date +%s) - t0 )) s (screenshots in $E2E_INBOX_SHOTS)"
  return $rc
}
if [ "$all" = 1 ]; then
  rc=0
  for v in $("$HERE/install_n8n.sh" --pins); do run_one "$v" || rc=1; done
  exit $rc
fi
run_one "${N8N_VERSION:-$("$HERE/install_n8n.sh" --pins | awk '{print $NF}')}"
