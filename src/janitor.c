/*-------------------------------------------------------------------------
 *
 * janitor.c
 *	  One janitor pass: retention, receipt clearing, stuck-claim alerts and
 *	  the pruning of the audit trail.
 *
 * A pass deletes completed rows older than their retention and
 * failed_retryable rows older than theirs (never needs_review rows), clears
 * the receipts of completed rows older than their receipt retention, and
 * raises one alert per claim stuck in processing: a NOTIFY on channel
 * idem_gate_alert with a JSON payload, one WARNING line per pass, a
 * counter; with idem_gate.stuck_action = 'review' the claim also moves to
 * needs_review, recorded in idem_gate.audit.  Per-workflow values in
 * idem_gate.policies override the settings; every interval is a duration
 * of fixed length.
 *
 * Each step walks the workflows that have rows in its state, one index
 * range of (state, workflow, updated_at, token) each, so a pass costs what
 * expires (and what is processing) per workflow, not the size of the table
 * nor the other workflows' rows.  Within a workflow, rows are taken in
 * batches of idem_gate.batch_size in (updated_at, token) order, each batch
 * resuming exactly after the last.  The background worker runs each batch
 * in its own transaction; idem_gate.janitor_run() runs the same code in the
 * caller's transaction.  The statements are in janitor_sql.c, the alerts'
 * payloads and log lines in janitor_alert.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/twophase.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "audit.h"
#include "call.h"
#include "citus.h"
#include "compat.h"
#include "janitor.h"
#include "janitor_int.h"
#include "shape.h"
#include "stats.h"
#include "store.h"

/* Settings, in seconds where they are times */
int			idem_retention = 30 * SECS_PER_DAY;
int			idem_failed_retention = 7 * SECS_PER_DAY;
int			idem_receipt_retention = 0; /* 0: as long as the row */
int			idem_audit_retention = 400 * SECS_PER_DAY;
int			idem_stuck_after = 15 * SECS_PER_MINUTE;
int			idem_stuck_action = IDEM_STUCK_ALERT;
int			idem_batch_size = 1000;
int			idem_batch_delay = 5;

static const struct config_enum_entry ig_stuck_action_options[] = {
	{"alert", IDEM_STUCK_ALERT, false},
	{"review", IDEM_STUCK_REVIEW, false},
	{NULL, 0, false}
};

/* A receipt retention must be shorter than the retention of its rows. */
static bool
ig_check_receipt_retention(int *newval, void **extra, GucSource source)
{
	if (*newval != 0 && *newval >= idem_retention)
	{
		GUC_check_errdetail("idem_gate.receipt_retention (%d s) must be shorter than idem_gate.retention (%d s): a receipt never outlives its row.",
							*newval, idem_retention);
		return false;
	}
	return true;
}

/* The retention must stay longer than the receipt retention. */
static bool
ig_check_retention(int *newval, void **extra, GucSource source)
{
	if (idem_receipt_retention != 0 && *newval <= idem_receipt_retention)
	{
		GUC_check_errdetail("idem_gate.retention (%d s) must be longer than idem_gate.receipt_retention (%d s).",
							*newval, idem_receipt_retention);
		return false;
	}
	return true;
}

/*
 * The janitor's settings.  janitor_run() uses them without preloading, and
 * a superuser may SET them for a one-off pass; the worker re-reads them
 * from the configuration on SIGHUP.  Times are whole seconds: durations
 * of fixed length.
 */
