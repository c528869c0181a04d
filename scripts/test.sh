#!/usr/bin/env bash
# Run every idem_gate test suite on every supported PostgreSQL major.
#
#   scripts/test.sh              all suites on 15, 17 and 18
#   PG_MAJORS=17 scripts/test.sh all suites on one major (any of 15 17 18)
#   scripts/test.sh --quick      pg_regress, isolation and pgTAP only, on the
#                                host's 15 (or on PG_MAJORS if set)
#
# The suites: pg_regress (sql/), isolation (test/isolation/), Perl TAP
# (test/t/), pgTAP (test/pgtap/) and the suites under test/suites/ (stress,
# canonical JSON vectors and differential test, the n8n driver test, the
# short fault torture).
#
# 15 is the host's (Debian 12's postgresql-15, or the tree PG_CONFIG points
# at).  17 and 18 come from Debian roots that scripts/roots.sh makes once and
# caches outside the repository.  For each major, idem_gate is built from a
# copy of the repository with warnings as errors (make WERROR=1) and
# installed into that major; pg_regress, isolation and Perl TAP run with
# that major's PGXS (inside its root for 17 and 18), then one server of that
# major on a loopback port serves pgTAP and the suites, which run on the
# host.  Servers run as user postgres.  Ends with one line
# "N passed, N failed"; the exit status is non-zero on any failure.
#
# Environment: PG_MAJORS, PG_CONFIG (the host major's pg_config),
# IDEM_TEST_PORT (the suites' server port, default 55432), IDEM_ROOTS
# (where the roots are cached, default /var/cache/idem_gate/roots).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PORT=${IDEM_TEST_PORT:-55432}
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
# Citus has no Debian package; its sources, where a checkout has them beside it
[ -d "$REPO/../shared/vendor" ] && export IDEM_CITUS_VENDOR=$(cd "$REPO/../shared/vendor" && pwd)

quick=0
for arg in "$@"; do
	case "$arg" in
	--quick) quick=1 ;;
	*) echo "usage: [PG_MAJORS=\"15 17 18\"] $0 [--quick]" >&2; exit 2 ;;
	esac
done
if [ "$quick" = 1 ]; then
	MAJORS=${PG_MAJORS:-15}
else
	MAJORS=${PG_MAJORS:-15 17 18}
fi

if [ "$quick" = 1 ]; then
	"$REPO/scripts/deps.sh" || exit 1
else
	"$REPO/scripts/deps.sh" --with-node || exit 1
fi
HOST_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
[ -n "$HOST_MAJOR" ] || { echo "no PostgreSQL at PG_CONFIG=$PG_CONFIG"; echo "0 passed, 1 failed"; exit 1; }

WORK=$(mktemp -d /tmp/idem_gate_test.XXXXXX)
chmod 755 "$WORK"
LOGS="$WORK/logs"
mkdir -p "$LOGS"

total_pass=0
total_fail=0
summary=()
roots_used=()
server_dir=

# record NAME PASSED FAILED
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-3s %-24s %5d passed, %d failed' "$major" "$1" "$2" "$3")")
}

# record_log NAME LOG RC: a suite's own last "N passed, N failed" line; no
# such line, or a non-zero exit with none failed, counts as a failure
record_log() {
	local name=$1 log=$2 rc=$3 last p f
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	if [ -z "$last" ]; then
		record "$name" 0 1
	else
		p=$(echo "$last" | awk '{print $1}')
		f=$(echo "$last" | awk '{print $3}')
		[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
		record "$name" "$p" "$f"
	fi
}

cleanup() {
	[ -n "$server_dir" ] && "$REPO/scripts/cluster.sh" stop "$server_dir"
	local m
	for m in "${roots_used[@]}"; do
		"$REPO/scripts/roots.sh" unbind "$m" "$WORK"
		"$REPO/scripts/roots.sh" release "$m"
	done
}
trap cleanup EXIT

# copy TARGET: a copy of the repository's files (no build output)
copy_tree() {
	mkdir -p "$1"
	tar -C "$REPO" --exclude=.git --exclude=node_modules --exclude='tmp_*' \
		--exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$1" -xf -
}

# pg_regress and isolation: "All N tests passed." / "M of N tests failed."
record_regress() {
	local name=$1 log=$2 tree=$3 n m
	if n=$(grep -oE 'All [0-9]+ tests passed' "$log" | grep -oE '[0-9]+'); then
		record "$name" "$n" 0
	elif grep -qE '[0-9]+ of [0-9]+ tests failed' "$log"; then
		m=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
		n=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $3}')
		record "$name" $((n - m)) "$m"
		cat "$log"
		find "$tree" -name regression.diffs -exec cat {} \;
	else
		record "$name" 0 1
		cat "$log"
	fi
}

