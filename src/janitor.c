/*-------------------------------------------------------------------------
 *
 * janitor.c
 *	  One janitor pass: retention and stuck-claim alerts.
 *
 * A pass deletes completed rows older than their retention and
 * failed_retryable rows older than theirs (never needs_review rows), and
 * raises one alert per claim stuck in processing: a NOTIFY on channel
 * idem_gate_alert with a JSON payload, one WARNING line per pass, a
 * counter; with idem_gate.stuck_action = 'review' the claim also moves to
 * needs_review.  Per-workflow values in idem_gate.policies override the
 * settings.
 *
 * Work is done in batches of idem_gate.batch_size rows, each found through
 * the (state, updated_at) index and locked with SKIP LOCKED, so a pass never
 * waits for a claim and costs what expires plus what is processing, not
 * the size of the table.  The background worker runs each batch in its own
 * transaction; idem_gate.janitor_run() runs the same code in the caller's
 * transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "janitor.h"
#include "stats.h"

/* Settings (idem_gate.c) */
int			idem_retention = 30 * SECS_PER_DAY;
int			idem_failed_retention = 7 * SECS_PER_DAY;
int			idem_stuck_after = 15 * SECS_PER_MINUTE;
int			idem_stuck_action = IDEM_STUCK_ALERT;
int			idem_batch_size = 1000;
int			idem_batch_delay = 5;

/* while the gate is in use, batches are this many times smaller */
#define IG_BUSY_BATCH_DIVISOR	10

/* Examples named in the pass's WARNING line. */
#define IG_ALERT_EXAMPLES	3

/*
 * The deletion batches.  Rows are taken in updated_at order through the
 * (state, updated_at) index, starting where the previous batch of the pass
 * stopped ($3), so a pass reads each expired index entry once.  The first
 * bound (LEAST of the setting and every policy) limits the range scan; the
 * second applies each row's own policy.
 *
 * failed_retryable rows are locked with SKIP LOCKED: a claim retrying one
 * holds its lock, and the janitor must not wait for it.  Completed rows are
 * final and nothing else locks them, so they are deleted without a separate
 * lock step, which would double the WAL written per row.
 */
#define IG_DELETE_SQL(state, column, lock) \
	"WITH del AS (" \
	" DELETE FROM idem_gate.claims d WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"  SELECT c.ctid FROM idem_gate.claims c" \
	"  LEFT JOIN idem_gate.policies p ON p.workflow OPERATOR(pg_catalog.=) c.workflow" \
	"  WHERE c.state OPERATOR(pg_catalog.=) '" state "'::idem_gate.state" \
	"  AND c.updated_at OPERATOR(pg_catalog.>=) $3" \
	"  AND c.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-)" \
	"    LEAST($1, (SELECT pg_catalog.min(q." column ") FROM idem_gate.policies q)))" \
	"  AND c.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-)" \
	"    COALESCE(p." column ", $1))" \
	"  ORDER BY c.updated_at LIMIT $2" lock "))" \
	" AND d.state OPERATOR(pg_catalog.=) '" state "'::idem_gate.state" \
	" RETURNING d.updated_at)" \
	"SELECT pg_catalog.count(*), pg_catalog.max(updated_at) FROM del"

static const char *const ig_delete_completed_sql =
IG_DELETE_SQL("completed", "retention", "");
static const char *const ig_delete_failed_sql =
IG_DELETE_SQL("failed_retryable", "failed_retention", " FOR UPDATE OF c SKIP LOCKED");

static const char *const ig_stuck_sql =
"WITH stuck AS ("
" SELECT c.ctid AS tid, pg_catalog.now() OPERATOR(pg_catalog.-) c.updated_at AS age"
" FROM idem_gate.claims c"
" LEFT JOIN idem_gate.policies p ON p.workflow OPERATOR(pg_catalog.=) c.workflow"
" WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state"
" AND c.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-)"
"   LEAST($1, (SELECT pg_catalog.min(q.stuck_after) FROM idem_gate.policies q)))"
" AND c.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-)"
"   COALESCE(p.stuck_after, $1))"
" AND (c.alerted_token IS NULL OR c.alerted_token OPERATOR(pg_catalog.<>) c.token)"
" ORDER BY c.updated_at LIMIT $2 FOR UPDATE OF c SKIP LOCKED),"
" done AS ("
" UPDATE idem_gate.claims c SET alerted_token = c.token,"
" state = CASE WHEN $3 THEN 'needs_review'::idem_gate.state ELSE c.state END,"
" last_error = CASE WHEN $3"
"   THEN 'stuck in processing for ' OPERATOR(pg_catalog.||) s.age::text"
"   ELSE c.last_error END,"
" updated_at = CASE WHEN $3 THEN GREATEST(pg_catalog.now(), c.updated_at)"
"   ELSE c.updated_at END"
" FROM stuck s WHERE c.ctid OPERATOR(pg_catalog.=) s.tid"
" RETURNING c.workflow, c.key, c.token, c.attempt, c.claimed_at, s.age)"
"SELECT workflow, key, token, age::text,"
" pg_catalog.pg_notify('idem_gate_alert', pg_catalog.json_build_object("
"   'workflow', workflow, 'key', key, 'token', token, 'attempt', attempt,"
"   'claimed_at', claimed_at, 'age', age,"
"   'action', CASE WHEN $3 THEN 'needs_review' ELSE 'alert' END)::text)"
" FROM done";

