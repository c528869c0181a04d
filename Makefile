# idem_gate: PGXS build.
#
# Released install scripts are frozen as committed: idem_gate--1.0.sql,
# and the parts of 1.1 in src/sql/1.1/.  Each later version is the one
# before it plus an upgrade assembled from src/sql/<version>/*.sql in name
# order (one part per concern): idem_gate--1.0--1.1.sql,
# idem_gate--1.1--1.2.sql and idem_gate--1.2--1.3.sql.  A fresh install
# runs exactly the same statements (idem_gate--1.3.sql = 1.2 + the upgrade
# to 1.3), so a fresh and an updated database have the same catalog.

EXTENSION = idem_gate
MODULE_big = idem_gate
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA = idem_gate--1.0.sql
DATA_built = idem_gate--1.1.sql idem_gate--1.0--1.1.sql \
	idem_gate--1.2.sql idem_gate--1.1--1.2.sql \
	idem_gate--1.3.sql idem_gate--1.2--1.3.sql
# The library's version, for PG_MODULE_MAGIC_EXT on 18: the control file's.
IG_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/idem_gate.control)
PG_CPPFLAGS = -I$(srcdir)/src -DIG_VERSION='"$(IG_VERSION)"'

# The tests build with warnings as errors (scripts/test.sh runs make
# WERROR=1) on every supported major.  A plain make does not, so a compiler
# newer than the ones idem_gate is tested with cannot stop a user's build
# over a warning it adds.
ifeq ($(WERROR),1)
PG_CFLAGS += -Werror
endif

# pg_regress suites: every sql/*.sql, in name order.
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --temp-instance=./tmp_regress --temp-config=test/preload.conf

# Isolation specs live in test/isolation/specs with their own expected/.
ISOLATION = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso \
	--temp-instance=./tmp_isolation --temp-config=test/preload.conf

# Perl TAP tests (PostgreSQL::Test::Cluster).
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = tmp_regress tmp_isolation output_iso results regression.diffs \
	regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Keyed keys hash with libcrypto's EVP digests directly (src/keyed_hmac.c)
# where PostgreSQL was built with OpenSSL (configure's --with-openssl or
# --with-ssl=openssl, which PGXS's Makefile.global records as with_ssl),
# linked as PostgreSQL's own contrib modules link it.  Without OpenSSL they
# go through PostgreSQL's common/hmac.h: the same bytes, slower.
ifeq ($(with_ssl),openssl)
override CPPFLAGS += -DIG_USE_OPENSSL
SHLIB_LINK += $(filter -lcrypto, $(LIBS))
endif

idem_gate--1.0--1.1.sql: $(sort $(wildcard src/sql/1.1/*.sql))
	cat $^ > $@

idem_gate--1.1.sql: idem_gate--1.0.sql idem_gate--1.0--1.1.sql
	cat $^ > $@

idem_gate--1.1--1.2.sql: $(sort $(wildcard src/sql/1.2/*.sql))
	cat $^ > $@

idem_gate--1.2.sql: idem_gate--1.1.sql idem_gate--1.1--1.2.sql
	cat $^ > $@

idem_gate--1.2--1.3.sql: $(sort $(wildcard src/sql/1.3/*.sql))
	cat $^ > $@

idem_gate--1.3.sql: idem_gate--1.2.sql idem_gate--1.2--1.3.sql
	cat $^ > $@

# Every object depends on every header of src/: a changed struct rebuilds all.
$(OBJS): $(wildcard $(srcdir)/src/*.h)
