#!/usr/bin/env bash
# An assert-enabled PostgreSQL, built from Debian's own source package of
# that major, to run idem_gate's tests on a server that checks itself:
# Assert() and the memory-context checks (CLOBBER_FREED_MEMORY,
# MEMORY_CONTEXT_CHECKING, RANDOMIZE_ALLOCATED_MEMORY come with
# --enable-cassert) catch what Debian's production builds let pass.
#
#   pgbuild.sh MAJOR [--valgrind] [--refresh]
#
#   MAJOR        15 (bookworm's postgresql-15), 17 (trixie's postgresql-17)
#                or 18 (forky's postgresql-18)
#   --valgrind   also -DUSE_VALGRIND (the server tells valgrind about its
#                memory contexts), into a separate prefix
#   --refresh    look for a newer Debian source version than the cached one
#
# Prints the pg_config of the build at the end; then, for instance:
#   PG_CONFIG=/var/cache/idem_gate/pg-assert/15/bin/pg_config scripts/quick.sh
#
# What it does, each step only when needed:
#   - adds deb-src entries (deb822, /etc/apt/sources.list.d/idem_gate-src.sources)
#     for the suites that lack one.  They are source indexes only (Types:
#     deb-src): no package of trixie or forky becomes installable on the
#     Debian 12 host; a pin of -1 in /etc/apt/preferences.d/idem_gate-src
#     keeps it so should someone add binary entries for them later;
#   - apt-get source into $IDEM_PGBUILD_CACHE/pgsrc/MAJOR (Debian's patches
#     applied, except the one that hard-codes /usr/lib/postgresql/MAJOR as
#     the library directory: that one is taken out again, so nothing is ever
#     installed into the host's PostgreSQL); where the mirror's pool does
#     not serve the version its index lists, an earlier point release from
#     the pool, its .dsc checked against debian-keyring (fetch_pool_earlier);
#   - installs the build dependencies from Debian 12's own binary packages,
#     by name (never build-dep against trixie or forky);
#   - configure with --enable-cassert --enable-debug --enable-tap-tests,
#     CFLAGS="-O1 -ggdb", a VPATH build in pgbuild/KIND-MAJOR, and installs
#     core, contrib (pg_stat_statements, amcheck, ... for the TAP tests) and
#     the isolation tester into pg-assert/MAJOR (pg-valgrind/MAJOR);
#   - copies pgTAP's SQL files from Debian's postgresql-MAJOR-pgtap (the
#     host's for 15, the root of scripts/roots.sh for 17 and 18).
#
# Cached under $IDEM_PGBUILD_CACHE (default /var/cache/idem_gate): a stamp
# file in the prefix records the source version and the build's flags, and
# a run whose inputs match it does nothing.  Logs of each step are kept in
# pgbuild/.  Needs root (apt, and the files under /var/cache).  A build
# takes 10 to 20 minutes a major on two cores, at nice 10.
set -euo pipefail

CACHE=${IDEM_PGBUILD_CACHE:-/var/cache/idem_gate}
ROOTS=${IDEM_ROOTS:-$CACHE/roots}
MIRROR=${IDEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${IDEM_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
APT_SOURCES=/etc/apt/sources.list.d/idem_gate-src.sources
APT_PIN=/etc/apt/preferences.d/idem_gate-src
# bumped when the way of building changes, so that old builds are redone
RECIPE=1

die() { echo "pgbuild.sh: $*" >&2; exit 1; }
say() { echo "pgbuild.sh: $*"; }

usage() {
	sed -n '/^#   pgbuild.sh/,/^#   --refresh/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

MAJOR=
VALGRIND=0
REFRESH=0
for a in "$@"; do
	case "$a" in
	--valgrind) VALGRIND=1 ;;
	--refresh) REFRESH=1 ;;
	-h|--help) usage ;;
	[0-9]*) [ -z "$MAJOR" ] || usage; MAJOR=$a ;;
	*) usage ;;
	esac
done
[ -n "$MAJOR" ] || usage

# suites MAJOR: the Debian suites whose source packages carry MAJOR, the
# one with the newest version first
case "$MAJOR" in
15) SUITES=(bookworm-security bookworm-updates bookworm) ;;
17) SUITES=(trixie) ;;
18) SUITES=(forky) ;;
*) die "no Debian suite known for PostgreSQL $MAJOR (15, 17 or 18)" ;;
esac
PKG=postgresql-$MAJOR

