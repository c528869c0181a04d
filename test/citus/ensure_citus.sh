#!/bin/bash
# Make Citus available to the PostgreSQL named by PG_CONFIG.
#
# Uses a Citus already installed for that server (its pkglibdir holds
# citus.so); else installs a cached build; else builds one from the tarball
# named by CITUS_SRC, or from IDEM_CITUS_VENDOR (scripts/test.sh points it
# at ../shared/vendor/ next to the repository), or from ../shared/vendor/
# (Citus has no Debian package), and caches it under
# /var/cache/idem_gate/citus/ keyed by the tarball's digest and the
# server's exact version.  Prints the Citus version it made available.
#
# With IDEM_PG_ROOT set (scripts/test.sh, for the majors that live in a
# Debian root made by scripts/roots.sh), PG_CONFIG is a path inside that
# root, and the build dependencies, the build and the install happen there.
set -euo pipefail

: "${PG_CONFIG:?PG_CONFIG must name the pg_config of the server}"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ROOT=${IDEM_PG_ROOT:-}

# inroot CMD...: run a command where the server lives
inroot() {
	if [ -z "$ROOT" ]; then
		"$@"
	else
		chroot "$ROOT" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
	fi
}

pkglib=$(inroot "$PG_CONFIG" --pkglibdir)
share=$(inroot "$PG_CONFIG" --sharedir)
pgver=$(inroot "$PG_CONFIG" --version | awk '{print $2}')
major=${pgver%%.*}

if [ -f "$ROOT$pkglib/citus.so" ] && ls "$ROOT$share"/extension/citus--*.sql >/dev/null 2>&1; then
	ls "$ROOT$share"/extension/citus.control >/dev/null
	sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT$share/extension/citus.control"
	exit 0
fi

src=${CITUS_SRC:-}
if [ -z "$src" ]; then
	# Citus 12.1 builds for PostgreSQL 14-16, Citus 14.0 for 16-18.
	if [ "$major" -le 16 ]; then v=12.1.12; else v=14.0.1; fi
	for d in ${IDEM_CITUS_VENDOR:+"$IDEM_CITUS_VENDOR"} "$repo/../shared/vendor"; do
		if [ -f "$d/citus-$v.tar.gz" ]; then src="$d/citus-$v.tar.gz"; break; fi
	done
fi
[ -n "$src" ] && [ -f "$src" ] || {
	echo "ensure_citus: no Citus for PostgreSQL $pgver: install it, or set CITUS_SRC to a Citus source tarball" >&2
	exit 3
}

# Citus's build needs these (configure checks curl, lz4 and zstd; the
# server's headers include GSSAPI's, OpenSSL's and ICU's), and citus.so the
# libraries they bring
deps=()
for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev libicu-dev; do
	inroot dpkg -s "$p" >/dev/null 2>&1 || deps+=("$p")
done
if [ ${#deps[@]} -gt 0 ]; then
	[ -z "$ROOT" ] || cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
	inroot apt-get install -y -q "${deps[@]}" >/dev/null ||
		{ inroot apt-get update -q >/dev/null && inroot apt-get install -y -q "${deps[@]}" >/dev/null; }
fi
[ -f "$ROOT$(inroot "$PG_CONFIG" --includedir)/libpq-fe.h" ] || {
	echo "ensure_citus: $(inroot "$PG_CONFIG" --includedir) has no libpq-fe.h (install libpq-dev, or link it into a copied tree)" >&2
	exit 1
}

sum=$(sha256sum "$src" | cut -c1-16)
cache=/var/cache/idem_gate/citus/$sum-pg$pgver
if [ ! -f "$cache/done" ]; then
	rm -rf "$cache"
	mkdir -p "$cache/lib" "$cache/extension"
	# the build tree, where the server's programs and headers are
	work=/tmp/idem_citus_build.$$
	rm -rf "$ROOT$work"
	mkdir -p "$ROOT$work/src"
	tar xzf "$src" -C "$ROOT$work/src" --strip-components=1
	start=$(date +%s)
	inroot sh -c 'cd "$1/src" &&
		./configure PG_CONFIG="$2" >"$1/configure.log" 2>&1 &&
		make -j2 with_llvm=no >"$1/make.log" 2>&1 &&
		make install DESTDIR="$1/stage" with_llvm=no >"$1/install.log" 2>&1' sh "$work" "$PG_CONFIG" || {
		cp "$ROOT$work"/*.log "$cache/" 2>/dev/null || true
		rm -rf "$ROOT$work"
		echo "ensure_citus: the build failed; see $cache/*.log" >&2
		exit 1
	}
	cp -a "$ROOT$work/stage$pkglib"/citus*.so "$cache/lib/"
	cp -a "$ROOT$work/stage$share"/extension/citus* "$cache/extension/"
	rm -rf "$ROOT$work"
	echo "built from $(basename "$src") in $(( $(date +%s) - start )) s" >"$cache/done"
fi
cp -a "$cache/lib/." "$ROOT$pkglib/"
cp -a "$cache/extension/." "$ROOT$share/extension/"
sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT$share/extension/citus.control"
