# Sourced by the Citus suite: the interleavings of the isolation specs,
# run through the coordinator.  The isolation tester cannot drive them
# there: a session waits on a worker's row lock while its coordinator
# backend only waits for the network, which the tester does not see as
# blocked.  Here each session is a psql fed through a FIFO, and a step
# that must wait is checked to have no answer after a pause.
#
# Needs lib.sh, COORD and CITUS_BASE.

# s_open NAME: a session on the coordinator (answers in $CITUS_BASE/NAME.out)
s_open() {
	local fifo=$CITUS_BASE/$1.in
	rm -f "$fifo" "$CITUS_BASE/$1.out"
	mkfifo -m 666 "$fifo"
	as_pg "$CITUS_BIN/psql" -X -Atq -h "$CITUS_BASE" -p "$COORD" -d postgres \
		<"$fifo" >"$CITUS_BASE/$1.out" 2>&1 &
	eval "exec {S_$1}>\"\$fifo\""
}

# s_send NAME SQL: send a statement; s_close NAME: end the session
s_send() { local fd="S_$1"; echo "$2" >&"${!fd}"; }
s_close() { local fd="S_$1"; eval "exec ${!fd}>&-"; }

# s_lines NAME: how many answer lines the session has printed
s_lines() { wc -l <"$CITUS_BASE/$1.out" | tr -d ' '; }

# s_wait NAME N: wait (up to 30 s) for the session's Nth answer line
s_wait() {
	local i
	for i in $(seq 1 300); do
		[ "$(s_lines "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# s_answer NAME N: the session's Nth answer line
s_answer() { sed -n "${2}p" "$CITUS_BASE/$1.out"; }