if [ "$VALGRIND" = 1 ]; then KIND=pg-valgrind; else KIND=pg-assert; fi
SRCROOT=$CACHE/pgsrc/$MAJOR
SRC_STAMP=$SRCROOT/.idem_gate_source
PREFIX=$CACHE/$KIND/$MAJOR
WORK=$CACHE/pgbuild
BUILD=$WORK/$KIND-$MAJOR
LOG=$WORK/$KIND-$MAJOR
STAMP=$PREFIX/.idem_gate_pgbuild

CFLAGS_BUILD="-O1 -ggdb"
CPPFLAGS_BUILD=
[ "$VALGRIND" = 1 ] && CPPFLAGS_BUILD="-DUSE_VALGRIND"
CONFIGURE=(--prefix="$PREFIX" --enable-cassert --enable-debug --enable-tap-tests
	--with-openssl --with-icu --with-libxml --with-lz4 --with-zstd)
DEPS=(gcc make bison flex perl libipc-run-perl pkg-config dpkg-dev libreadline-dev
	zlib1g-dev libssl-dev libicu-dev libxml2-dev liblz4-dev libzstd-dev)
[ "$VALGRIND" = 1 ] && DEPS+=(valgrind)

# pgtap_dir: where Debian's postgresql-MAJOR-pgtap put its SQL files, or ""
pgtap_dir() {
	local d
	if [ "$MAJOR" = 15 ]; then
		d=/usr/share/postgresql/15/extension
	else
		# only a complete root (scripts/roots.sh stamps it last)
		[ -f "$ROOTS/$MAJOR/.idem_gate_root" ] || { echo ""; return; }
		d=$ROOTS/$MAJOR/usr/share/postgresql/$MAJOR/extension
	fi
	if [ -f "$d/pgtap.control" ]; then echo "$d"; else echo ""; fi
}

# install_pgtap: copy pgTAP's control and SQL files into the prefix, those
# that differ only; pgTAP has no C part
install_pgtap() {
	local from to f n=0
	from=$(pgtap_dir)
	if [ -z "$from" ]; then
		if [ "$MAJOR" = 15 ]; then
			say "no pgTAP: the host lacks postgresql-15-pgtap (scripts/deps.sh installs it); skipping it"
		else
			say "no pgTAP for $MAJOR: no complete root $ROOTS/$MAJOR (scripts/roots.sh $MAJOR makes it); skipping it"
		fi
		return 0
	fi
	to=$("$PREFIX/bin/pg_config" --sharedir)/extension
	for f in "$from"/pgtap*; do
		cmp -s "$f" "$to/${f##*/}" && continue
		cp "$f" "$to/"
		n=$((n + 1))
	done
	[ "$n" -eq 0 ] || say "pgTAP $(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$from/pgtap.control") from $from"
}

# source_version: the Debian version of the cached source, or ""
source_version() {
	if [ -f "$SRC_STAMP" ]; then sed -n 's/^version=//p' "$SRC_STAMP"; fi
}

stamp_text() {
	echo "recipe=$RECIPE kind=$KIND major=$MAJOR source=$PKG $1"
	echo "configure=${CONFIGURE[*]}"
	echo "CFLAGS=$CFLAGS_BUILD CPPFLAGS=$CPPFLAGS_BUILD"
}

built() {
	local v
	v=$(source_version)
	[ -n "$v" ] && [ -f "$STAMP" ] && [ -x "$PREFIX/bin/pg_config" ] &&
		[ "$(cat "$STAMP")" = "$(stamp_text "$v")" ]
}

# The cached case first: no apt, no lock, nothing written but pgTAP's files
# when they appeared since (a root made after the build).
if [ "$REFRESH" = 0 ] && built; then
	[ -w "$PREFIX" ] && install_pgtap
	echo "$PREFIX/bin/pg_config"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "run as root (apt, and the build cache $CACHE)"
mkdir -p "$WORK" "$CACHE/pgsrc" "$CACHE/$KIND"
exec 9>"$WORK/$KIND-$MAJOR.lock"
flock -n 9 || { say "waiting for another pgbuild.sh $MAJOR"; flock 9; }

# --- apt: deb-src entries -------------------------------------------------

