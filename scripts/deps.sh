#!/usr/bin/env bash
# Install the Debian packages idem_gate needs on the host, in one of two sets:
#
#   scripts/deps.sh --demo        what scripts/demo.sh uses: the PostgreSQL 15
#                                 server, its server-dev headers, a compiler
#                                 and make; nothing else
#   scripts/deps.sh               what the build, the tests (scripts/test.sh)
#                                 and the benchmarks use: the demo's set, and
#                                 pgTAP and its Perl modules, contrib,
#                                 debootstrap (scripts/roots.sh makes the roots
#                                 of PostgreSQL 17 and 18 with it), psycopg2,
#                                 prometheus-postgres-exporter and promtool
#   scripts/deps.sh --with-node   the test set and Node.js with npm (the n8n
#                                 driver suite)
#   scripts/deps.sh --bench       the test set and what some benchmarks
#                                 compare with or measure by: Redis
#                                 (bench/claim/floor.sh), perf and valgrind
#   scripts/deps.sh --list [SET]  print the packages of a set, one a line
#                                 (SET: --demo, --with-node or --bench)
#
# Safe to run again: it installs only what is missing, and nothing when
# nothing is.  Needs root when something is missing.
#
# What an install leaves: the packages and what they contain, and nothing
# running or enabled.  While it installs, /usr/sbin/policy-rc.d stops every
# service from starting (unless the machine has a policy-rc.d of its own,
# which is left as it is); afterwards every service that the new packages
# enabled at boot (prometheus, prometheus-postgres-exporter, postgresql,
# and with --bench redis-server: floor.sh starts a Redis of its own on a
# private port) is disabled again, so nothing that was not enabled before
# starts at the next boot.  A first install of postgresql-15 creates no
# cluster: Debian's package would create and start the system cluster
# "main" (port 5432); idem_gate's demo, tests and benchmarks use private
# clusters of their own.
# For the usual system cluster afterwards:
#   pg_createcluster 15 main --start && systemctl enable postgresql
set -euo pipefail

demo_pkgs=(make gcc libc6-dev postgresql-15 postgresql-server-dev-15)
test_pkgs=("${demo_pkgs[@]}" postgresql-15-pgtap
	libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
	postgresql-contrib postgresql-15-cron bc debootstrap python3-psycopg2
	prometheus-postgres-exporter prometheus python3-yaml)
bench_pkgs=("${test_pkgs[@]}" redis-server redis-tools linux-perf valgrind)

set_name=test list=0
for arg in "$@"; do
	case "$arg" in
	--demo) set_name=demo ;;
	--with-node) set_name=node ;;
	--bench) set_name=bench ;;
	--list) list=1 ;;
	*) echo "usage: $0 [--list] [--demo | --with-node | --bench]" >&2; exit 2 ;;
	esac
done
case "$set_name" in
demo) pkgs=("${demo_pkgs[@]}") ;;
test) pkgs=("${test_pkgs[@]}") ;;
bench) pkgs=("${bench_pkgs[@]}") ;;
node)
	pkgs=("${test_pkgs[@]}")
	if [ "$list" = 1 ] || ! command -v node >/dev/null; then pkgs+=(nodejs npm); fi
	;;
esac
if [ "$list" = 1 ]; then
	printf '%s\n' "${pkgs[@]}"
	exit 0
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "idem_gate needs these Debian packages: ${missing[*]}; run as root to install them" >&2
	exit 1
fi

# the services enabled at boot: systemd's *.wants and *.requires links, and
# the SysV start links
enabled() {
	find /etc/systemd/system -mindepth 2 -maxdepth 2 \
		\( -path '*.wants/*' -o -path '*.requires/*' \) -printf '%f\n' 2>/dev/null || true
	find /etc/rc[2-5S].d -maxdepth 1 -name 'S*' -printf '%f\n' 2>/dev/null | sed 's/^S[0-9]*//' || true
}
# disable_new BEFORE: disable what is enabled now and was not in BEFORE
disable_new() {
	local u
	for u in $(comm -13 <(echo "$1" | sort -u) <(enabled | sort -u)); do
		case "$u" in
		*.*)
			echo "disabling $u, which a package enabled at boot"
			if command -v systemctl >/dev/null; then
				systemctl disable --quiet "$u" 2>/dev/null || deb-systemd-helper disable "$u" || true
			else
				deb-systemd-helper disable "$u" || true
			fi
			;;
		esac
	done
	# SysV start links left (a machine without systemd, or a script with no
	# unit): update-rc.d turns them into stop links, which keep them disabled
	# through the packages' upgrades
	for u in $(comm -13 <(echo "$1" | sort -u) <(enabled | sort -u)); do
		case "$u" in
		*.*) ;;
		*)
			echo "disabling the SysV script $u, which a package enabled at boot"
			update-rc.d "$u" disable >/dev/null 2>&1 || true
			;;
		esac
	done
}

policy=/usr/sbin/policy-rc.d
own_policy=0
ccconf=/etc/postgresql-common/createcluster.conf
ccsaved=
restore() {
	if [ -n "$ccsaved" ]; then
		cp -p "$ccsaved" "$ccconf"
		rm -f "$ccsaved"
	fi
	[ "$own_policy" = 0 ] || rm -f "$policy"
}
trap restore EXIT

echo "installing: ${missing[*]}"
if [ ! -e "$policy" ]; then
	own_policy=1
	printf '#!/bin/sh\n# idem_gate scripts/deps.sh: no service starts while it installs\nexit 101\n' >"$policy"
	chmod 755 "$policy"
fi
before=$(enabled)
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
apt-get update -qq
if [[ " ${missing[*]} " == *" postgresql-15 "* ]]; then
	# postgresql-common first, for its createcluster.conf; that file then
	# says "no main cluster" while postgresql-15 installs, and is put back
	# exactly as it was afterwards
	installed postgresql-common || apt_install postgresql-common
	if [ -f "$ccconf" ]; then
		ccsaved=$(mktemp /tmp/idem_gate_createcluster.XXXXXX)
		cp -p "$ccconf" "$ccsaved"
		printf '\n# idem_gate scripts/deps.sh, while it installs postgresql-15\ncreate_main_cluster = false\n' >>"$ccconf"
	fi
fi
apt_install "${missing[@]}"
disable_new "$before"
