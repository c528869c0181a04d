#!/usr/bin/env bash
# Debian package test: build postgresql-<major>-idem-gate with pg_buildext
# (debian/), check it with lintian, install it with apt-get into a clean
# root, start a server there, CREATE EXTENSION, run the regression suite
# against the installed files (debian/tests/installcheck: make installcheck),
# then purge the package and check that nothing is left.  Never installs
# the package on this machine itself.
#
#   test/packaging/deb.sh            PostgreSQL 15: build on this Debian 12
#                                    host, test in a minimal bookworm root
#   test/packaging/deb.sh 17|18      build and test in copies of the root
#                                    /var/cache/idem_gate/roots/<major>
#                                    (a Debian root with that major's
#                                    postgresql-server-dev-<major>)
#
# Roots and downloaded packages are cached under /var/cache/idem_gate/deb.
# Needs root (debootstrap, chroot, mount).  The built .deb files are left
# in $IDEM_DEB_OUT (default /var/cache/idem_gate/deb/out).  Ends with one
# line "N passed, N failed".
set -euo pipefail

MAJOR=${1:-15}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=/var/cache/idem_gate/deb
OUT=${IDEM_DEB_OUT:-$CACHE/out}
MIRROR=${IDEM_DEB_MIRROR:-http://deb.debian.org/debian}
PORT=${IDEM_DEB_PORT:-56520}

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
notok() { failed=$((failed + 1)); echo "not ok - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else notok "$what"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

[ "$(id -u)" -eq 0 ] || { echo "run as root"; exit 1; }

# host tools (the build for 15 runs on the host; the roots are made here)
need=()
for p in debootstrap lintian dpkg-dev debhelper postgresql-server-dev-all; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

WORK=$(mktemp -d /tmp/idem_deb.XXXXXX)
roots=()
# unmount everything under a root, then remove it without crossing into
# any file system still mounted there
drop_root() {
	local r=$1 m
	for m in $(findmnt -rn -o TARGET | grep -F "$r/" | sort -r); do umount -l "$m" || true; done
	if findmnt -rn -o TARGET | grep -qF "$r/"; then
		echo "# $r still has mounts; left in place" >&2
		return
	fi
	rm -rf --one-file-system "$r"
}
cleanup() {
	for r in "${roots[@]}"; do drop_root "$r"; done
	rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

# the distribution's files: tracked and new files, no build products
# (.gitignore), also from a copy of the tree without .git; a tracked file
# deleted (or moved) in the work tree and not yet committed is left out
copy_tree() {
	mkdir -p "$1"
	if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$ROOT" && git ls-files -co --exclude-standard -z |
			while IFS= read -r -d '' f; do
				if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
			done | xargs -0 tar -cf - --no-recursion) |
			tar -C "$1" -xf -
	else
		tar -C "$ROOT" --exclude-vcs --exclude-vcs-ignores --exclude='./debian/.debhelper' -cf - . |
			tar -C "$1" -xf -
	fi
}

# new_root BASE DIR: a throwaway copy of a root, ready for chroot
new_root() {
	local base=$1 r=$2
	# without what is mounted inside it: a root in use may have /proc,
	# /dev/shm or even a bind mount of the host's /tmp there
	local m excl=()
	for m in $(findmnt -rn -o TARGET | grep -F "$base/" || true); do
		excl+=("--exclude=./${m#"$base"/}")
	done
	roots+=("$r")
	mkdir -p "$r"
	tar -C "$base" "${excl[@]}" -cf - . | tar -C "$r" -xf -
	mkdir -p "$r/proc" "$r/dev/shm" "$r/tmp" "$r/var/cache/apt/archives"
	chmod 1777 "$r/tmp"
	mkdir -p "$CACHE/archives/$MAJOR/partial"
	mount --bind "$CACHE/archives/$MAJOR" "$r/var/cache/apt/archives"
	mount -t proc proc "$r/proc"
	mount -t tmpfs -o mode=1777 shm "$r/dev/shm"
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	# the bookworm root gets the host's suites: the package depends on the
	# server version it was built against, which may be a security update
	if [ "$MAJOR" = 15 ]; then
		cat >"$r/etc/apt/sources.list" <<EOS
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${IDEM_DEB_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
EOS
	fi
	# no service starts, no cluster is created by the postgresql packages
	printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 755 "$r/usr/sbin/policy-rc.d"
	mkdir -p "$r/etc/postgresql-common"
	echo "create_main_cluster = false" >"$r/etc/postgresql-common/createcluster.conf"
}
in_root() { local r=$1; shift; chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 HOME=/root "$@"; }

# the base root for the test installs
if [ "$MAJOR" = 15 ]; then
	BASE=$CACHE/bookworm-minbase
	if [ ! -d "$BASE" ]; then
		mkdir -p "$CACHE"
		echo "# debootstrap --variant=minbase bookworm $BASE"
		rm -rf "$BASE.partial"
		debootstrap --variant=minbase bookworm "$BASE.partial" "$MIRROR" >"$CACHE/bookworm.debootstrap.log" 2>&1 ||
			{ tail -20 "$CACHE/bookworm.debootstrap.log"; exit 1; }
		mv "$BASE.partial" "$BASE"
	fi
else
	BASE=/var/cache/idem_gate/roots/$MAJOR
	[ -d "$BASE/usr/lib/postgresql/$MAJOR" ] || {
		echo "no root with PostgreSQL $MAJOR at $BASE (see docs in debian/README.source)"; exit 1; }
fi

# --- build -----------------------------------------------------------------
mkdir -p "$OUT"
if [ "$MAJOR" = 15 ]; then
	copy_tree "$WORK/build/idem-gate"
	rc=0
	(cd "$WORK/build/idem-gate" && dpkg-buildpackage -b -us -uc) >"$WORK/build.log" 2>&1 || rc=$?
	BUILT=$WORK/build
else
	BR=$WORK/buildroot
	new_root "$BASE" "$BR"
	in_root "$BR" apt-get update -qq >/dev/null 2>&1 || true
	in_root "$BR" apt-get install -y -qq --no-install-recommends build-essential debhelper \
		postgresql-server-dev-all "postgresql-server-dev-$MAJOR" >"$WORK/builddeps.log" 2>&1 ||
		{ tail -20 "$WORK/builddeps.log"; exit 1; }
	copy_tree "$BR/build/idem-gate"
	# debian/control names the host's majors: regenerate it for this root's
	rc=0
	in_root "$BR" sh -c "cd /build/idem-gate && PG_UPDATECONTROL=yes dpkg-buildpackage -b -us -uc" \
		>"$WORK/build.log" 2>&1 || rc=$?
	BUILT=$BR/build
fi
deb=$(ls "$BUILT"/postgresql-"$MAJOR"-idem-gate_*.deb 2>/dev/null | grep -v dbgsym | head -1 || true)
if [ "$rc" -ne 0 ] || [ -z "$deb" ]; then
	tail -40 "$WORK/build.log"
	notok "dpkg-buildpackage builds postgresql-$MAJOR-idem-gate"
	finish; exit 1
fi
ok "dpkg-buildpackage builds $(basename "$deb")"
cp "$BUILT"/*.deb "$BUILT"/*.changes "$BUILT"/*.buildinfo "$OUT"/ 2>/dev/null || true

# contents: the module, the control file and every script PGXS installs
# (a symbolic link's line ends with "-> target": its own name is the path)
dpkg-deb -c "$deb" | sed -E 's/ -> .*$//' | awk '{print $NF}' | sed 's|^\./|/|' >"$WORK/contents"
check "package ships idem_gate.so for $MAJOR" grep -qx "/usr/lib/postgresql/$MAJOR/lib/idem_gate.so" "$WORK/contents"
check "package ships idem_gate.control" grep -qx "/usr/share/postgresql/$MAJOR/extension/idem_gate.control" "$WORK/contents"
printf 'print-data:\n\t@echo $(DATA) $(DATA_built)\n' >"$WORK/print.mk"
scripts=$(make -s -C "$ROOT" -f Makefile -f "$WORK/print.mk" print-data \
	PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config 2>/dev/null | tr ' ' '\n' | grep -E '^idem_gate.*\.sql$' || true)
check "PGXS lists install scripts ($(echo $scripts))" [ -n "$scripts" ]
for s in $scripts; do
	check "package ships $s" grep -qx "/usr/share/postgresql/$MAJOR/extension/$(basename "$s")" "$WORK/contents"
done
check "package has no file outside /usr" bash -c "! grep -vE '^/(usr(/.*)?)?$' '$WORK/contents'"
default=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$ROOT/idem_gate.control")
check "package ships the default version's script idem_gate--$default.sql" \
	grep -qx "/usr/share/postgresql/$MAJOR/extension/idem_gate--$default.sql" "$WORK/contents"
# the user documentation (compressed by dh_compress when it is large)
DOC=/usr/share/doc/postgresql-$MAJOR-idem-gate
for d in README.md changelog CHANGELOG.md docs/reference.md docs/operations.md; do
	check "package ships $DOC/$d" grep -qxE "$DOC/$d(\.gz)?" "$WORK/contents"
done
check "package ships every page of docs/ ($(ls "$ROOT"/docs/*.md | wc -l))" \
	bash -c "for f in '$ROOT'/docs/*.md; do grep -qxE '$DOC/docs/'\$(basename \$f)'(\.gz)?' '$WORK/contents' || exit 1; done"
check "package ships no contributor's page (docs/dev)" bash -c "! grep -q '^$DOC/docs/dev' '$WORK/contents'"
echo "# Depends: $(dpkg-deb -f "$deb" Depends)"

# lintian: no error or warning left that debian/ does not explain
changes=$(ls "$BUILT"/*.changes | head -1)
lrc=0
lintian --fail-on error,warning --display-info "$changes" >"$WORK/lintian.log" 2>&1 || lrc=$?
sed 's/^/# lintian: /' "$WORK/lintian.log"
check "lintian: no errors or warnings" [ "$lrc" -eq 0 ]

# --- install into a clean root ---------------------------------------------
R=$WORK/root
new_root "$BASE" "$R"
cp "$deb" "$R/tmp/"
in_root "$R" apt-get update -qq >"$WORK/apt.log" 2>&1 || true
rc=0
in_root "$R" apt-get install -y --no-install-recommends "./tmp/$(basename "$deb")" >>"$WORK/apt.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && tail -30 "$WORK/apt.log"
check "apt-get install ./$(basename "$deb") in a clean root" [ "$rc" -eq 0 ]
check "dpkg says postgresql-$MAJOR-idem-gate is installed" \
	bash -c "chroot '$R' dpkg-query -W -f='\${Status}' postgresql-$MAJOR-idem-gate | grep -q 'install ok installed'"
in_root "$R" dpkg -L "postgresql-$MAJOR-idem-gate" >"$WORK/installed"

# a server in the root with idem_gate preloaded; CREATE EXTENSION and a claim
BIN=/usr/lib/postgresql/$MAJOR/bin
as_pg() { in_root "$R" runuser -u postgres -- "$@"; }
rc=0
{ as_pg "$BIN/initdb" -D /tmp/pgdata -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1 &&
	printf "listen_addresses = ''\nport = %s\nunix_socket_directories = '/tmp'\nshared_preload_libraries = 'idem_gate'\n" \
		"$PORT" >>"$R/tmp/pgdata/postgresql.conf" &&
	as_pg "$BIN/pg_ctl" -D /tmp/pgdata -l /tmp/pgdata/server.log -w start >/dev/null; } || rc=$?
check "a PostgreSQL $MAJOR server with idem_gate preloaded starts in the root" [ "$rc" -eq 0 ]
psql_root() { as_pg psql -X -At -h /tmp -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }
out=$(psql_root -c "CREATE EXTENSION idem_gate" -c "SELECT extversion FROM pg_extension WHERE extname = 'idem_gate'" \
	-c "SELECT idem_claim('evt_1', 'deb')" -c "SELECT available FROM idem_gate.stats" 2>&1 || true)
echo "$out" | sed 's/^/# /'
check "CREATE EXTENSION idem_gate installs the default version $default" \
	[ "$(echo "$out" | grep -v '^CREATE' | sed -n 1p)" = "$default" ]
check "a claim through the installed package answers new" [ "$(echo "$out" | grep -v '^CREATE' | sed -n 2p)" = new ]
check "the preloaded counters are available" [ "$(echo "$out" | grep -v '^CREATE' | sed -n 3p)" = t ]
# the upgrade path, where the package ships one from 1.0
if grep -qx "/usr/share/postgresql/$MAJOR/extension/idem_gate--1.0.sql" "$WORK/installed" &&
	grep -qx "/usr/share/postgresql/$MAJOR/extension/idem_gate--1.0--$default.sql" "$WORK/installed"; then
	out=$(psql_root -c "CREATE DATABASE upg" >/dev/null 2>&1; as_pg psql -X -At -h /tmp -p "$PORT" -d upg \
		-c "CREATE EXTENSION idem_gate VERSION '1.0'" -c "ALTER EXTENSION idem_gate UPDATE" \
		-c "SELECT extversion FROM pg_extension WHERE extname = 'idem_gate'" 2>&1 | tail -1)
	check "ALTER EXTENSION idem_gate UPDATE from 1.0 reaches $default ($out)" [ "$out" = "$default" ]
fi
as_pg "$BIN/pg_ctl" -D /tmp/pgdata -m fast -w stop >/dev/null || true

# the regression suite against the installed files
in_root "$R" apt-get install -y --no-install-recommends make "postgresql-server-dev-$MAJOR" \
	postgresql-server-dev-all >"$WORK/apt-test.log" 2>&1 || tail -20 "$WORK/apt-test.log"
copy_tree "$R/src/idem-gate"
rc=0
in_root "$R" sh -c "cd /src/idem-gate && debian/tests/installcheck" >"$WORK/installcheck.log" 2>&1 || rc=$?
{ grep -E '^(test |ok |not ok |# |All |[0-9]+ of |### )' "$WORK/installcheck.log" || true; } | sed 's/^/#   /'
cp "$WORK/installcheck.log" "$OUT/installcheck-$MAJOR.log"
if [ "$rc" -ne 0 ]; then tail -40 "$WORK/installcheck.log"; echo "# full log: $OUT/installcheck-$MAJOR.log"; fi
check "debian/tests/installcheck: make installcheck passes against the package" \
	bash -c "[ $rc -eq 0 ] && grep -qE 'All [0-9]+ tests passed|# All [0-9]+ tests passed' '$WORK/installcheck.log'"

# remove it: no file of the package is left
rc=0
in_root "$R" apt-get purge -y "postgresql-$MAJOR-idem-gate" >"$WORK/purge.log" 2>&1 || rc=$?
check "apt-get purge postgresql-$MAJOR-idem-gate" [ "$rc" -eq 0 ]
check "dpkg no longer lists the package" \
	bash -c "! chroot '$R' dpkg-query -W -f='\${Status}' postgresql-$MAJOR-idem-gate 2>/dev/null | grep -q installed"
left=0
while read -r f; do
	if [ -f "$R$f" ]; then echo "# left behind: $f"; left=$((left + 1)); fi
done <"$WORK/installed"
check "no file of the package is left ($(grep -c . "$WORK/installed") listed)" [ "$left" -eq 0 ]
check "the server packages stay installed" [ -x "$R$BIN/postgres" ]

finish