void
idem_janitor_define_settings(void)
{
	DefineCustomIntVariable("idem_gate.retention",
							"How long completed claims are kept.",
							"Keep keys longer than any sender retries: Stripe retries for 3 days.",
							&idem_retention,
							30 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							ig_check_retention, NULL, NULL);
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
	DefineCustomIntVariable("idem_gate.receipt_retention",
							"How long completed claims keep their receipt; 0 keeps it as long as the row.",
							"Receipts may hold personal data: the janitor clears them after this, and keeps the key until idem_gate.retention, so a late redelivery is still answered completed. Must be shorter than idem_gate.retention.",
							&idem_receipt_retention,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							ig_check_receipt_retention, NULL, NULL);
	DefineCustomIntVariable("idem_gate.audit_retention",
							"How long the janitor keeps the rows of idem_gate.audit.",
							NULL,
							&idem_audit_retention,
							400 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
}


/* while the gate is in use, batches are this many times smaller */
#define IG_BUSY_BATCH_DIVISOR	10

/* The counter of each step's rows. */
static const IgStat ig_step_stats[IG_NUM_STEPS] = {
	IG_STAT_DELETED_COMPLETED, IG_STAT_DELETED_FAILED, IG_STAT_RECEIPTS_CLEARED,
	IG_STAT_ALERTS, IG_STAT_RECEIPTS_CLEARED, IG_STAT_RECEIPTS_CLEARED,
	IG_STAT_RECEIPTS_CLEARED
};

/* Each step's setting, in seconds, for workflows without a policy. */
static const int *const ig_step_settings[IG_NUM_STEPS] = {
	&idem_retention, &idem_failed_retention, &idem_receipt_retention,
	&idem_stuck_after, &idem_receipt_retention, &idem_receipt_retention,
	&idem_receipt_retention
};

/* Load the policies (and, on 1.1, the receipt watermarks) for a pass. */
static void
ig_load_policies(IgPass *pass)
{
	ig_unit_begin(pass);
	ig_jexec(pass, IG_JPLAN_POLICIES, NULL, NULL);
	{
		MemoryContext old = MemoryContextSwitchTo(pass->cxt);

		pass->npolicies = SPI_processed;
		pass->policies = palloc0(sizeof(IgPolicy) * Max(pass->npolicies, 1));
		for (int i = 0; i < pass->npolicies; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			IgPolicy   *p = &pass->policies[i];

			p->workflow = SPI_getvalue(tup, SPI_tuptable->tupdesc, 1);
			p->secs[IG_STEP_DELETE_COMPLETED] = ig_jfloat(tup, 2);
			p->secs[IG_STEP_DELETE_FAILED] = ig_jfloat(tup, 3);
			p->secs[IG_STEP_CLEAR_RECEIPTS] = ig_jfloat(tup, 4);
			p->secs[IG_STEP_STUCK] = ig_jfloat(tup, 5);
			p->secs[IG_STEP_CLEAR_PAYLOADS_PROCESSING] = ig_jfloat(tup, 4);
			p->secs[IG_STEP_CLEAR_PAYLOADS_FAILED] = ig_jfloat(tup, 4);
			p->secs[IG_STEP_CLEAR_PAYLOADS_REVIEW] = ig_jfloat(tup, 4);
		}
		MemoryContextSwitchTo(old);
	}
	if (pass->v11 &&
		SPI_execute("SELECT w.workflow, w.receipts_cleared_until"
					" FROM ONLY idem_gate.janitor_watermarks w", true, 0) == SPI_OK_SELECT)
	{
		MemoryContext old = MemoryContextSwitchTo(pass->cxt);

		for (uint64 i = 0; i < SPI_processed; i++)
		{
			IgWatermark *w = palloc0(sizeof(IgWatermark));
			bool		isnull;

			w->workflow = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			w->upto = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i],
														SPI_tuptable->tupdesc, 2,
														&isnull));
			pass->watermarks = lappend(pass->watermarks, w);
		}
		MemoryContextSwitchTo(old);
	}
	ig_unit_end(pass);
}

/*
 * The effective interval of a step for a workflow, in microseconds: its
 * policy's, else the setting's; 0 means the step does nothing there.
 */
static int64
ig_step_usecs(IgPass *pass, IgStep step, const char *workflow)
{
	double		secs = -1;
	double		retention = -1;

	for (int i = 0; i < pass->npolicies; i++)
		if (strcmp(pass->policies[i].workflow, workflow) == 0)
		{
			secs = pass->policies[i].secs[step];
			retention = pass->policies[i].secs[IG_STEP_DELETE_COMPLETED];
			break;
		}
	if (secs < 0)
		secs = *ig_step_settings[step];
	if (step == IG_STEP_CLEAR_RECEIPTS && secs > 0)
	{
		/* a receipt never outlives its row: keep within the retention */
		if (retention < 0)
			retention = idem_retention;
		if (secs >= retention)
			secs = 0;
	}
	return (int64) (secs * USECS_PER_SEC);
}

