#!/usr/bin/env bash
# The documentation suite: every relative link of every Markdown file of
# the repository points to a file that exists, and every #anchor to a
# heading of its file (test/ops/check_links.py); the blocks marked
# <!-- run: NAME --> are safe to paste (test/ops/check_doc_blocks.py: no
# example address written over a working one, the reader's values taken
# from shell variables, the editing blocks run on a copy of examples/ with
# and without those variables); the README stays short
# (under 15 KB) and keeps the blocks that other suites run as written;
# src/ keeps to the layers src/README.md declares (scripts/layers.py: every
# file placed, no circle, at most one include or call running back up);
# the runbook docs/inbox-without-n8n.md runs as written, every block in
# order, as an operator's login on a scratch database of the test server
# (test/ops/check_runbook.py), and its check fails on a copy of the
# runbook with a block broken.  Needs python3, and for the runbook psql and
# the server of the libpq variables (PGHOST, PGPORT, PGUSER a superuser, as
# scripts/test.sh sets them).  Ends with one line "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
notok() { failed=$((failed + 1)); echo "not ok - $*"; }

# checker SCRIPT NOUN: a checker of test/ops/ that ends with its own
# "N passed, N failed", added to this suite's counts; its other lines
# shown except its passing ones
checker() {
	local script=$1 noun=$2 out rc last p f
	out=$(python3 "$ROOT/test/ops/$script" "$ROOT" 2>&1)
	rc=$?
	echo "$out" | grep -v '^[0-9]* passed, [0-9]* failed$' | grep -v '^ok - '
	last=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
	if [ -z "$last" ]; then
		echo "$out"
		notok "$script ran"
		return
	fi
	p=$(echo "$last" | awk '{print $1}')
	f=$(echo "$last" | awk '{print $3}')
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p))
	failed=$((failed + f))
	echo "# $p $noun pass, $f do not"
}

checker check_links.py "links"
checker check_doc_blocks.py "checks of the runnable blocks"
checker check_runbook.py "checks of the runbook without n8n"

# the runbook's check can fail: a copy whose decisions name another actor
# than the session's person, and whose next page starts at the last row
# again (>= for >), is refused on both counts
broken=$(mktemp /tmp/idem_runbook_broken.XXXXXX.md)
sed -e "s/:'reason', :'actor');/:'reason', 'somebody else');/" \
	-e 's/AND (since, workflow, key) > (/AND (since, workflow, key) >= (/' \
	"$ROOT/docs/inbox-without-n8n.md" >"$broken"
out=$(python3 "$ROOT/test/ops/check_runbook.py" "$ROOT" --doc "$broken" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && echo "$out" | grep -q '^not ok - .*naming .* as actor' &&
	echo "$out" | grep -q '^not ok - run:runbook-list run again shows the next page'; then
	ok "the runbook's check refuses a runbook with a broken decision and a broken cursor"
else
	echo "$out" | sed 's/^/# /'
	notok "the runbook's check refuses a runbook with a broken decision and a broken cursor"
fi
rm -f "$broken"

size=$(wc -c <"$ROOT/README.md")
if [ "$size" -lt 15000 ]; then ok "README.md is under 15 KB ($size bytes)"; else notok "README.md is under 15 KB ($size bytes)"; fi
for block in install n8n-role operator-role; do
	if grep -A1 -x "<!-- run: $block -->" "$ROOT/README.md" | sed -n 2p | grep -q '^```'; then
		ok "README.md keeps its run:$block block"
	else
		notok "README.md keeps its run:$block block"
	fi
done

if out=$(python3 "$ROOT/scripts/layers.py" 2>&1); then
	ok "src/ keeps to its layers ($(echo "$out" | tail -1))"
else
	echo "$out" | sed 's/^/# /'
	notok "src/ keeps to its layers"
fi

# the check sees a call back up that no #include shows: a base file that
# uses a function of the claim layer, declared by hand
probe=$(mktemp -d)
cp "$ROOT"/src/*.c "$ROOT"/src/*.h "$ROOT"/src/README.md "$probe"/
printf '\nextern void ig_claim_init(void);\nstatic void layers_probe(void) { ig_claim_init(); }\n' >> "$probe/base.c"
if out=$(python3 "$ROOT/scripts/layers.py" --src "$probe" 2>&1); then
	notok "the layers check refuses a call back up"
elif echo "$out" | grep -q '^upward: src/base.c (base) uses a name of src/claim.c (claim)$'; then
	ok "the layers check refuses a call back up"
else
	echo "$out" | sed 's/^/# /'
	notok "the layers check refuses a call back up"
fi
rm -rf "$probe"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
