#!/usr/bin/env bash
# The demo leaves the machine as it found it: run ./scripts/demo.sh, as the
# README says, in a throwaway copy of a clean Debian 12 root, and compare
# the machine before and after.  Not part of CI (it downloads and installs
# Debian packages: a few minutes).  As root:
#
#   test/packaging/demo_clean.sh
#
# What must hold:
#   - the demo succeeds from a clone of the repository, and shows its
#     outcomes (new, in_flight, completed with the receipt, stale_taken,
#     the old owner refused);
#   - `dpkg-query -W` after the demo differs from before only by the
#     packages added, and those are exactly `scripts/deps.sh --list --demo`
#     with the dependencies apt-get pulls in for them
#     (apt-get -s install --no-install-recommends); nothing removed, and no
#     version changed but those of installed packages that apt-get upgrades
#     because a new one needs a newer version (libssl3 for libssl-dev from
#     bookworm-security, say);
#   - the services enabled at boot (/etc/systemd/system/*.wants, *.requires,
#     the S links of /etc/rc?.d) are the same set before and after;
#   - nothing of the demo runs afterwards (no process in the root, nothing
#     on its port), no system cluster exists (/etc/postgresql/15,
#     /var/lib/postgresql/15), no policy-rc.d is left, createcluster.conf is
#     the package's own, and /tmp holds nothing of the demo;
#   - a second run (another IDEM_DEMO_PORT) installs nothing and changes
#     neither the packages nor the services;
#   - a port already in use stops the demo at once, with a message that
#     names IDEM_DEMO_PORT.
#
# The clean root is a plain `debootstrap bookworm` (the default variant:
# Debian's required and important packages, systemd among them, as on a
# fresh machine), with bookworm-updates and bookworm-security in its
# sources; it is made once and cached in $IDEM_ROOTS/bookworm (default
# /var/cache/idem_gate/roots/bookworm) and each run works on a copy.  The
# downloaded packages are cached in /var/cache/idem_gate/demo-archives.
# The root shares the host's network: the demo's cluster listens on the
# host's 127.0.0.1:$IDEM_DEMO_CLEAN_PORT (default 56530) and the next port.
# Environment: IDEM_ROOTS, IDEM_DEBIAN_MIRROR, IDEM_DEBIAN_SECURITY_MIRROR,
# IDEM_DEMO_CLEAN_PORT, IDEM_DEMO_CLEAN_KEEP=1 (keep the work directory and
# its logs).  Ends with one line "N passed, N failed".
set -euo pipefail
export LC_ALL=C	# one sort order for sort and comm

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${IDEM_ROOTS:-/var/cache/idem_gate/roots}
BASE=$CACHE/bookworm
ARCHIVES=/var/cache/idem_gate/demo-archives
MIRROR=${IDEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${IDEM_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PORT=${IDEM_DEMO_CLEAN_PORT:-56530}
STAMP=.idem_gate_root
STAMP_TEXT="suite=bookworm variant=default mirror=$MIRROR"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
notok() { failed=$((failed + 1)); echo "not ok - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else notok "$what"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot, mount)"; echo "0 passed, 1 failed"; exit 1; }
command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)"; echo "0 passed, 1 failed"; exit 1; }

# --- the clean root, made once -------------------------------------------------
if ! [ -f "$BASE/$STAMP" ] || [ "$(cat "$BASE/$STAMP")" != "$STAMP_TEXT" ]; then
	echo "# debootstrap bookworm $BASE (a few minutes, once)"
	mkdir -p "$CACHE"
	rm -rf --one-file-system "$BASE.partial"
	debootstrap bookworm "$BASE.partial" "$MIRROR" >"$CACHE/bookworm.debootstrap.log" 2>&1 || {
		tail -20 "$CACHE/bookworm.debootstrap.log"
		echo "0 passed, 1 failed"
		exit 1
	}
	cat >"$BASE.partial/etc/apt/sources.list" <<EOS
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOS
	chroot "$BASE.partial" apt-get clean
	echo "$STAMP_TEXT" >"$BASE.partial/$STAMP"
	rm -rf --one-file-system "$BASE"
	mv "$BASE.partial" "$BASE"
fi

WORK=$(mktemp -d /tmp/idem_demo_clean.XXXXXX)
R=$WORK/root
LISTENER=
in_root_pids() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && echo "${p#/proc/}"
	done
	return 0
}
cleanup() {
	[ -z "$LISTENER" ] || kill "$LISTENER" 2>/dev/null || true
	local p m
	for p in $(in_root_pids); do kill -9 "$p" 2>/dev/null || true; done
	for m in $(findmnt -rn -o TARGET | grep -F "$R/" | sort -r); do umount -l "$m" || true; done
	if findmnt -rn -o TARGET | grep -qF "$R/"; then
		echo "# $R still has mounts; left in place" >&2
	elif [ "${IDEM_DEMO_CLEAN_KEEP:-}" = 1 ]; then
		rm -rf --one-file-system "$R"
		echo "# logs kept in $WORK"
	else
		rm -rf --one-file-system "$WORK"
	fi
}
trap cleanup EXIT

