/*-------------------------------------------------------------------------
 *
 * idem_gate.c
 *	  Module entry point: settings, and what preloading adds.
 *
 * idem_gate works without shared_preload_libraries (the SQL API is plain
 * functions over idem_gate.claims); preloading adds the background worker
 * and the shared-memory counters.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "call.h"
#include "citus_guard.h"
#include "durable.h"
#include "janitor.h"
#include "store.h"
#include "stats.h"
#include "worker.h"

PG_MODULE_MAGIC;

bool		idem_preloaded = false;

/*
 * Define the settings, and remember whether we are being preloaded: a
 * backend forked from the postmaster inherits the flag.
 */
void
_PG_init(void)
{
	idem_preloaded = process_shared_preload_libraries_in_progress;

	ig_call_define_settings();
	ig_store_define_settings();
	idem_janitor_define_settings();
	idem_acl_define_settings();
	idem_worker_define_settings();

	MarkGUCPrefixReserved("idem_gate");

	/* before the preload test: a backend that loads the library late needs it too */
	ig_citus_guard_install();

	if (!idem_preloaded)
		return;

	idem_stats_request_shmem();
	ig_durable_request_shmem();
	idem_worker_register();
}

/*
 * idem_gate.preloaded(): lets the install script and administrators see
 * whether the worker and the counters are available.
 */
PG_FUNCTION_INFO_V1(idem_gate_preloaded);

Datum
idem_gate_preloaded(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(idem_preloaded);
}