# prove / pg_prove: "Files=F, Tests=N" and "Failed X/Y subtests"
record_prove() {
	local name=$1 log=$2 rc=$3 n f
	n=$(grep -oE 'Files=[0-9]+, Tests=[0-9]+' "$log" | tail -1 | sed 's/.*Tests=//')
	f=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$log" | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
	if [ -z "$n" ]; then
		record "$name" 0 1
		cat "$log"
		return
	fi
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	record "$name" $((n - f)) "$f"
	[ "$f" -ne 0 ] && cat "$log"
}

# The selected major's build and PGXS runs: on the host for its own major,
# inside the root (a clean environment; $WORK is bind-mounted at the same
# path) for the others.
in_major() {
	if [ -z "$rootdir" ]; then
		"$@"
	else
		chroot "$rootdir" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 "$@"
	fi
}

# make_check ARGS...: make installcheck in the major's build tree, as postgres
make_check() {
	in_major runuser -u postgres -- \
		sh -c 'cd "$1" && shift && exec make -s installcheck "$@"' sh "$build" \
		PG_CONFIG="$pgc" "$@" 2>&1
}

# run_major: every suite on $major
run_major() {
	local rc name suite last p f
	rootdir=
	pgc=$PG_CONFIG
	if [ "$major" != "$HOST_MAJOR" ]; then
		if ! "$REPO/scripts/roots.sh" "$major" >"$LOGS/$major-roots.log" 2>&1; then
			cat "$LOGS/$major-roots.log"
			record "roots" 0 1
			return
		fi
		rootdir=$("$REPO/scripts/roots.sh" path "$major")
		pgc=/usr/lib/postgresql/$major/bin/pg_config
		roots_used+=("$major")
		"$REPO/scripts/roots.sh" mount "$major" &&
			"$REPO/scripts/roots.sh" bind "$major" "$WORK" || {
			record "roots" 0 1
			return
		}
	fi
	echo "== $major: $(in_major "$pgc" --version)"

	build="$WORK/$major/build"
	copy_tree "$build"
	if ! in_major make -s -C "$build" with_llvm=no WERROR=1 PG_CONFIG="$pgc" \
		>"$LOGS/$major-build.log" 2>&1 ||
		! in_major make -s -C "$build" with_llvm=no PG_CONFIG="$pgc" install \
		>>"$LOGS/$major-build.log" 2>&1; then
		cat "$LOGS/$major-build.log"
		record "build (-Werror)" 0 1
		return
	fi
	if [ -s "$LOGS/$major-build.log" ]; then
		cat "$LOGS/$major-build.log"
		record "build (-Werror)" 0 1
	else
		record "build (-Werror)" 1 0
	fi
	chown -R postgres "$WORK/$major"

	echo "== $major pg_regress"
	make_check ISOLATION= TAP_TESTS= >"$LOGS/$major-regress.log"
	grep -E '^(test| *ok| *FAILED|not ok)' "$LOGS/$major-regress.log" | sed 's/^/  /'
	record_regress "pg_regress" "$LOGS/$major-regress.log" "$build"

	echo "== $major isolation"
	make_check REGRESS= TAP_TESTS= >"$LOGS/$major-isolation.log"
	grep -E '^(test|ok|not ok)' "$LOGS/$major-isolation.log" | sed 's/^/  /'
	record_regress "isolation" "$LOGS/$major-isolation.log" "$build"

	if [ "$quick" = 0 ]; then
		echo "== $major Perl TAP"
		make_check REGRESS= ISOLATION= PROVE_FLAGS=-v >"$LOGS/$major-tap.log"
		rc=$?
		grep -E '^(ok|not ok|test/t/)' "$LOGS/$major-tap.log" | sed 's/^/  /'
		record_prove "Perl TAP" "$LOGS/$major-tap.log" $rc
	fi

	# one server of this major for pgTAP and the suites
	server_dir="$WORK/$major/pg"
	if ! PG_MAJOR=$major "$REPO/scripts/cluster.sh" start "$server_dir" "$PORT"; then
		cat "$server_dir/server.log" 2>/dev/null
		record "server" 0 1
		return
	fi
	export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=idem_test
	psql -q -X -d postgres -c "CREATE DATABASE idem_test" &&
		psql -q -X -c "CREATE EXTENSION idem_gate" -c "CREATE EXTENSION pgtap"

	echo "== $major pgTAP"
	(cd "$suites" && pg_prove -v test/pgtap/*.sql) >"$LOGS/$major-pgtap.log" 2>&1
	rc=$?
	grep -E '^(ok|not ok|test/pgtap)' "$LOGS/$major-pgtap.log" | sed 's/^/  /'
	record_prove "pgTAP" "$LOGS/$major-pgtap.log" $rc

	if [ "$quick" = 0 ]; then
		# suites that start servers of their own (the torture) use this
		# major's programs: in the root, run as postgres through chroot
		if [ -z "$rootdir" ]; then
			export IDEM_PG_BIN=$("$pgc" --bindir) IDEM_PG_AS_POSTGRES="runuser -u postgres --"
		else
			export IDEM_PG_BIN=/usr/lib/postgresql/$major/bin
			export IDEM_PG_AS_POSTGRES="chroot $rootdir runuser -u postgres --"
		fi
		export IDEM_PG_ROOT=$rootdir
		export IDEM_PG_MAJOR=$major
		# their data directories go where the root sees them too
		export TMPDIR="$WORK/$major/tmp"
		mkdir -p "$TMPDIR"
		chmod 1777 "$TMPDIR"
		for suite in "$suites"/test/suites/*.sh; do
			[ -e "$suite" ] || continue
			name=$(basename "$suite" .sh)
			echo "== $major $name"
			(cd "$suites" && bash "$suite") >"$LOGS/$major-$name.log" 2>&1
			rc=$?
			sed 's/^/  /' "$LOGS/$major-$name.log" | tail -40
			record_log "$name" "$LOGS/$major-$name.log" "$rc"
		done
		unset IDEM_PG_BIN IDEM_PG_AS_POSTGRES IDEM_PG_MAJOR IDEM_PG_ROOT TMPDIR
	fi

	"$REPO/scripts/cluster.sh" stop "$server_dir"
	rm -rf "$server_dir/data"
	server_dir=
	unset PGHOST PGPORT PGUSER PGDATABASE
}

# the host-side suites share one copy (their node modules are installed once)
suites="$WORK/suites"
copy_tree "$suites"
chown -R postgres "$suites"

times=()
for major in $MAJORS; do
	case "$major" in
	15 | 17 | 18) ;;
	*) echo "PostgreSQL $major is not supported (15, 17, 18)"; record "unsupported" 0 1; continue ;;
	esac
	t0=$(date +%s)
	run_major
	times+=("$major: $(($(date +%s) - t0)) s")
	if [ -n "$rootdir" ]; then
		"$REPO/scripts/roots.sh" unbind "$major" "$WORK"
		"$REPO/scripts/roots.sh" release "$major"
	fi
done

# The Debian package of the host's major: built, linted, installed into a
# clean root with apt-get, tested with the regression suite against the
# installed files, purged (test/packaging/deb.sh; 17 and 18 on demand)
if [ "$quick" = 0 ] && [[ " $MAJORS " == *" 15 "* ]] && [ "${IDEM_TEST_DEB:-1}" = 1 ]; then
	major=15
	echo "== 15 Debian package"
	"$REPO/test/packaging/deb.sh" 15 >"$LOGS/15-deb.log" 2>&1
	rc=$?
	tail -30 "$LOGS/15-deb.log" | sed 's/^/  /'
	record_log "Debian package" "$LOGS/15-deb.log" "$rc"
fi

echo
echo "== summary (logs in $LOGS; time per major: ${times[*]})"
printf '  %s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
