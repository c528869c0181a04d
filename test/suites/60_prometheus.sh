#!/usr/bin/env bash
# Monitoring suite: Debian's prometheus-postgres-exporter with
# contrib/prometheus/queries.yaml against a running server with idem_gate
# installed in $PGDATABASE (libpq variables PGHOST, PGPORT, PGUSER superuser,
# PGDATABASE), as a monitoring role holding only the grants docs/operations.md's
# "Monitoring" section lists.  It scrapes /metrics before and after claims
# made here and checks that every idem_gate series exists and moves; points
# the exporter at a database without the extension too (it keeps serving,
# no scrape error; a naive query file does error there, which shows that
# database is scraped); runs the alert rules' promtool unit tests, the
# dashboard check and the META.json check.  Installs the Debian packages it
# needs.  Ends with one line "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
QUERIES=$ROOT/contrib/prometheus/queries.yaml

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
notok() { failed=$((failed + 1)); echo "not ok - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else notok "$what"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
fatal() { notok "$*"; finish; }

# --- packages: prometheus-postgres-exporter, promtool (package prometheus) --
need=()
for p in prometheus-postgres-exporter prometheus python3-yaml; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || fatal "needs the Debian packages ${need[*]} (run as root to install them)"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } \
		>/tmp/idem_prom_apt.$$ 2>&1 || { cat /tmp/idem_prom_apt.$$; fatal "could not install ${need[*]}"; }
	rm -f /tmp/idem_prom_apt.$$
fi
EXPORTER=/usr/bin/prometheus-postgres-exporter

: "${PGHOST:=127.0.0.1}" "${PGPORT:=5432}" "${PGUSER:=postgres}" "${PGDATABASE:=postgres}"
export PGHOST PGPORT PGUSER PGDATABASE
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
sql -c "SELECT 1 FROM pg_extension WHERE extname = 'idem_gate'" | grep -q 1 ||
	fatal "idem_gate is not installed in database $PGDATABASE"

TAG=$$
ROLE=idem_prom_$TAG
NOEXT=idem_prom_noext_$TAG
WF=prom_wf_$TAG
WF2=prom_done_$TAG
TMP=$(mktemp -d /tmp/idem_prom.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	sql -c "DELETE FROM idem_gate.claims WHERE workflow IN ('$WF', '$WF2')" >/dev/null 2>&1
	sql -c "REVOKE ALL ON ALL TABLES IN SCHEMA idem_gate FROM $ROLE" \
		-c "REVOKE ALL ON FUNCTION idem_gate.stats_counters() FROM $ROLE" \
		-c "REVOKE ALL ON SCHEMA idem_gate FROM $ROLE" >/dev/null 2>&1
	sql -d postgres -c "DROP DATABASE IF EXISTS $NOEXT" -c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

[ "$(sql -c "SELECT extversion FROM pg_extension WHERE extname = 'idem_gate'")" != 1.0 ] ||
	fatal "idem_gate in $PGDATABASE is at 1.0: the monitoring needs 1.1 (ALTER EXTENSION idem_gate UPDATE)"

# the monitoring role, with the grants of docs/operations.md's "Monitoring" section
sql -d postgres -c "CREATE ROLE $ROLE LOGIN IN ROLE pg_monitor" -c "CREATE DATABASE $NOEXT" ||
	fatal "could not create the monitoring role and the database without idem_gate"
sql -c "GRANT USAGE ON SCHEMA idem_gate TO $ROLE" \
	-c "GRANT SELECT ON idem_gate.stats, idem_gate.workflow_stats TO $ROLE" \
	-c "GRANT EXECUTE ON FUNCTION idem_gate.stats_counters() TO $ROLE" ||
	fatal "could not grant the monitoring role"

# a free loopback port for each exporter
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
scrape() {
	python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())' \
		"http://127.0.0.1:$1/metrics"
}
# start_exporter QUERIES LOG -> sets $port; DSN as the monitoring role, the
# main database first, the one without idem_gate found by auto-discovery
start_exporter() {
	port=$(free_port)
	DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$ROLE dbname=$PGDATABASE sslmode=disable" \
		"$EXPORTER" --web.listen-address="127.0.0.1:$port" --extend.query-path="$1" \
		--auto-discover-databases --include-databases="$PGDATABASE,$NOEXT" >"$2" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 50); do
		scrape "$port" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	cat "$2"
	return 1
}
# value FILE METRIC LABEL-REGEX: the value of the one series matching
value() {
	grep -E "^$2\{" "$1" | grep -E "$3" | awk '{print $NF}' | head -1
}
has_series() { [ -n "$(value "$@")" ]; }
# moved FILE1 FILE2 METRIC LABELS DELTA: the value grew by exactly DELTA
moved() {
	local a b
	a=$(value "$1" "$3" "$4"); b=$(value "$2" "$3" "$4")
	[ -n "$a" ] && [ -n "$b" ] && python3 -c "import sys; sys.exit(0 if abs(float('$b') - float('$a') - $5) < 1e-9 else 1)"
}
gt() { python3 -c "import sys; sys.exit(0 if float('$1') > float('$2') else 1)" 2>/dev/null; }