typedef enum IgJanitorPlan
{
	IG_JPLAN_DELETE_COMPLETED,
	IG_JPLAN_DELETE_FAILED,
	IG_JPLAN_STUCK,
	IG_NUM_JPLANS
} IgJanitorPlan;

static SPIPlanPtr ig_jplans[IG_NUM_JPLANS];

/* A pass in progress. */
typedef struct IgPass
{
	bool		own_transactions;	/* the worker: one transaction per batch */
	MemoryContext cxt;			/* survives the batches' transactions */
	IgJanitorCounts *counts;
	TimestampTz cursor;			/* deletions resume from here */
	char	   *examples[IG_ALERT_EXAMPLES];
} IgPass;

/* A number of seconds as an interval. */
static Datum
ig_seconds_interval(int seconds)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = (int64) seconds * USECS_PER_SEC;
	return IntervalPGetDatum(iv);
}

/*
 * Run one batch of plan id and return the rows it touched.  In the worker
 * the batch is a transaction of its own, committed at once and reported to
 * the statistics collector so that autovacuum sees the deletions.
 */
static uint64
ig_batch(IgPass *pass, IgJanitorPlan id, int limit)
{
	Oid			argtypes[3] = {INTERVALOID, INT4OID, BOOLOID};
	Datum		values[3];
	bool		deleting = (id != IG_JPLAN_STUCK);
	const char *text;
	int			seconds;
	uint64		n;

	switch (id)
	{
		case IG_JPLAN_DELETE_COMPLETED:
			text = ig_delete_completed_sql;
			seconds = idem_retention;
			break;
		case IG_JPLAN_DELETE_FAILED:
			text = ig_delete_failed_sql;
			seconds = idem_failed_retention;
			break;
		default:
			text = ig_stuck_sql;
			seconds = idem_stuck_after;
			break;
	}
	if (deleting)
		argtypes[2] = TIMESTAMPTZOID;

	if (pass->own_transactions)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "idem_gate janitor pass");
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * Generic plans from the first pass: their parameters never change the
	 * best plan (an index range scan), and on a big table the plan cache
	 * would otherwise keep planning every batch of an idle pass anew.
	 */
	if (ig_jplans[id] == NULL)
	{
		SPIPlanPtr	plan;

		plan = SPI_prepare_cursor(text, 3, argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 text, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		ig_jplans[id] = plan;
	}

	values[0] = ig_seconds_interval(seconds);
	values[1] = Int32GetDatum(limit);
	if (deleting)
		values[2] = TimestampTzGetDatum(pass->cursor);
	else
		values[2] = BoolGetDatum(idem_stuck_action == IDEM_STUCK_REVIEW);

	if (SPI_execute_plan(ig_jplans[id], values, NULL, false, 0) < 0)
		elog(ERROR, "idem_gate janitor query failed");
	n = SPI_processed;

	if (deleting)
	{
		bool		isnull;
		Datum		last;

		/* one row: count(*), max(updated_at) */
		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
		last = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
							 2, &isnull);
		if (!isnull)
			pass->cursor = DatumGetTimestampTz(last);
	}

	if (id == IG_JPLAN_STUCK)
	{
		MemoryContext old = MemoryContextSwitchTo(pass->cxt);

		for (uint64 i = 0; i < n; i++)
		{
			int64		k = pass->counts->alerts + i;

			if (k < IG_ALERT_EXAMPLES)
			{
				HeapTuple	tup = SPI_tuptable->vals[i];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				char	   *wf = SPI_getvalue(tup, desc, 1);
				char	   *key = SPI_getvalue(tup, desc, 2);

				pass->examples[k] = psprintf("workflow \"%s\" key \"%s\" token %s stuck for %s",
											 idem_display(wf), idem_display(key),
											 SPI_getvalue(tup, desc, 3),
											 SPI_getvalue(tup, desc, 4));
			}
		}
		MemoryContextSwitchTo(old);
	}

	SPI_finish();
	if (pass->own_transactions)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
		MemoryContextSwitchTo(pass->cxt);
	}
	return n;
}

