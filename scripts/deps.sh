#!/usr/bin/env bash
# Install the Debian packages idem_gate's build, demo and tests need on the
# host (debootstrap makes the roots of PostgreSQL 17 and 18: scripts/roots.sh).
# Safe to run again: it installs only what is missing.  Needs root.
set -euo pipefail

pkgs=(make gcc postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
	  libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
	  postgresql-contrib bc debootstrap python3-psycopg2
	  prometheus-postgres-exporter prometheus python3-yaml)
[ "${1:-}" = "--with-node" ] && ! command -v node >/dev/null && pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "idem_gate needs these Debian packages: ${missing[*]}; run as root to install them" >&2
	exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# a fresh postgresql package creates and starts a system cluster; idem_gate's
# demo and tests use private clusters and leave the system one alone
