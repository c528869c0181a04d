# idem_gate's benchmarks: what several of them share.  Sourced, not run.

# bench_install ROOT: build idem_gate and install it into the server the
# benchmark runs: the host's PostgreSQL 15, or with PG_MAJOR=17 or 18 the
# one in that major's Debian root (scripts/roots.sh), whose server
# scripts/cluster.sh then runs there.  Exports PG_MAJOR.
bench_install() {
	local root=$1 rootdir
	PG_MAJOR=${PG_MAJOR:-15}
	if [ "$PG_MAJOR" = 15 ]; then
		make -s -C "$root" with_llvm=no >/dev/null && make -s -C "$root" with_llvm=no install >/dev/null
	else
		"$root/scripts/roots.sh" "$PG_MAJOR"
		rootdir=$("$root/scripts/roots.sh" path "$PG_MAJOR")
		rm -rf "$rootdir/tmp/idem_gate_bench_build" && mkdir -p "$rootdir/tmp/idem_gate_bench_build"
		tar -C "$root" --exclude=.git --exclude=node_modules -cf - . |
			tar -C "$rootdir/tmp/idem_gate_bench_build" -xf -
		chroot "$rootdir" sh -c "cd /tmp/idem_gate_bench_build && make -s clean >/dev/null 2>&1;
			make -s with_llvm=no PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config >/dev/null &&
			make -s with_llvm=no PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config install >/dev/null"
	fi
	export PG_MAJOR
}