/*
 * Run batches of one kind until a batch comes back short.
 *
 * The worker yields to live traffic.  While the gate's functions are being
 * called (its shared counters moved since the previous batch), it works in
 * batches of a tenth of idem_gate.batch_size with a pause of
 * idem_gate.batch_delay after each: a claim then never waits behind more
 * than a short burst of deletions, which is what sets its p99.  With no
 * traffic it runs full batches back to back.  idem_gate.janitor_run() runs
 * in its caller's transaction and never pauses.
 */
static uint64
ig_batches(IgPass *pass, IgJanitorPlan id)
{
	uint64		total = 0;
	uint64		n;
	int			limit = idem_batch_size;
	uint64		calls = idem_stats_gate_calls();

	pass->cursor = DT_NOBEGIN;
	for (;;)
	{
		uint64		calls_now;

		CHECK_FOR_INTERRUPTS();
		n = ig_batch(pass, id, limit);
		total += n;
		if (id == IG_JPLAN_STUCK)
			pass->counts->alerts += n;
		if (n < (uint64) limit)
			break;
		if (!pass->own_transactions || idem_batch_delay == 0)
			continue;

		calls_now = idem_stats_gate_calls();
		if (calls_now == calls)
		{
			limit = idem_batch_size;
			continue;
		}

		calls = calls_now;
		limit = Max(1, idem_batch_size / IG_BUSY_BATCH_DIVISOR);
		/* SIGTERM still ends the wait at once */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idem_batch_delay, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	return total;
}

/*
 * One janitor pass.  own_transactions is true in the worker, which must be
 * outside any transaction when it calls this.
 */
void
idem_janitor_pass(IgJanitorCounts *counts, bool own_transactions)
{
	IgPass		pass;
	TimestampTz start = GetCurrentTimestamp();
	MemoryContext caller = CurrentMemoryContext;

	memset(counts, 0, sizeof(*counts));
	memset(&pass, 0, sizeof(pass));
	pass.own_transactions = own_transactions;
	pass.counts = counts;
	pass.cxt = AllocSetContextCreate(own_transactions ? TopMemoryContext : caller,
									 "idem_gate janitor pass",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(pass.cxt);

	counts->deleted_completed = ig_batches(&pass, IG_JPLAN_DELETE_COMPLETED);
	counts->deleted_failed = ig_batches(&pass, IG_JPLAN_DELETE_FAILED);
	ig_batches(&pass, IG_JPLAN_STUCK);
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
				(errmsg("idem_gate: " INT64_FORMAT " claims stuck in processing%s",
						counts->alerts,
						idem_stuck_action == IDEM_STUCK_REVIEW ?
						", moved to needs_review" : ""),
				 errdetail("%s.", detail.data),
				 errhint("Their side effects may have half-happened: check them, then call idem_resolve() with 'completed' or 'retry'.")));
	}

	idem_stats_add(IG_STAT_DELETED_COMPLETED, counts->deleted_completed);
	idem_stats_add(IG_STAT_DELETED_FAILED, counts->deleted_failed);
	idem_stats_add(IG_STAT_ALERTS, counts->alerts);
	idem_stats_add(IG_STAT_ESCALATIONS, counts->escalated);
	idem_stats_pass_done(start, GetCurrentTimestamp());

	ereport(DEBUG1,
			(errmsg("idem_gate janitor pass: deleted " INT64_FORMAT " completed and " INT64_FORMAT " failed rows, " INT64_FORMAT " stuck-claim alerts in %ld ms",
					counts->deleted_completed, counts->deleted_failed,
					counts->alerts,
					(long) ((GetCurrentTimestamp() - start) / 1000))));

	MemoryContextSwitchTo(caller);
	MemoryContextDelete(pass.cxt);
}

/*
 * idem_gate.janitor_run(): one pass from SQL, in the caller's transaction,
 * acting as the function's owner like the API functions.
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

	PreventCommandIfReadOnly("idem_gate.janitor_run()");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(idem_function_owner(fcinfo),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	idem_janitor_pass(&counts, false);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	values[0] = Int64GetDatum(counts.deleted_completed + counts.deleted_failed);
	values[1] = Int64GetDatum(counts.deleted_completed);
	values[2] = Int64GetDatum(counts.deleted_failed);
	values[3] = Int64GetDatum(counts.alerts);
	values[4] = Int64GetDatum(counts.escalated);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
