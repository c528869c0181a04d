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
#include "janitor.h"
#include "store.h"
#include "stats.h"

PG_MODULE_MAGIC;

bool		idem_preloaded = false;

/*
 * idem_gate.database: a database name is all we can check before the
 * server runs; the launcher reports a database that does not exist.
 */
static bool
ig_check_database(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
	{
		GUC_check_errdetail("idem_gate.database must name the database where idem_gate is installed.");
		return false;
	}
	if (strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errdetail("Database names are at most %d bytes long.", NAMEDATALEN - 1);
		return false;
	}
	return true;
}

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

	DefineCustomIntVariable("idem_gate.naptime",
							"Time between janitor passes.",
							NULL,
							&idem_naptime,
							10, 1, SECS_PER_DAY,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	if (idem_preloaded)
	{
		DefineCustomStringVariable("idem_gate.database",
								   "Database the janitor works in.",
								   NULL,
								   &idem_database,
								   "postgres",
								   PGC_POSTMASTER, 0,
								   ig_check_database, NULL, NULL);
		DefineCustomStringVariable("idem_gate.worker_role",
								   "Role the janitor connects as; empty means the bootstrap superuser.",
								   NULL,
								   &idem_worker_role,
								   "",
								   PGC_POSTMASTER, 0,
								   NULL, NULL, NULL);
	}

	MarkGUCPrefixReserved("idem_gate");

	if (!idem_preloaded)
		return;

	idem_stats_request_shmem();
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