# stanza SUITE: the deb822 entry of SUITE's source index
stanza() {
	local uri=$MIRROR
	case "$1" in *-security) uri=$SECURITY_MIRROR ;; esac
	echo "Types: deb-src"
	echo "URIs: $uri"
	echo "Suites: $1"
	echo "Components: main"
	# forky's Release file can be past its Valid-Until on Debian's mirror
	[ "$1" = forky ] && echo "Check-Valid-Until: no"
	echo "Signed-By: $KEYRING"
}

# other_debsrc: the suites another file of the host's apt already has a
# deb-src entry for
other_debsrc() {
	local parts f
	parts=$(mktemp -d)
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && [ "$f" != "$APT_SOURCES" ] && ln -s "$f" "$parts/"
	done
	# shellcheck disable=SC2016 # apt's own $(FIELD) syntax
	apt-get indextargets --no-release-info -o Dir::Etc::SourceParts="$parts" \
		--format '$(TARGET_OF) $(RELEASE)' 2>/dev/null |
		awk '$1 == "deb-src" { print $2 }' | sort -u
	rm -rf "$parts"
}

# ensure_sources: write the deb-src entries the host lacks, and the pin
ensure_sources() {
	local want=(bookworm-security bookworm-updates bookworm trixie forky) have s text=
	have=$(other_debsrc)
	for s in "${want[@]}"; do
		grep -qxF "$s" <<<"$have" && continue
		text+="${text:+$'\n'}$(stanza "$s")"$'\n'
	done
	if [ -n "$text" ]; then
		text="# idem_gate's scripts/pgbuild.sh: Debian's source packages of PostgreSQL
# 15, 17 and 18, to build assert-enabled servers.  Source indexes only:
# no binary package of these suites is installable from here.
$text"
		# (both sides without their last newline, as $(...) leaves them)
		[ "$(cat "$APT_SOURCES" 2>/dev/null)" = "$(printf '%s' "$text")" ] || {
			printf '%s' "$text" >"$APT_SOURCES"
			say "wrote $APT_SOURCES"
		}
	elif [ -f "$APT_SOURCES" ]; then
		rm -f "$APT_SOURCES"
	fi
	text="# idem_gate's scripts/pgbuild.sh reads only the source packages of
# trixie and forky; none of their binary packages is for this host
Package: *
Pin: release n=trixie
Pin-Priority: -1

Package: *
Pin: release n=forky
Pin-Priority: -1"
	[ "$(cat "$APT_PIN" 2>/dev/null)" = "$text" ] || echo "$text" >"$APT_PIN"
}

# apt_update: refresh the source indexes; only this script's entries when
# it holds all of them, so the host's binary lists stay as they are
apt_update() {
	local opts=(-q -o Acquire::Check-Valid-Until=false -o DPkg::Lock::Timeout=600)
	if [ -f "$APT_SOURCES" ] && [ "$(grep -c '^Suites:' "$APT_SOURCES")" -eq 5 ]; then
		opts+=(-o Dir::Etc::SourceList="$APT_SOURCES" -o Dir::Etc::SourceParts=-
			-o APT::Get::List-Cleanup=0)
	fi
	apt-get update "${opts[@]}" >"$LOG.apt-update.log" 2>&1 || {
		tail -20 "$LOG.apt-update.log" >&2
		die "apt-get update failed (log: $LOG.apt-update.log)"
	}
}

# --- source ------------------------------------------------------------------

