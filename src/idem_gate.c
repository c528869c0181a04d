/*-------------------------------------------------------------------------
 *
 * idem_gate.c
 *	  The module's entry point: each layer defines its settings, and what
 *	  preloading adds is requested.
 *
 * idem_gate works without shared_preload_libraries (the SQL API is plain
 * functions over idem_gate.claims); preloading adds the background worker,
 * the shared-memory counters and the commit positions that durable answers
 * wait for.  src/README.md is the map of the layers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "acl.h"
#include "base.h"
#include "citus_guard.h"
#include "claim.h"
#include "compat.h"
#include "durable.h"
#include "janitor.h"
#include "keyed.h"
#include "stats.h"
#include "store.h"
#include "worker.h"

IG_MODULE_MAGIC;

/*
 * Define every layer's settings, then ask for what preloading adds.  The
 * Citus planner guard is installed preloaded or not: a backend that loads
 * the library late needs it too.
 */
void
_PG_init(void)
{
	ig_base_init();
	ig_acl_init();
	ig_keyed_init();
	ig_store_init();
	ig_claim_init();
	ig_janitor_init();
	ig_worker_init();

	MarkGUCPrefixReserved("idem_gate");

	ig_citus_guard_install();

	if (!ig_preloaded)
		return;

	ig_stats_request_shmem();
	ig_durable_request_shmem();
	ig_keyed_request_shmem();
	ig_worker_register();
}