# --- a throwaway copy, with a clone of the repository in /root/idem_gate --------
echo "# copying the clean root to $R"
mkdir -p "$R"
tar -C "$BASE" --exclude="./$STAMP" -cf - . | tar -C "$R" -xf -
mkdir -p "$R/proc" "$R/dev/shm" "$ARCHIVES/partial"
mount -t proc proc "$R/proc"
mount -t tmpfs -o mode=1777 shm "$R/dev/shm"
mount --bind "$ARCHIVES" "$R/var/cache/apt/archives"
cp /etc/resolv.conf "$R/etc/resolv.conf"
# the repository's files as a clone has them: tracked and new, no build output
mkdir -p "$R/root/idem_gate"
(cd "$REPO" && git ls-files -co --exclude-standard -z |
	while IFS= read -r -d '' f; do
		if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
	done | xargs -0 tar -cf - --no-recursion) | tar -C "$R/root/idem_gate" -xf -

in_root() {
	chroot "$R" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 TERM=dumb "$@"
}
packages() { in_root dpkg-query -W -f='${Package}:${Architecture} ${Version}\n' | sort; }
enabled() {
	{
		find "$R/etc/systemd/system" -mindepth 2 -maxdepth 2 \
			\( -path '*.wants/*' -o -path '*.requires/*' \) -printf '%h/%f\n' 2>/dev/null |
			sed "s|^$R/etc/systemd/system/||"
		find "$R"/etc/rc[0-6S].d -maxdepth 1 -name 'S*' -printf '%h/%f\n' 2>/dev/null | sed "s|^$R/etc/||"
	} | sort
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
has_files() { [ -n "$(find "$@" -mindepth 1 -maxdepth 1 2>/dev/null | head -1)" ]; }
demo() {
	local port=$1 log=$2
	in_root bash -c 'cd /root/idem_gate && IDEM_DEMO_PORT=$1 ./scripts/demo.sh' demo "$port" >"$log" 2>&1
}

for p in "$PORT" $((PORT + 1)); do
	port_free "$p" || { echo "127.0.0.1:$p is in use: set IDEM_DEMO_CLEAN_PORT"; echo "0 passed, 1 failed"; exit 1; }
done

# --- before ---------------------------------------------------------------------
packages >"$WORK/packages.before"
enabled >"$WORK/enabled.before"
[ -e "$R/usr/sbin/policy-rc.d" ] && echo "# note: the clean root has a policy-rc.d"
# what the demo's packages pull in, as apt-get resolves them now
in_root apt-get update -qq >"$WORK/apt-update.log" 2>&1 || { cat "$WORK/apt-update.log"; notok "apt-get update in the root"; finish; exit; }
demo_pkgs=$(in_root bash /root/idem_gate/scripts/deps.sh --list --demo | tr '\n' ' ')
in_root apt-get -s install --no-install-recommends $demo_pkgs >"$WORK/apt-simulate.log" 2>&1
# "Inst NAME (VERSION ...)" installs NAME; "Inst NAME [OLD] (NEW ...)" upgrades
# an installed package that a new one needs at a newer version
awk '$1 == "Inst" && $3 !~ /^\[/ { print $2 }' "$WORK/apt-simulate.log" | sed 's/:.*//' | sort >"$WORK/expected.added"
awk '$1 == "Inst" && $3 ~ /^\[/ { print $2 }' "$WORK/apt-simulate.log" | sed 's/:.*//' | sort >"$WORK/expected.upgraded"
echo "# the demo's packages: $demo_pkgs($(wc -l <"$WORK/expected.added") with their dependencies;" \
	"$(wc -l <"$WORK/expected.upgraded") installed ones upgraded for them: $(tr '\n' ' ' <"$WORK/expected.upgraded"))"
echo "# before: $(wc -l <"$WORK/packages.before") packages, $(wc -l <"$WORK/enabled.before") services enabled at boot"

# --- the demo, as the README says ---------------------------------------------------
t0=$(date +%s)
if demo "$PORT" "$WORK/demo.log"; then
	ok "./scripts/demo.sh succeeds in a clean Debian 12 root ($(($(date +%s) - t0)) s, packages included)"
else
	notok "./scripts/demo.sh succeeds in a clean Debian 12 root"
	tail -40 "$WORK/demo.log" | sed 's/^/# /'
fi
shows() { grep -qE "$1" "$WORK/demo.log"; }
check "it installed the missing packages (its log says which)" shows '^installing: '
check "idem_gate is preloaded in its cluster" shows '^ t$'
check "a double delivery: the second claim is in_flight" shows '^ in_flight '
check "a retry after completion answers completed with the receipt" shows '^ completed .*ch_3Kx9'
check "a stale claim is taken over" shows '^ stale_taken '
check "the old owner's completion is refused" shows 'ERROR: .*token'
check "the cluster ran on IDEM_DEMO_PORT" shows "127\\.0\\.0\\.1:$PORT \\(IDEM_DEMO_PORT\\)"

# --- after ------------------------------------------------------------------------
packages >"$WORK/packages.after"
enabled >"$WORK/enabled.after"
sed 's/ .*//; s/:.*//' "$WORK/packages.before" | sort -u >"$WORK/names.before"
sed 's/ .*//; s/:.*//' "$WORK/packages.after" | sort -u >"$WORK/names.after"
comm -13 "$WORK/names.before" "$WORK/names.after" >"$WORK/added"
comm -23 "$WORK/names.before" "$WORK/names.after" >"$WORK/removed"
# same package, another version or architecture
comm -13 "$WORK/packages.before" "$WORK/packages.after" | sed 's/ .*//; s/:.*//' | sort -u |
	comm -12 - "$WORK/names.before" >"$WORK/changed"
echo "# packages added ($(wc -l <"$WORK/added")): $(tr '\n' ' ' <"$WORK/added")"
check "no package removed" test ! -s "$WORK/removed"
echo "# packages upgraded ($(wc -l <"$WORK/changed")): $(tr '\n' ' ' <"$WORK/changed")"
if cmp -s "$WORK/changed" "$WORK/expected.upgraded"; then
	ok "no installed package changed version but those apt-get upgrades for the demo's ($(wc -l <"$WORK/changed"))"
else
	notok "no installed package changed version but those apt-get upgrades for the demo's"
	diff "$WORK/expected.upgraded" "$WORK/changed" | sed 's/^/# expected vs upgraded: /' || true
fi
if cmp -s "$WORK/added" "$WORK/expected.added"; then
	ok "the packages added are exactly the demo's and their dependencies ($(wc -l <"$WORK/added"))"
else
	notok "the packages added are exactly the demo's and their dependencies"
	diff "$WORK/expected.added" "$WORK/added" | sed 's/^/# expected vs added: /' || true
fi
echo "# services enabled at boot: $(wc -l <"$WORK/enabled.before") before, $(wc -l <"$WORK/enabled.after") after"
if cmp -s "$WORK/enabled.before" "$WORK/enabled.after"; then
	ok "no service enabled at boot that was not before"
else
	notok "no service enabled at boot that was not before"
	diff "$WORK/enabled.before" "$WORK/enabled.after" | sed 's/^/# before vs after: /' || true
fi
pids=$(in_root_pids | tr '\n' ' ')
check "nothing of the demo runs in the root afterwards${pids:+ (pids $pids)}" test -z "$pids"
check "nothing listens on the demo's port afterwards" port_free "$PORT"
check "no system cluster was created" bash -c "! [ -d '$R/var/lib/postgresql/15' ] && ! ls '$R'/etc/postgresql/15/*/postgresql.conf >/dev/null 2>&1"
check "no policy-rc.d left behind" test ! -e "$R/usr/sbin/policy-rc.d"
check "createcluster.conf is the package's own" \
	cmp -s "$R/etc/postgresql-common/createcluster.conf" "$R/usr/share/postgresql-common/createcluster.conf"
check "/tmp holds nothing of the demo" bash -c "! ls -d '$R'/tmp/idem_gate_* >/dev/null 2>&1"
check "idem_gate is installed into PostgreSQL 15" test -f "$R/usr/lib/postgresql/15/lib/idem_gate.so"

# --- a second run: nothing to install, nothing changes ---------------------------------
if demo $((PORT + 1)) "$WORK/demo2.log"; then
	ok "a second run, on IDEM_DEMO_PORT=$((PORT + 1)), succeeds"
else
	notok "a second run, on IDEM_DEMO_PORT=$((PORT + 1)), succeeds"
	tail -20 "$WORK/demo2.log" | sed 's/^/# /'
fi
check "the second run installs nothing" bash -c "! grep -q '^installing: ' '$WORK/demo2.log'"
packages >"$WORK/packages.after2"
enabled >"$WORK/enabled.after2"
check "the second run changes no package" cmp -s "$WORK/packages.after" "$WORK/packages.after2"
check "the second run enables no service" cmp -s "$WORK/enabled.before" "$WORK/enabled.after2"

# --- a port in use -----------------------------------------------------------------------
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(120)' "$PORT" &
LISTENER=$!
for _ in $(seq 50); do port_free "$PORT" || break; sleep 0.1; done
if demo "$PORT" "$WORK/demo3.log"; then
	notok "a port in use stops the demo"
else
	check "a port in use stops the demo, naming IDEM_DEMO_PORT" grep -q 'IDEM_DEMO_PORT' "$WORK/demo3.log"
fi
kill "$LISTENER" 2>/dev/null || true
wait "$LISTENER" 2>/dev/null || true
LISTENER=

finish
