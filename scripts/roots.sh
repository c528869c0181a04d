#!/usr/bin/env bash
# Debian roots that carry the PostgreSQL majors Debian 12 does not:
#   17 from Debian 13 "trixie" (postgresql-17), 18 from Debian "forky"
#   (postgresql-18).  The host's own 15 needs no root.
#
#   roots.sh [MAJOR...]        make the roots that are missing (default: 17 18)
#   roots.sh path MAJOR        print a major's root directory ("" for 15)
#   roots.sh mount MAJOR       mount what servers in the root need (/proc,
#                              a tmpfs on /dev/shm); idempotent
#   roots.sh umount MAJOR      unmount everything mounted inside the root
#   roots.sh bind MAJOR DIR    make DIR visible at the same path in the root
#   roots.sh unbind MAJOR DIR  undo bind
#   roots.sh release MAJOR     umount, unless a bind is still in use
#
# Roots are cached under $IDEM_ROOTS (default /var/cache/idem_gate/roots),
# outside the repository, and reused when their stamp file says they hold
# the current package list; a root that is incomplete (an interrupted run)
# is made again.  Everything in them comes from Debian's packages through
# debootstrap and apt.  The user postgres gets the host's uid and gid in
# each root, so a data directory or socket made on one side is usable on
# the other.  Needs root and the host package debootstrap
# (scripts/deps.sh installs it).
set -euo pipefail

CACHE=${IDEM_ROOTS:-/var/cache/idem_gate/roots}
MIRROR=${IDEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
STAMP=.idem_gate_root

# suite MAJOR: the Debian suite that carries MAJOR
suite() {
	case "$1" in
	17) echo trixie ;;
	18) echo forky ;;
	*) echo "roots.sh: no Debian suite known for PostgreSQL $1" >&2; return 1 ;;
	esac
}

# packages MAJOR: what the build, pg_regress, isolation, Perl TAP and pgTAP
# need inside the root (the contrib modules, amcheck among them, are part of
# postgresql-N since 10)
packages() {
	echo "postgresql-$1 postgresql-server-dev-$1 postgresql-$1-pgtap" \
		"make gcc libc6-dev libipc-run-perl perl"
}

# stamp_text MAJOR: what a complete root's stamp file holds; a change of
# the package list or of postgres's uid makes the root be made again
stamp_text() {
	echo "major=$1 suite=$(suite "$1") packages=$(packages "$1")" \
		"postgres=$(id -u postgres):$(id -g postgres)"
}

rootdir() { echo "$CACHE/$1"; }