# fetch_pool_earlier DIR: the source of an earlier point release of PKG,
# for when the mirror's index names a version whose files its pool does not
# serve (trixie's postgresql-17 17.12-0+deb13u1: its .dsc and tarballs
# answer 404, while 17.9 to 17.11 are there).  Tries the index's Debian
# revision on each of the four upstream minors below the indexed one,
# newest first.  The index's hashes cannot vouch for a version it does not
# list, so the .dsc must carry a good signature of a Debian developer
# (debian-keyring, a Debian 12 package, installed for it), and dpkg-source
# checks the tarballs against the .dsc.  Sets POOL_VERSION and
# POOL_INDEXED.
fetch_pool_earlier() {
	local dir=$1 showsrc indexed pooldir upstream rev minor m v dsc f checked
	local keyring=/usr/share/keyrings/debian-keyring.gpg
	showsrc=$(apt-cache showsrc "$PKG" 2>/dev/null) || return 1
	indexed=$(sed -n 's/^Version: //p' <<<"$showsrc" | sort -V | tail -1)
	pooldir=$(sed -n 's/^Directory: //p' <<<"$showsrc" | head -1)
	[ -n "$indexed" ] && [ -n "$pooldir" ] || return 1
	upstream=${indexed%%-*}
	rev=${indexed#*-}
	minor=${upstream#"$MAJOR".}
	case "$minor" in '' | *[!0-9]*) return 1 ;; esac
	DEPS+=(debian-keyring curl)
	ensure_deps
	for ((m = minor - 1; m >= 1 && m >= minor - 4; m--)); do
		v=$MAJOR.$m-$rev
		dsc=${PKG}_$v.dsc
		curl -fsS -m 60 -o "$dir/$dsc" "$MIRROR/$pooldir/$dsc" 2>>"$LOG.source.log" || continue
		checked=$(gpgv --keyring "$keyring" "$dir/$dsc" 2>&1) || {
			echo "$checked" >>"$LOG.source.log"
			die "$MIRROR/$pooldir/$dsc has no good signature of a Debian developer (log: $LOG.source.log)"
		}
		echo "$checked" >>"$LOG.source.log"
		# a signed .dsc of another version (an older one served in its place)
		# is refused too
		[ "$(sed -n 's/^Version: //p' "$dir/$dsc" | head -1)" = "$v" ] ||
			die "$MIRROR/$pooldir/$dsc is signed but is not version $v"
		while read -r f; do
			curl -fsS -m 600 -o "$dir/$f" "$MIRROR/$pooldir/$f" 2>>"$LOG.source.log" ||
				die "$MIRROR/$pooldir/$f did not download (log: $LOG.source.log)"
		done < <(awk '/^Files:/ { on = 1; next } /^[^ ]/ { on = 0 } on && NF == 3 { print $3 }' "$dir/$dsc")
		(cd "$dir" && dpkg-source -x "$dsc") >>"$LOG.source.log" 2>&1 ||
			die "dpkg-source -x $dsc failed (log: $LOG.source.log)"
		say "the pool does not serve $PKG $indexed, which the index lists; took $v, signed by $(sed -n 's/.*Good signature from "\(.*\)".*/\1/p' <<<"$checked" | head -1)"
		POOL_VERSION=$v
		POOL_INDEXED=$indexed
		return 0
	done
	return 1
}

# fetch_source: apt-get source PKG from the newest suite that has it and
# whose files download, into a scratch directory moved into place at the end
fetch_source() {
	local tmp=$SRCROOT.partial s dir v patch
	rm -rf "$tmp"
	mkdir -p "$tmp"
	for s in "${SUITES[@]}"; do
		if (cd "$tmp" && apt-get source -q -o APT::Sandbox::User=root "$PKG/$s") \
			>"$LOG.source.log" 2>&1; then
			break
		fi
		say "no source of $PKG from $s ($(grep -m1 -E '^E:' "$LOG.source.log" || echo '?'))"
		rm -rf "${tmp:?}"/*
	done
	dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name "$PKG-*" | head -1)
	if [ -z "$dir" ] && fetch_pool_earlier "$tmp"; then
		s="pool: $POOL_VERSION, earlier than the index's $POOL_INDEXED"
		dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name "$PKG-*" | head -1)
	fi
	[ -n "$dir" ] || { tail -20 "$LOG.source.log" >&2; rm -rf "$tmp"
		die "apt-get source $PKG failed in every suite (${SUITES[*]}; log: $LOG.source.log)"; }
	v=$(sed -n 's/^Version: //p' "$tmp"/*.dsc | head -1)
	# Debian's 50-per-version-dirs.patch sets pkglibdir to
	# /usr/lib/postgresql/MAJOR/lib whatever the prefix: undo it, so that the
	# build installs below its own prefix only
	patch=$(grep -l 'override pkglibdir := /usr/lib/postgresql' "$dir"/debian/patches/* || true)
	if [ -n "$patch" ]; then
		patch -d "$dir" -R -p1 -s --no-backup-if-mismatch <"$patch" ||
			die "cannot take $patch out of $dir"
	fi
	printf 'package=%s\nversion=%s\ndir=%s\nsuite=%s\nreverted=%s\n' \
		"$PKG" "$v" "${dir##*/}" "$s" "${patch##*/}" >"$tmp/.idem_gate_source"
	rm -rf "$SRCROOT"
	mv "$tmp" "$SRCROOT"
	say "source $PKG $v from $s in $SRCROOT"
}

# --- build dependencies ------------------------------------------------------

ensure_deps() {
	local p missing=()
	for p in "${DEPS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing from Debian 12: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
		"${missing[@]}" >"$LOG.deps.log" 2>&1; then
		apt-get update -q -o DPkg::Lock::Timeout=600 >>"$LOG.deps.log" 2>&1 || true
		apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
			"${missing[@]}" >>"$LOG.deps.log" 2>&1 || {
			tail -20 "$LOG.deps.log" >&2
			die "installing the build dependencies failed (log: $LOG.deps.log)"
		}
	fi
}

# --- build -------------------------------------------------------------------

# run STEP CMD...: run CMD at nice 10 with its output in the step's log
run() {
	local step=$1
	shift
	if ! nice -n 10 "$@" >"$LOG.$step.log" 2>&1; then
		tail -30 "$LOG.$step.log" >&2
		die "$step failed (log: $LOG.$step.log)"
	fi
}

# check_paths: every installation directory of the configured tree is
# below the prefix (no Debian patch left one in /usr)
check_paths() {
	local v d
	for v in bindir libdir pkglibdir datadir includedir includedir_server \
		includedir_internal pgxsdir sysconfdir docdir mandir localedir; do
		d=$(make -s --no-print-directory -C "$BUILD/src" \
			--eval "idem-print: ; @echo \$($v)" idem-print)
		case "$d" in
		"$PREFIX"|"$PREFIX"/*) ;;
		*) die "$v is $d, outside $PREFIX: refusing to install" ;;
		esac
	done
}

build() {
	local src v t0
	v=$(source_version)
	src=$SRCROOT/$(sed -n 's/^dir=//p' "$SRC_STAMP")
	[ -x "$src/configure" ] || die "$src/configure is missing"
	t0=$(date +%s)
	say "building $PKG $v ($KIND) in $BUILD, at nice 10 with -j2 (logs: $LOG.*.log)"
	# a fresh tree each time: the inputs changed, or the last build broke
	rm -rf "$BUILD"
	mkdir -p "$BUILD"
	cd "$BUILD"
	run configure "$src/configure" "${CONFIGURE[@]}" \
		CFLAGS="$CFLAGS_BUILD" CPPFLAGS="$CPPFLAGS_BUILD"
	check_paths
	run make make -j2
	run make-contrib make -j2 -C contrib
	# the prefix is remade whole; idem_gate goes back in with its next
	# "make install" (scripts/quick.sh does one)
	case "$PREFIX" in "$CACHE"/pg-*/"$MAJOR") rm -rf "$PREFIX" ;; *) die "odd prefix $PREFIX" ;; esac
	run install make install
	run install-contrib make -C contrib install
	# pg_isolation_regress and isolationtester where PGXS looks for them
	# (make install does it already; this says so)
	run install-isolation make -C src/test/isolation install
	local pgxs
	pgxs=$(dirname "$("$PREFIX/bin/pg_config" --pgxs)")/../..
	for f in src/test/regress/pg_regress src/test/isolation/pg_isolation_regress \
		src/test/isolation/isolationtester; do
		[ -x "$pgxs/$f" ] || die "$pgxs/$f was not installed"
	done
	"$PREFIX/bin/pg_config" --configure | grep -q -- --enable-cassert ||
		die "$PREFIX/bin/pg_config does not report --enable-cassert"
	stamp_text "$v" >"$STAMP"
	say "built $PKG $v ($KIND) in $(( ($(date +%s) - t0) / 60 )) min $(( ($(date +%s) - t0) % 60 )) s"
}

# the source: once, or again with --refresh (a build follows only when the
# version changed: the stamp holds it)
if [ ! -f "$SRC_STAMP" ] || [ "$REFRESH" = 1 ]; then
	ensure_deps
	ensure_sources
	apt_update
	fetch_source
fi
if ! built; then
	ensure_deps
	build
fi
install_pgtap
echo "$PREFIX/bin/pg_config"
