#!/bin/bash
# Make Citus available to the PostgreSQL named by PG_CONFIG.
#
# Uses a Citus already installed for that server (its pkglibdir holds
# citus.so); else installs a cached build; else builds one from the tarball
# named by CITUS_SRC, or from ../shared/vendor/ next to the repository
# (Citus has no Debian package), and caches it under
# /var/cache/idem_gate/citus/ keyed by the tarball's digest and the
# server's exact version.  Prints the Citus version it made available.
set -euo pipefail

: "${PG_CONFIG:?PG_CONFIG must name the pg_config of the server}"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pkglib=$("$PG_CONFIG" --pkglibdir)
share=$("$PG_CONFIG" --sharedir)
pgver=$("$PG_CONFIG" --version | awk '{print $2}')
major=${pgver%%.*}

if [ -f "$pkglib/citus.so" ] && ls "$share"/extension/citus--*.sql >/dev/null 2>&1; then
	ls "$share"/extension/citus.control >/dev/null
	sed -n "s/^default_version = '\(.*\)'/\1/p" "$share/extension/citus.control"
	exit 0
fi

src=${CITUS_SRC:-}
if [ -z "$src" ]; then
	# Citus 12.1 builds for PostgreSQL 14-16, Citus 14.0 for 16-18.
	if [ "$major" -le 16 ]; then v=12.1.12; else v=14.0.1; fi
	for d in "$repo/../shared/vendor" "${IDEM_SHARED:-$repo/../shared}/vendor"; do
		if [ -f "$d/citus-$v.tar.gz" ]; then src="$d/citus-$v.tar.gz"; break; fi
	done
fi
[ -n "$src" ] && [ -f "$src" ] || {
	echo "ensure_citus: no Citus for PostgreSQL $pgver: install it, or set CITUS_SRC to a Citus source tarball" >&2
	exit 1
}

# Citus's build needs these (configure checks curl, lz4 and zstd; the
# server's headers include GSSAPI's and OpenSSL's)
deps=()
for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || deps+=("$p")
done
if [ ${#deps[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${deps[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${deps[@]}" >/dev/null; }
fi
[ -f "$("$PG_CONFIG" --includedir)/libpq-fe.h" ] || {
	echo "ensure_citus: $("$PG_CONFIG" --includedir) has no libpq-fe.h (install libpq-dev, or link it into a copied tree)" >&2
	exit 1
}

sum=$(sha256sum "$src" | cut -c1-16)
cache=/var/cache/idem_gate/citus/$sum-pg$pgver
if [ ! -f "$cache/done" ]; then
	rm -rf "$cache"
	mkdir -p "$cache/build" "$cache/lib" "$cache/extension"
	tar xzf "$src" -C "$cache/build" --strip-components=1
	start=$(date +%s)
	(
		cd "$cache/build"
		./configure PG_CONFIG="$PG_CONFIG" >"$cache/configure.log" 2>&1
		make -j2 with_llvm=no >"$cache/make.log" 2>&1
		make install DESTDIR="$cache/stage" with_llvm=no >"$cache/install.log" 2>&1
	) || { echo "ensure_citus: the build failed; see $cache/*.log" >&2; exit 1; }
	cp -a "$cache/stage$pkglib"/citus*.so "$cache/lib/"
	cp -a "$cache/stage$share"/extension/citus* "$cache/extension/"
	rm -rf "$cache/build" "$cache/stage"
	echo "built from $(basename "$src") in $(( $(date +%s) - start )) s" >"$cache/done"
fi
cp -a "$cache/lib/." "$pkglib/"
cp -a "$cache/extension/." "$share/extension/"
sed -n "s/^default_version = '\(.*\)'/\1/p" "$share/extension/citus.control"