# mounts_under DIR: mount points inside DIR, deepest first
mounts_under() {
	local d
	d=$(realpath -m "$1")
	awk -v d="$d" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

umount_all() {
	local m
	for m in $(mounts_under "$1"); do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}

# remove_tree DIR: rm -rf, but never through a mount (a bind of /tmp is on
# the same file system, which --one-file-system alone would not notice)
remove_tree() {
	umount_all "$1"
	if [ -n "$(mounts_under "$1")" ]; then
		echo "roots.sh: $1 still has mounts; not removing it" >&2
		return 1
	fi
	rm -rf --one-file-system "$1"
}

mount_root() {
	local r=$1
	mountpoint -q "$r/proc" || mount -t proc proc "$r/proc"
	mkdir -p "$r/dev/shm"
	mountpoint -q "$r/dev/shm" || mount -t tmpfs -o mode=1777,size=1g tmpfs "$r/dev/shm"
}

# make_root MAJOR: debootstrap into a scratch directory, install the
# packages, stamp, and only then move it into place
make_root() {
	local major=$1 r s tmp script=()
	r=$(rootdir "$major")
	s=$(suite "$major")
	tmp="$r.partial"
	remove_tree "$tmp"
	mkdir -p "$CACHE"
	# debootstrap of Debian 12 knows trixie but not forky: forky is made
	# like sid
	[ -e "/usr/share/debootstrap/scripts/$s" ] || script=(/usr/share/debootstrap/scripts/sid)
	echo "roots.sh: debootstrap $s for PostgreSQL $major (a few minutes, once)"
	debootstrap --variant=minbase "$s" "$tmp" "$MIRROR" "${script[@]}" \
		>"$CACHE/$major.debootstrap.log" 2>&1 || {
		tail -20 "$CACHE/$major.debootstrap.log" >&2
		echo "roots.sh: debootstrap of $s failed (log: $CACHE/$major.debootstrap.log)" >&2
		return 1
	}
	# forky's Release file on Debian's mirror can be past its Valid-Until
	echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99idem-gate"
	# no services start inside the root, and no main cluster is made: idem_gate's
	# tests run private clusters
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	mkdir -p "$tmp/etc/postgresql-common"
	echo "create_main_cluster = false" >"$tmp/etc/postgresql-common/createcluster.conf"
	# postgres with the host's uid and gid, before the packages make one
	chroot "$tmp" groupadd -g "$(id -g postgres)" postgres
	chroot "$tmp" useradd -u "$(id -u postgres)" -g postgres -d /var/lib/postgresql \
		-s /bin/bash -r postgres
	mount_root "$tmp"
	if ! chroot "$tmp" sh -c "export DEBIAN_FRONTEND=noninteractive
		apt-get update -q && apt-get install -y -q --no-install-recommends $(packages "$major")" \
		>"$CACHE/$major.apt.log" 2>&1; then
		umount_all "$tmp"
		tail -20 "$CACHE/$major.apt.log" >&2
		echo "roots.sh: installing PostgreSQL $major's packages failed (log: $CACHE/$major.apt.log)" >&2
		return 1
	fi
	chroot "$tmp" apt-get clean
	umount_all "$tmp"
	stamp_text "$major" >"$tmp/$STAMP"
	remove_tree "$r"
	mv "$tmp" "$r"
	echo "roots.sh: PostgreSQL $major ready in $r:" \
		"$(chroot "$r" dpkg-query -W -f='${Package} ${Version}' "postgresql-$major")"
}

# ensure MAJOR: make the root unless a complete one is there
ensure() {
	local r
	r=$(rootdir "$1")
	if [ -f "$r/$STAMP" ] && [ "$(cat "$r/$STAMP")" = "$(stamp_text "$1")" ]; then
		return 0
	fi
	make_root "$1"
}

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "roots.sh: run as root (debootstrap, chroot and mount need it)" >&2
		exit 1
	fi
}

case "${1:-}" in
path)
	[ "$2" = 15 ] && { echo ""; exit 0; }
	suite "$2" >/dev/null
	rootdir "$2"
	;;
mount)
	need_root
	mount_root "$(rootdir "$2")"
	;;
umount)
	need_root
	umount_all "$(rootdir "$2")"
	;;
bind)
	need_root
	r=$(rootdir "$2")
	d=$(realpath -m "$3")
	if ! [ "$r$d" -ef "$d" ]; then
		mkdir -p "$r$d"
		mount --bind "$d" "$r$d"
	fi
	;;
unbind)
	need_root
	r=$(rootdir "$2")
	d=$(realpath -m "$3")
	if mountpoint -q "$r$d"; then
		umount "$r$d" 2>/dev/null || umount -l "$r$d"
		# a mount point bind made below a top-level directory (/tmp/x, not /tmp)
		case "$d" in /*/*) rmdir "$r$d" 2>/dev/null || true ;; esac
	fi
	;;
release)
	# unmount /proc and /dev/shm once nothing else is mounted in the root,
	# that is once no cluster of the root runs
	need_root
	r=$(rootdir "$2")
	others=$(mounts_under "$r" | grep -vxF -e "$r/proc" -e "$r/dev/shm" || true)
	[ -n "$others" ] || umount_all "$r"
	;;
*)
	need_root
	command -v debootstrap >/dev/null || {
		echo "roots.sh: debootstrap is missing: run scripts/deps.sh" >&2; exit 1; }
	majors=("$@")
	[ ${#majors[@]} -eq 0 ] && majors=(17 18)
	for m in "${majors[@]}"; do
		[ "$m" = 15 ] && continue
		ensure "$m"
	done
	;;
esac
