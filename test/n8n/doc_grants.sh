#!/usr/bin/env bash
# Print the GRANT lines that docs/n8n.md recommends for the n8n database role,
# with the role name replaced by $1.  The tests run exactly these lines, so the
# documented privileges are the tested ones.
set -euo pipefail
role="${1:?usage: doc_grants.sh ROLE}"
doc="$(cd "$(dirname "$0")/../.." && pwd)/docs/n8n.md"
out=$(awk '/<!-- grants:begin/{f=1;next} /<!-- grants:end/{f=0} f && !/^```/' "$doc")
[ -n "$out" ] || { echo "no grants block in $doc" >&2; exit 1; }
printf '%s\n' "$out" | sed -E "s/\\bn8n_gate\\b/$role/g"