start_exporter "$QUERIES" "$TMP/exporter.log" || fatal "the exporter did not start"
ok "prometheus-postgres-exporter $("$EXPORTER" --version 2>&1 | awk 'NR==1{print $3}') serves /metrics on 127.0.0.1:$port"
scrape "$port" >"$TMP/before" || fatal "first scrape failed"

# every series the queries file defines, named as the exporter names them
mapfile -t series < <(python3 - "$QUERIES" <<'EOF'
import sys, yaml
for ns, spec in yaml.safe_load(open(sys.argv[1])).items():
    labels = [n for c in spec["metrics"] for n, m in c.items() if m["usage"] == "LABEL"]
    for c in spec["metrics"]:
        for n, m in c.items():
            if m["usage"] != "LABEL":
                print(f"{ns}_{n} {' '.join(labels)}")
EOF
)
check "the queries file defines ${#series[@]} series" [ "${#series[@]}" -gt 20 ]

# claims of a workflow of our own: one in processing (plus a duplicate),
# one completed, one failed into needs_review; a second workflow with one
# completed claim; then a janitor pass
sql -c "SELECT idem_claim('k1', '$WF')" -c "SELECT idem_claim('k1', '$WF')" \
	-c "SELECT idem_claim('k2', '$WF')" -c "SELECT idem_complete('k2', '$WF')" \
	-c "SELECT idem_claim('k3', '$WF')" -c "SELECT idem_fail('k3', '$WF', NULL, 'boom', false)" \
	-c "SELECT idem_claim('k1', '$WF2')" -c "SELECT idem_complete('k1', '$WF2')" \
	-c "SELECT count(*) FROM idem_gate.janitor_run()" >/dev/null || fatal "could not make claims"
has_fp=$(sql -c "SELECT 1 FROM pg_attribute WHERE attrelid = 'idem_gate.stats'::regclass
	AND attname = 'fingerprint_mismatches'")
fp=0   # claims made by the fingerprint check: one new, one refused
if [ -n "$has_fp" ]; then
	fp=1
	sql -c "SELECT idem_claim_ex('k4', '$WF', NULL, 'fp-a', 'x')" >/dev/null
	sql -c "SELECT idem_claim_ex('k4', '$WF', NULL, 'fp-b', 'x')" >/dev/null 2>&1
fi
sleep 1
scrape "$port" >"$TMP/after" || fatal "second scrape failed"

db="datname=\"$PGDATABASE\""
for s in "${series[@]}"; do
	name=${s%% *}
	if [ "$name" = idem_gate_stats_fingerprint_mismatches_total ] && [ -z "$has_fp" ]; then
		check "$name absent while idem_gate.stats has no fingerprint_mismatches" \
			bash -c "! grep -q '^$name' '$TMP/after'"
		continue
	fi
	case " $s " in
	*" workflow "*) check "$name{$db, workflow=\"$WF\"} exported" has_series "$TMP/after" "$name" "$db.*workflow=\"$WF\"" ;;
	*) check "$name{$db} exported" has_series "$TMP/after" "$name" "$db" ;;
	esac
