#!/usr/bin/env bash
# test/ha/setup.sh: the private PostgreSQL 15 the failover drills run on.
#
# The drills must not use /usr/lib/postgresql/15 directly: idem_gate is
# reinstalled there while other work goes on, and a library whose shared
# memory layout changed under a running cluster breaks it.  So this copies
# the Debian PostgreSQL 15 trees (with pg_auto_failover's files, which the
# Debian package installs into them) into a prefix, keeping their relative
# layout so that the binaries and pg_config relocate, and builds and
# installs idem_gate into that copy.
#
#   test/ha/setup.sh                    # copy and build once; later runs only check
#   IDEM_HA_REBUILD=1 test/ha/setup.sh  # rebuild idem_gate from the checkout
#   IDEM_HA_RECOPY=1 test/ha/setup.sh   # copy PostgreSQL again too (after an upgrade)
#
# IDEM_HA_PREFIX (/var/cache/idem_gate/ha-pg15) is where the copy lives.
# IDEM_HA_REF (HEAD) is what is built: a commit (git archive, nothing of
# the work tree) or the word "worktree" for the files as they are now,
# uncommitted changes included.  Needs root (apt-get, the prefix).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PREFIX=${IDEM_HA_PREFIX:-/var/cache/idem_gate/ha-pg15}
REF=${IDEM_HA_REF:-HEAD}
PGDIR=$PREFIX/usr/lib/postgresql/15
PGCONFIG=$PGDIR/bin/pg_config

say() { echo "setup: $*"; }
die() { echo "setup: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (apt-get, $PREFIX)"

# Debian's own packages: the two managers, etcd, HAProxy for the one-host
# client path, the server and its headers to build against, psycopg2 for
# the Debian python (load.py runs under /usr/bin/python3, not pyenv's), and
# iptables, without which a partition falls back to freezing the node.
pkgs=(make gcc postgresql-15 postgresql-server-dev-15 postgresql-contrib
	postgresql-15-auto-failover pg-auto-failover-cli
	patroni etcd-server etcd-client haproxy python3-psycopg2 python3-etcd iptables)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# policy-rc.d keeps etcd and haproxy from starting as system services
	# where it exists; where it does not, they are stopped again below
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for svc in etcd haproxy; do
		if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
			systemctl disable --now "$svc" >/dev/null 2>&1 || true
		fi
	done
fi

# --- the copy of PostgreSQL -------------------------------------------------
sysver=$(/usr/lib/postgresql/15/bin/postgres --version)
stamp=$PREFIX/.copied
if [ "${IDEM_HA_RECOPY:-0}" = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sysver" ]; then
	say "copying PostgreSQL 15 ($sysver) into $PREFIX"
	tmp=$PREFIX.new.$$
	rm -rf "$tmp"
	mkdir -p "$tmp/usr/lib/postgresql" "$tmp/usr/share/postgresql" "$tmp/usr/include"
	cp -a /usr/lib/postgresql/15 "$tmp/usr/lib/postgresql/"
	cp -a /usr/share/postgresql/15 "$tmp/usr/share/postgresql/"
	# headers, so that PGXS builds against the copy's pg_config
	cp -a /usr/include/postgresql "$tmp/usr/include/"
	# whatever idem_gate the system had when we copied is not ours: remove
	# it, so that only the build below is in the copy (stale bitcode too)
	rm -rf "$tmp"/usr/lib/postgresql/15/lib/idem_gate.so \
		"$tmp"/usr/lib/postgresql/15/lib/bitcode/idem_gate* \
		"$tmp"/usr/share/postgresql/15/extension/idem_gate*
	rm -rf "$PREFIX"
	mv "$tmp" "$PREFIX"
	echo "$sysver" >"$stamp"
	rm -f "$PREFIX/.built"
fi

# pg_config must answer with the copy's directories, or PGXS would install
# idem_gate into the system's tree again
[ "$($PGCONFIG --pkglibdir)" = "$PGDIR/lib" ] ||
	die "$PGCONFIG --pkglibdir is $($PGCONFIG --pkglibdir), not $PGDIR/lib"
[ "$($PGCONFIG --sharedir)" = "$PREFIX/usr/share/postgresql/15" ] ||
	die "$PGCONFIG --sharedir is $($PGCONFIG --sharedir)"
[ -f "$PGDIR/lib/pgautofailover.so" ] ||
	die "pg_auto_failover is not in the copy: IDEM_HA_RECOPY=1 $0"

# --- idem_gate, built from the checkout into the copy -----------------------
if [ "${IDEM_HA_REBUILD:-0}" = 1 ] || [ ! -f "$PREFIX/.built" ]; then
	src=$(mktemp -d /tmp/idem-ha-build.XXXXXX)
	trap 'rm -rf "$src"' EXIT
	if [ "$REF" = worktree ]; then
		# tracked and untracked files, as they are now, without .git
		(cd "$REPO" && git ls-files -z -co --exclude-standard |
			tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$src"
		desc="worktree of $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD -- src sql src/sql || echo '+changes')"
	else
		git -C "$REPO" archive "$REF" | tar -xf - -C "$src"
		desc="$(git -C "$REPO" rev-parse --short "$REF") $(git -C "$REPO" log -1 --format=%s "$REF" | cut -c1-60)"
	fi
	say "building idem_gate ($desc)"
	make -C "$src" -s with_llvm=no PG_CONFIG="$PGCONFIG" >"$src/build.log" 2>&1 ||
		{ tail -30 "$src/build.log"; die "build failed"; }
	# remove the previous build's scripts first: a version that is gone
	# from the checkout must not stay installable in the copy
	rm -f "$PGDIR"/lib/idem_gate.so "$PREFIX"/usr/share/postgresql/15/extension/idem_gate*
	make -C "$src" -s install with_llvm=no PG_CONFIG="$PGCONFIG" >>"$src/build.log" 2>&1 ||
		{ tail -30 "$src/build.log"; die "install failed"; }
	printf '%s\n%s\n' "$desc" "$(md5sum "$PGDIR/lib/idem_gate.so" | cut -d' ' -f1)" >"$PREFIX/.built"
fi
[ -f "$PGDIR/lib/idem_gate.so" ] || die "no idem_gate.so in $PGDIR/lib"
say "ready: $PGDIR (idem_gate $(head -1 "$PREFIX/.built"), $(grep default_version "$PREFIX"/usr/share/postgresql/15/extension/idem_gate.control | tr -d "' "))"
