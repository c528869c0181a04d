#!/usr/bin/env bash
# Who may own the secret file of keyed workflows (idem_gate.secret_file),
# as PostgreSQL asks of its SSL key: the database user with 0600 or less,
# or root with 0640 or less; any other owner or wider permissions are
# refused, naming the file.  pg_regress cannot make these files (its server
# writes them as the database user); this suite runs as root and makes one
# of each owner and mode, where the server under test (PGHOST, PGPORT, a
# superuser in PGUSER, idem_gate preloaded and installed in PGDATABASE) reads them: under TMPDIR,
# which test.sh shares with the Debian root of 17 and 18.  Ends with one
# line "N passed, N failed".
set -uo pipefail
as_postgres=${IDEM_PG_AS_POSTGRES:-runuser -u postgres --}

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
notok() { failed=$((failed + 1)); echo "not ok - $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@" 2>&1; }

if [ "$(id -u)" != 0 ]; then
	notok "runs as root (it makes files owned by root and by another user)"
	finish
fi
uid=$($as_postgres id -u)
gid=$($as_postgres id -g)
other=65534
dir=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_secret_file.XXXXXX")
chmod 755 "$dir"
trap 'q -c "ALTER SYSTEM RESET idem_gate.secret_file" -c "SELECT pg_reload_conf()" >/dev/null; rm -rf "$dir"' EXIT

# try ID OWNER:GROUP MODE WANT: a file listing secret ID, owned and
# permitted so; WANT accepted (the server then uses it) or refused
try() {
	local id=$1 owner=$2 mode=$3 want=$4 f="$dir/$1" out current
	printf '%s %s\n' "$id" "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$f"
	chown "$owner" "$f"
	chmod "$mode" "$f"
	out=$(q -c "ALTER SYSTEM SET idem_gate.secret_file = '$f'")
	if [ "$want" = accepted ]; then
		q -c "SELECT pg_reload_conf()" >/dev/null
		for _ in $(seq 50); do
			current=$(q -c "SELECT secret_id FROM idem_gate.secret_ids() WHERE file_order = 1")
			[ "$current" = "$id" ] && break
			sleep 0.1
		done
		if [ -z "$out" ] && [ "$current" = "$id" ]; then
			ok "a file owned by $owner with mode $mode is accepted"
		else
			notok "a file owned by $owner with mode $mode is accepted: ${out:-the server reads ${current:-no secret}}"
		fi
	else
		if [[ "$out" == *"has group or world access, or belongs to another user"* ]]; then
			ok "a file owned by $owner with mode $mode is refused"
		else
			notok "a file owned by $owner with mode $mode is refused: ${out:-accepted}"
		fi
	fi
}

try own600 "$uid:$gid" 600 accepted
try own400 "$uid:$gid" 400 accepted
try own640 "$uid:$gid" 640 refused
try own604 "$uid:$gid" 604 refused
try root640 "0:$gid" 640 accepted
try root440 "0:$gid" 440 accepted
try root660 "0:$gid" 660 refused
try root644 "0:$gid" 644 refused
try other600 "$other:$gid" 640 refused
try other040 "$other:$gid" 040 refused
finish