/* Where the receipts of a workflow were cleared up to, or DT_NOBEGIN. */
static TimestampTz
ig_watermark(IgPass *pass, const char *workflow)
{
	ListCell   *lc;

	if (pass->shard != NULL)
		return DT_NOBEGIN;		/* on Citus: one watermark per node, not per shard */
	foreach(lc, pass->watermarks)
	{
		IgWatermark *w = lfirst(lc);

		if (strcmp(w->workflow, workflow) == 0)
			return w->upto;
	}
	return DT_NOBEGIN;
}


/*
 * Run one batch of step over workflow's rows after *cursor and before
 * cutoff, and return the rows it touched; *cursor moves to the last of
 * them in (updated_at, token) order.
 */
static uint64
ig_batch(IgPass *pass, IgStep step, const char *workflow,
		 IgCursor *cursor, TimestampTz cutoff, TimestampTz now)
{
	bool		review = (idem_stuck_action == IDEM_STUCK_REVIEW);
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			setting = *ig_step_settings[step];
	uint64		n;
	bool		isnull;
	HeapTuple	last = NULL;
	int			at_col = 2;
	int			token_col = 3;

	values[0] = CStringGetTextDatum(workflow);
	values[1] = TimestampTzGetDatum(cursor->at);
	values[2] = TimestampTzGetDatum(cutoff);
	values[3] = Int32GetDatum(pass->limit);
	values[4] = TimestampTzGetDatum(now);
	values[5] = BoolGetDatum(review);
	values[6] = Int64GetDatum(cursor->token);
	/* a receipt retention of 0 keeps receipts: no cutoff without a policy */
	values[7] = Float8GetDatum((double) setting);
	nulls[7] = (setting == 0) ? 'n' : ' ';

	ig_unit_begin(pass);
	ig_jexec(pass, IG_JPLAN_BATCH + step, values, nulls);
	if (step == IG_STEP_STUCK)
	{
		/* the alerted rows, in (updated_at, token) order */
		n = SPI_processed;
		if (n > 0)
			last = SPI_tuptable->vals[n - 1];
		at_col = 7;
		token_col = 3;
		ig_alert_rows(pass, review);
	}
	else
	{
		/* one row: count(*) and the last row's updated_at and token */
		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
		if (n > 0)
			last = SPI_tuptable->vals[0];
	}
	if (last != NULL)
	{
		cursor->at = DatumGetTimestampTz(SPI_getbinval(last, SPI_tuptable->tupdesc,
													   at_col, &isnull));
		cursor->token = DatumGetInt64(SPI_getbinval(last, SPI_tuptable->tupdesc,
													token_col, &isnull));
	}
	if (step == IG_STEP_STUCK)
		ig_alert_forward(pass);
	ig_unit_end(pass);

	/* counted as each batch commits, so the counters follow the rows */
	idem_stats_add(ig_step_stats[step], n);
	if (step == IG_STEP_STUCK && review)
		idem_stats_add(IG_STAT_ESCALATIONS, n);
	return n;
}

/*
 * Between two full batches, the worker yields to live traffic.  While the
 * gate's functions are being called (its shared counters moved since the
 * previous batch), it works in batches of a tenth of idem_gate.batch_size
 * with a pause of idem_gate.batch_delay after each: a claim then never
 * waits behind more than a short burst of deletions, which is what sets
 * its p99.  With no traffic it runs full batches back to back.
 * idem_gate.janitor_run() runs in its caller's transaction and never
 * pauses.
 */
