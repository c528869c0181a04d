#!/usr/bin/env bash
# The end-to-end drills (e2e.sh) on every pinned n8n, one after the other:
# 2.8.4 (the system's Node 20) and the newest pin, 2.41.1 (Node 24 from the
# npm registry), see install_n8n.sh.  NOT part of CI: it installs n8n.
#
#   test/n8n/e2e-all.sh                  # both versions
#   test/n8n/e2e-all.sh --screenshots    # also refresh docs/img/ (from the newest version) and
#                                        # check the editor's import route on every version
#   N8N_VERSIONS="2.8.4 2.40.7 2.41.1" test/n8n/e2e-all.sh   # other versions, oldest first
#
# With idem_gate 1.2 each run includes the inbox drills in headless Chromium
# (inbox-a..e, test/n8n/inbox-browser.mjs; test/n8n/browser.sh runs only
# those), and --screenshots also refreshes docs/img/n8n-inbox-*.png.
#
# Every other variable of e2e.sh (PG_CONFIG, PG_BIN, E2E_ONLY, IDEM_EDITION, IDEM_E2E_*)
# is passed through.  Each version's output goes to the terminal as it runs,
# then one line per version and, last, the sum: "N passed, N failed".
# Exit status: 0 when every drill of every version passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
shots=
if [ "${1:-}" = --screenshots ]; then shots=--screenshots; shift; fi
versions=${N8N_VERSIONS:-$("$HERE/install_n8n.sh" --pins)}
newest=$(printf '%s\n' $versions | tail -n1)

total_pass=0
total_fail=0
summary=()
for v in $versions; do
  out=$(mktemp /tmp/idem_gate_e2e_all.XXXXXX)
  args=()
  # the pictures come from the newest version; the others get the editor check
  if [ -n "$shots" ]; then
    if [ "$v" = "$newest" ]; then args+=(--screenshots); else args+=(--editor); fi
  fi
  echo "=== n8n $v: test/n8n/e2e.sh ${args[*]:-}" >&2
  t0=$(date +%s)
  N8N_VERSION="$v" N8N_CACHE= "$HERE/e2e.sh" "${args[@]}" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  secs=$(( $(date +%s) - t0 ))
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n1)
  if [ -n "$line" ]; then
    p=$(awk '{print $1}' <<<"$line"); f=$(awk '{print $3}' <<<"$line")
  else
    p=0; f=1; line="no result (exit $rc)"
  fi
  # a run that printed all passes but exited non-zero still failed
  [ "$rc" = 0 ] || [ "$f" != 0 ] || { f=1; line="$line, but exit $rc"; }
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
  summary+=("n8n $v: $line (${secs}s)")
  rm -f "$out"
done
echo
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
