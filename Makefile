# idem_gate: PGXS build.
#
# The install script idem_gate--1.0.sql is assembled from src/sql/*.sql in
# name order, one part per concern, so each C file's SQL declarations sit in
# one place.  Once a version is released its parts are frozen; later
# versions ship idem_gate--X--Y.sql upgrade scripts instead.

EXTENSION = idem_gate
MODULE_big = idem_gate
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA_built = idem_gate--1.0.sql
PG_CPPFLAGS = -I$(srcdir)/src

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

idem_gate--1.0.sql: $(sort $(wildcard src/sql/*.sql))
	cat $^ > $@