done
typed=$(grep -c '^# TYPE idem_gate_' "$TMP/after")
check "every idem_gate series has a TYPE line ($typed)" [ "$typed" -eq $((${#series[@]} - 1 + fp)) ]
check "counters are exported as counters" grep -q '^# TYPE idem_gate_stats_claims_new_total counter' "$TMP/after"
check "row figures are exported as gauges" grep -q '^# TYPE idem_gate_stats_rows_processing gauge' "$TMP/after"

# the counters moved by exactly the calls made
check "claims_new_total +$((4 + fp))" moved "$TMP/before" "$TMP/after" idem_gate_stats_claims_new_total "$db" $((4 + fp))
check "claims_in_flight_total +1" moved "$TMP/before" "$TMP/after" idem_gate_stats_claims_in_flight_total "$db" 1
check "completions_total +2" moved "$TMP/before" "$TMP/after" idem_gate_stats_completions_total "$db" 2
check "fails_needs_review_total +1" moved "$TMP/before" "$TMP/after" idem_gate_stats_fails_needs_review_total "$db" 1
check "rows_processing +$((1 + fp))" moved "$TMP/before" "$TMP/after" idem_gate_stats_rows_processing "$db" $((1 + fp))
check "rows_needs_review +1" moved "$TMP/before" "$TMP/after" idem_gate_stats_rows_needs_review "$db" 1
[ -n "$has_fp" ] && check "fingerprint_mismatches_total +1" moved "$TMP/before" "$TMP/after" \
	idem_gate_stats_fingerprint_mismatches_total "$db" 1
passes_b=$(value "$TMP/before" idem_gate_stats_janitor_passes_total "$db")
passes_a=$(value "$TMP/after" idem_gate_stats_janitor_passes_total "$db")
check "janitor_passes_total grew ($passes_b -> $passes_a)" gt "$passes_a" "$passes_b"
age=$(value "$TMP/after" idem_gate_stats_last_pass_age_seconds "$db")
check "last_pass_age_seconds is recent after a pass ($age s)" gt 30 "$age"
check "naptime_seconds matches idem_gate.naptime" \
	[ "$(value "$TMP/after" idem_gate_stats_naptime_seconds "$db")" = \
	  "$(sql -c "SELECT setting FROM pg_settings WHERE name = 'idem_gate.naptime'")" ]
check "available is 1 (preloaded)" [ "$(value "$TMP/after" idem_gate_stats_available "$db")" = 1 ]
wf="$db.*workflow=\"$WF\""
check "workflow_stats rows_processing{workflow} is $((1 + fp))" \
	[ "$(value "$TMP/after" idem_gate_workflow_stats_rows_processing "$wf")" = $((1 + fp)) ]
check "workflow_stats rows_needs_review{workflow} is 1" \
	[ "$(value "$TMP/after" idem_gate_workflow_stats_rows_needs_review "$wf")" = 1 ]
check "workflow_stats oldest_processing_age_seconds{workflow} > 0" \
	gt "$(value "$TMP/after" idem_gate_workflow_stats_oldest_processing_age_seconds "$wf")" 0
check "workflow_stats oldest_needs_review_age_seconds{workflow} > 0" \
	gt "$(value "$TMP/after" idem_gate_workflow_stats_oldest_needs_review_age_seconds "$wf")" 0
check "a workflow with nothing in processing has oldest_processing_age_seconds 0" \
	[ "$(value "$TMP/after" idem_gate_workflow_stats_oldest_processing_age_seconds "$db.*workflow=\"$WF2\"")" = 0 ]
# the view and the exporter agree
check "rows_needs_review equals the view's" [ "$(value "$TMP/after" idem_gate_stats_rows_needs_review "$db")" = \
	"$(sql -c "SELECT rows_needs_review FROM idem_gate.stats")" ]

# the database without idem_gate: scraped, no idem_gate series, no error
check "no idem_gate series for the database without the extension" \
	bash -c "! grep -E '^idem_gate_[a-z_]+\{[^}]*datname=\"$NOEXT\"' '$TMP/after'"
check "pg_exporter_last_scrape_error 0 with a database without idem_gate" \
	[ "$(grep -E '^pg_exporter_last_scrape_error ' "$TMP/after" | awk '{print $2}')" = 0 ]
check "pg_up 1" [ "$(grep -E '^pg_up ' "$TMP/after" | awk '{print $2}')" = 1 ]
check "the exporter logged no query error" bash -c "! grep -qi 'error running query' '$TMP/exporter.log'"
# the control: a query that reads the view without the guard errors in
# that database, yet the exporter keeps serving
cat >"$TMP/naive.yaml" <<'EOF'
idem_gate_naive:
  query: "SELECT current_database() AS datname, rows_processing FROM idem_gate.stats"
  metrics:
    - datname: {usage: "LABEL", description: "database"}
    - rows_processing: {usage: "GAUGE", description: "rows"}
EOF
if start_exporter "$TMP/naive.yaml" "$TMP/naive.log" && scrape "$port" >"$TMP/naive" 2>/dev/null; then
	check "control: an unguarded query sets pg_exporter_last_scrape_error 1 there" \
		[ "$(grep -E '^pg_exporter_last_scrape_error ' "$TMP/naive" | awk '{print $2}')" = 1 ]
	check "control: the exporter still serves the database with idem_gate" \
		has_series "$TMP/naive" idem_gate_naive_rows_processing "$db"
else
	notok "control exporter did not serve"
fi

# alert rules, dashboard, META.json
out=$(cd "$ROOT/contrib/prometheus" && promtool test rules idem_gate.rules.test.yml 2>&1)
check "promtool test rules idem_gate.rules.test.yml" grep -q SUCCESS <<<"$out" || echo "$out"
out=$(promtool check rules "$ROOT/contrib/prometheus/idem_gate.rules.yml" 2>&1)
check "promtool check rules idem_gate.rules.yml" grep -q SUCCESS <<<"$out" || echo "$out"
out=$(python3 "$ROOT/test/ops/check_metrics.py" "$QUERIES" "$ROOT/contrib/grafana/idem_gate.json" \
	"$ROOT/contrib/prometheus/idem_gate.rules.yml" 2>&1)
check "dashboard and rules name only exported series ($(tail -1 <<<"$out"))" grep -q ' 0 failed$' <<<"$out" ||
	grep '^not ok' <<<"$out"
out=$(python3 "$ROOT/test/ops/validate_meta.py" "$ROOT/META.json" 2>&1)
check "META.json is valid PGXN Meta Spec 1.0.0 ($(tail -1 <<<"$out"))" grep -q ' 0 failed$' <<<"$out" ||
	grep '^not ok' <<<"$out"

finish
