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

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "janitor.h"
#include "stats.h"
#include "worker.h"

PG_MODULE_MAGIC;

int			idem_max_key_length = 255;
bool		idem_preloaded = false;

static const struct config_enum_entry ig_stuck_action_options[] = {
	{"alert", IDEM_STUCK_ALERT, false},
	{"review", IDEM_STUCK_REVIEW, false},
	{NULL, 0, false}
};

/*
 * Define the settings, and remember whether we are being preloaded: a
 * backend forked from the postmaster inherits the flag.
 */
void
_PG_init(void)
{
	idem_preloaded = process_shared_preload_libraries_in_progress;

	DefineCustomIntVariable("idem_gate.max_key_length",
							"Longest accepted key or workflow name, in characters.",
							"Longer values are refused with SQLSTATE 22023; derive a shorter key with idem_hash().",
							&idem_max_key_length,
							255,
							1,
							1000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	/*
	 * The janitor's settings.  janitor_run() uses them without preloading,
	 * and a superuser may SET them for a one-off pass; the worker re-reads
	 * them from the configuration on SIGHUP.
	 */
	DefineCustomIntVariable("idem_gate.retention",
							"How long completed claims are kept.",
							"Keep keys longer than any sender retries: Stripe retries for 3 days.",
							&idem_retention,
							30 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.failed_retention",
							"How long failed_retryable claims are kept.",
							NULL,
							&idem_failed_retention,
							7 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.stuck_after",
							"Age after which a claim still processing raises an alert.",
							"Measured from the claim's last heartbeat (updated_at).",
							&idem_stuck_after,
							15 * SECS_PER_MINUTE, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("idem_gate.stuck_action",
							 "What the janitor does with a stuck claim: alert, or alert and move it to needs_review.",
							 NULL,
							 &idem_stuck_action,
							 IDEM_STUCK_ALERT, ig_stuck_action_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.batch_size",
							"Rows the janitor handles per transaction.",
							NULL,
							&idem_batch_size,
							1000, 1, 1000000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.batch_delay",
							"Pause of the background worker after each batch of a pass while the gate is in use.",
							"While claims are being made the worker works in batches of a tenth of idem_gate.batch_size and pauses this long after each, so that claims keep their latency; with no claims it does not pause. 0 never pauses.",
							&idem_batch_delay,
							5, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	idem_worker_define_settings();

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