static void
ig_yield(IgPass *pass)
{
	uint64		calls_now;

	if (!pass->own_transactions || idem_batch_delay == 0)
		return;
	calls_now = idem_stats_gate_calls();
	if (calls_now == pass->calls)
	{
		pass->limit = idem_batch_size;
		return;
	}
	pass->calls = calls_now;
	pass->limit = Max(1, idem_batch_size / IG_BUSY_BATCH_DIVISOR);
	/* SIGTERM still ends the wait at once */
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 idem_batch_delay, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/* The next workflow after prev with rows in step's state, or NULL. */
static char *
ig_next_workflow(IgPass *pass, IgStep step, const char *prev)
{
	Datum		value = CStringGetTextDatum(prev);
	char	   *wf = NULL;

	ig_unit_begin(pass);
	ig_jexec(pass, IG_JPLAN_NEXT_WF + step, &value, NULL);
	if (SPI_processed == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(pass->cxt);

		wf = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		MemoryContextSwitchTo(old);
	}
	ig_unit_end(pass);
	return wf;
}

/*
 * Remember that the receipts of workflow are cleared up to upto, so the
 * next pass starts there and does not walk rows it already cleared.
 */
static void
ig_save_watermark(IgPass *pass, const char *workflow, TimestampTz upto)
{
	Datum		values[2];

	if (pass->shard != NULL)
		return;
	values[0] = CStringGetTextDatum(workflow);
	values[1] = TimestampTzGetDatum(upto);
	ig_unit_begin(pass);
	ig_jexec(pass, IG_JPLAN_WATERMARK, values, NULL);
	ig_unit_end(pass);
}

/*
 * How far the receipt watermarks may move: before the start of every
 * transaction now open.  A completion's updated_at is the time of its
 * write, which comes after its transaction began; a completing
 * transaction still open, which this pass cannot see, therefore wrote its
 * row after the horizon, and the next pass, starting there, finds it
 * once it commits.  Read before the pass's batches take their snapshots.
 * False when the horizon cannot be known, so that no watermark moves: a
 * prepared transaction (its writes are older than anything says), a
 * transaction in a backend that does not report its start
 * (track_activities off), a caller's snapshot older than the horizon
 * (idem_gate.janitor_run() under REPEATABLE READ).
 */
static bool
ig_receipts_horizon(IgPass *pass, TimestampTz *horizon)
{
	bool		known = !IsolationUsesXactSnapshot();
	int			n;

	*horizon = DT_NOEND;
	ig_unit_begin(pass);
	if (known && max_prepared_xacts > 0)
	{
		if (SPI_execute("SELECT 1 FROM pg_catalog.pg_prepared_xacts LIMIT 1",
						true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read pg_prepared_xacts");
		known = (SPI_processed == 0);
	}
	pgstat_clear_backend_activity_snapshot();
	n = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= n && known; i++)
	{
		LocalPgBackendStatus *be = ig_compat_local_beentry(i);
		TimestampTz start;

		if (be == NULL || be->backendStatus.st_procpid == MyProcPid)
			continue;
		start = be->backendStatus.st_xact_start_timestamp;
		if (start != 0)
			*horizon = Min(*horizon, start);
		else if (TransactionIdIsValid(be->backend_xid))
			known = false;		/* writing, and not saying since when */
	}
	if (!pgstat_track_activities)
		known = false;
	ig_unit_end(pass);
	return known;
}

/*
 * One step over every workflow with rows in its state.  Returns the rows
 * it touched.
 */
static uint64
ig_step(IgPass *pass, IgStep step)
{
	uint64		total = 0;
	char	   *wf = pstrdup("");
	TimestampTz horizon = DT_NOEND;
	bool		horizon_known = false;

	if (step == IG_STEP_CLEAR_RECEIPTS)
		horizon_known = ig_receipts_horizon(pass, &horizon);
	while ((wf = ig_next_workflow(pass, step, wf)) != NULL)
	{
		int64		usecs = ig_step_usecs(pass, step, wf);
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz cutoff = now - usecs;
		IgCursor	cursor = {DT_NOBEGIN, 0};
		uint64		n;

		CHECK_FOR_INTERRUPTS();
		if (usecs <= 0)
			continue;
		if (step == IG_STEP_CLEAR_RECEIPTS)
		{
			cursor.at = ig_watermark(pass, wf);
			if (cursor.at >= cutoff)
				continue;
		}
		do
		{
			n = ig_batch(pass, step, wf, &cursor, cutoff, now);
			total += n;
			if (step == IG_STEP_STUCK)
				pass->counts->alerts += n;
			if (n >= (uint64) pass->limit)
				ig_yield(pass);
		} while (n >= (uint64) pass->limit);
		if (step == IG_STEP_CLEAR_RECEIPTS && horizon_known)
			ig_save_watermark(pass, wf, Min(cutoff, horizon));
	}
	return total;
}

/* Drop audit rows older than idem_gate.audit_retention, in batches. */
static void
ig_prune_audit(IgPass *pass)
{
	Datum		values[2];
	uint64		n;

	values[0] = TimestampTzGetDatum(GetCurrentTimestamp() -
									(int64) idem_audit_retention * USECS_PER_SEC);
	do
	{
		bool		isnull;

		values[1] = Int32GetDatum(pass->limit);
		ig_unit_begin(pass);
		ig_audit_allow_pruning(true);
		PG_TRY();
		{
			ig_jexec(pass, IG_JPLAN_PRUNE_AUDIT, values, NULL);
		}
		PG_FINALLY();
		{
			ig_audit_allow_pruning(false);
		}
		PG_END_TRY();
		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
		ig_unit_end(pass);
	} while (n >= (uint64) pass->limit);
}

/* Does this database hold idem_gate 1.1's objects, and 1.2's? */
static void
ig_catalog_version(IgPass *pass)
{
	Oid			nsp;

	ig_unit_begin(pass);
	nsp = get_namespace_oid("idem_gate", false);
	pass->v11 = OidIsValid(get_relname_relid("janitor_watermarks", nsp));
	pass->v12 = (get_attnum(get_relname_relid("claims", nsp), "payload") != InvalidAttrNumber);
	ig_unit_end(pass);
}

/*
 * Is a receipt retention set, by the setting or a policy?  Without one the
 * clearing steps have nothing to do, and do not walk the workflows.
 */
static bool
ig_receipt_retention_set(IgPass *pass)
{
	if (idem_receipt_retention > 0)
		return true;
	for (int i = 0; i < pass->npolicies; i++)
		if (pass->policies[i].secs[IG_STEP_CLEAR_RECEIPTS] > 0)
			return true;
	return false;
}

/*
 * The steps of a pass over idem_gate.claims, or on Citus over one of the
 * shards this node holds.
 */
static void
ig_pass_steps(IgPass *pass)
{
	IgJanitorCounts *counts = pass->counts;

	counts->deleted_completed += ig_step(pass, IG_STEP_DELETE_COMPLETED);
	counts->deleted_failed += ig_step(pass, IG_STEP_DELETE_FAILED);
	if (pass->v11 && ig_receipt_retention_set(pass))
		pass->receipts_cleared += ig_step(pass, IG_STEP_CLEAR_RECEIPTS);
	ig_step(pass, IG_STEP_STUCK);
	if (pass->v12 && ig_receipt_retention_set(pass))
	{
		pass->receipts_cleared += ig_step(pass, IG_STEP_CLEAR_PAYLOADS_PROCESSING);
		pass->receipts_cleared += ig_step(pass, IG_STEP_CLEAR_PAYLOADS_FAILED);
		pass->receipts_cleared += ig_step(pass, IG_STEP_CLEAR_PAYLOADS_REVIEW);
	}
	if (pass->v11)
		ig_prune_audit(pass);
}

/*
 * The shards of idem_gate.claims this node holds, or NIL where the table
 * is not a Citus table (citus set accordingly).
 */
static List *
ig_local_shards(IgPass *pass, bool *citus)
{
	List	   *shards = NIL;

	ig_unit_begin(pass);
	*citus = ig_store_is_citus();
	if (*citus)
	{
		MemoryContext old = MemoryContextSwitchTo(pass->cxt);

		shards = ig_citus_local_shards();
		MemoryContextSwitchTo(old);
		pass->forward_alerts = (ig_citus_local_group() != 0);
	}
	ig_unit_end(pass);
	return shards;
}

/*
 * One janitor pass.  own_transactions is true in the worker, which must be
 * outside any transaction when it calls this.  On Citus each node cleans
 * the shards it holds, so each claim is cleaned once across the cluster.
 */
void
idem_janitor_pass(IgJanitorCounts *counts, bool own_transactions)
{
	IgPass		pass;
	TimestampTz start = GetCurrentTimestamp();
	MemoryContext caller = CurrentMemoryContext;
	List	   *shards;
	ListCell   *lc;
	bool		citus;

	memset(counts, 0, sizeof(*counts));
	memset(&pass, 0, sizeof(pass));
	pass.own_transactions = own_transactions;
	pass.counts = counts;
	pass.limit = idem_batch_size;
	pass.calls = idem_stats_gate_calls();
	pass.cxt = AllocSetContextCreate(own_transactions ? TopMemoryContext : caller,
									 "idem_gate janitor pass",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(pass.cxt);

	ig_catalog_version(&pass);
	ig_load_policies(&pass);
	shards = ig_local_shards(&pass, &citus);
	if (!citus)
		ig_pass_steps(&pass);
	foreach(lc, shards)
	{
		pass.shard = lfirst(lc);
		ig_pass_steps(&pass);
	}
	pass.shard = NULL;
	if (idem_stuck_action == IDEM_STUCK_REVIEW)
		counts->escalated = counts->alerts;

	if (counts->alerts > 0)
	{
		StringInfoData detail;

		initStringInfo(&detail);
		for (int i = 0; i < IG_ALERT_EXAMPLES && i < counts->alerts; i++)
			appendStringInfo(&detail, "%s%s", i > 0 ? "; " : "", pass.examples[i]);
		if (counts->alerts > IG_ALERT_EXAMPLES)
			appendStringInfo(&detail, "; and " INT64_FORMAT " more",
							 counts->alerts - IG_ALERT_EXAMPLES);
		ereport(WARNING,
				(errmsg_plural("idem_gate: " INT64_FORMAT " claim stuck in processing%s",
							   "idem_gate: " INT64_FORMAT " claims stuck in processing%s",
							   counts->alerts, counts->alerts,
							   idem_stuck_action == IDEM_STUCK_REVIEW ?
							   ", moved to needs_review" : ""),
				 errdetail("%s.", detail.data),
				 errhint("Their side effects may have half-happened: check them, then call idem_resolve() with 'completed' or 'retry'.")));
	}

	idem_stats_pass_done(start, GetCurrentTimestamp());

	ereport(DEBUG1,
			(errmsg("idem_gate janitor pass: deleted " INT64_FORMAT " completed and " INT64_FORMAT " failed rows, cleared " INT64_FORMAT " receipts, " INT64_FORMAT " stuck-claim alerts in %ld ms",
					counts->deleted_completed, counts->deleted_failed,
					pass.receipts_cleared, counts->alerts,
					(long) ((GetCurrentTimestamp() - start) / 1000))));

	MemoryContextSwitchTo(caller);
	MemoryContextDelete(pass.cxt);
}

/*
 * Guard a pass that runs in a caller's session (idem_gate.janitor_run())
 * against code attached to the tables it touches: the claims, the audit
 * trail and the watermarks it writes, the policies it reads.  Returns the
 * GUC nest level of the pinned search_path, or 0 when nothing is attached.
 */
static int
ig_janitor_guard(void)
{
	static const IgTable written[] = {
		IG_TABLE_CLAIMS, IG_TABLE_AUDIT, IG_TABLE_WATERMARKS
	};
	bool		code = false;

	ig_store_refuse();
	for (int i = 0; i < lengthof(written); i++)
	{
		const IgTableShape *s = ig_table_shape(written[i]);
		const char *what = s->write_code;

		ig_refuse_rules(written[i]);
		if (what == NULL && s->policy_code != NULL && ig_rls_applies(written[i]))
			what = s->policy_code;
		if (what != NULL)
		{
			ig_call_guard_user_code(NULL, written[i], what);
			code = true;
		}
	}
	if (ig_table_shape(IG_TABLE_POLICIES)->policy_code != NULL &&
		ig_rls_applies(IG_TABLE_POLICIES))
	{
		ig_call_guard_user_code(NULL, IG_TABLE_POLICIES,
								ig_table_shape(IG_TABLE_POLICIES)->policy_code);
		code = true;
	}
	return code ? ig_call_pin_search_path() : 0;
}

/*
 * idem_gate.janitor_run(): one pass from SQL, in the caller's transaction,
 * acting as the function's owner like the API functions, and under the
 * same guard for code attached to the tables it touches.
 */
PG_FUNCTION_INFO_V1(idem_gate_janitor_run);

Datum
idem_gate_janitor_run(PG_FUNCTION_ARGS)
{
	IgJanitorCounts counts;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level;

	PreventCommandIfReadOnly("idem_gate.janitor_run()");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	guc_level = ig_janitor_guard();
	idem_janitor_pass(&counts, false);
	if (guc_level != 0)
		AtEOXact_GUC(true, guc_level);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	values[0] = Int64GetDatum(counts.deleted_completed + counts.deleted_failed);
	values[1] = Int64GetDatum(counts.deleted_completed);
	values[2] = Int64GetDatum(counts.deleted_failed);
	values[3] = Int64GetDatum(counts.alerts);
	values[4] = Int64GetDatum(counts.escalated);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
