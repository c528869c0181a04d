#!/usr/bin/env bash
# Print the README's block that creates the n8n database role and grants it the
# gate (marked <!-- run: n8n-role --> in README.md's "Security"), with the
# placeholders it names replaced: the role n8n_gate by $1, the password
# change-me by $2.  docs/n8n.md repeats the block (step 2); it must be
# identical, so that the lines a reader copies from either are the tested ones.
set -euo pipefail
role="${1:?usage: doc_grants.sh ROLE PASSWORD}"
password="${2:?usage: doc_grants.sh ROLE PASSWORD}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
readme=$(node "$here/doc_block.mjs" "$root/README.md" n8n-role)
docs=$(node "$here/doc_block.mjs" "$root/docs/n8n.md" n8n-role)
if [ "$readme" != "$docs" ]; then
	echo "the n8n-role blocks of README.md and docs/n8n.md differ; keep them identical:" >&2
	diff <(printf '%s\n' "$readme") <(printf '%s\n' "$docs") >&2 || true
	exit 1
fi
grep -q "'change-me'" <<<"$readme" || { echo "README.md run:n8n-role lost its 'change-me' placeholder" >&2; exit 1; }
grep -qw n8n_gate <<<"$readme" || { echo "README.md run:n8n-role lost its role n8n_gate" >&2; exit 1; }
printf '%s\n' "$readme" | sed -E -e "s/\\bn8n_gate\\b/$role/g" -e "s/'change-me'/'$password'/"
