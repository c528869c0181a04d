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

#include "access/htup_details.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "acl.h"
#include "alert.h"
#include "call.h"
#include "citus.h"
#include "compat.h"
#include "durable.h"
#include "janitor.h"
#include "janitor_sql.h"
#include "shape.h"
#include "stats.h"
#include "store.h"

/* Examples named in the pass's WARNING line. */
#define ALERT_EXAMPLES	3

/* What idem_gate.stuck_action says to do with a stuck claim. */
typedef enum StuckAction
{
	STUCK_ALERT,
	STUCK_REVIEW
} StuckAction;

/* A pass in progress. */
typedef struct Pass
{
	IgJanitorDb db;				/* where its statements run */
	IgJanitorCounts *counts;
	int64		receipts_cleared;
	TimestampTz skipped;		/* receipts: the first row a batch skipped */
	IgPolicy   *policies;
	int			npolicies;
	List	   *watermarks;		/* receipts cleared, per workflow */
	char	   *examples[ALERT_EXAMPLES];
	int			nexamples;
	Oid			caller;			/* janitor_run()'s caller, whose workflow
								 * grants bound the examples; or InvalidOid */
	uint64		calls;			/* gate calls seen at the last batch */
	int			limit;			/* rows per batch now */
	bool		forward_alerts; /* a Citus worker: alerts go to the coordinator */
} Pass;

/* Settings, in seconds where they are times */
static int	retention = 30 * SECS_PER_DAY;
static int	failed_retention = 7 * SECS_PER_DAY;
static int	receipt_retention = 0;	/* 0: as long as the row */
static int	audit_retention = 400 * SECS_PER_DAY;
static int	stuck_after = 15 * SECS_PER_MINUTE;
static int	stuck_action = STUCK_ALERT;
static int	batch_size = 1000;
static int	batch_delay = 5;

static const struct config_enum_entry stuck_action_options[] = {
	{"alert", STUCK_ALERT, false},
	{"review", STUCK_REVIEW, false},
	{NULL, 0, false}
};

/* A receipt retention must be shorter than the retention of its rows. */
static bool
check_receipt_retention(int *newval, void **extra, GucSource source)
{
	if (*newval != 0 && *newval >= retention)
	{
		GUC_check_errdetail("idem_gate.receipt_retention (%d s) must be shorter than idem_gate.retention (%d s): a receipt never outlives its row.",
							*newval, retention);
		return false;
	}
	return true;
}

/* The retention must stay longer than the receipt retention. */
static bool
check_retention(int *newval, void **extra, GucSource source)
{
	if (receipt_retention != 0 && *newval <= receipt_retention)
	{
		GUC_check_errdetail("idem_gate.retention (%d s) must be longer than idem_gate.receipt_retention (%d s).",
							*newval, receipt_retention);
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
ig_janitor_init(void)
{
	DefineCustomIntVariable("idem_gate.retention",
							"How long completed claims are kept.",
							"Keep keys longer than any sender retries: Stripe retries for 3 days.",
							&retention,
							30 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							check_retention, NULL, NULL);
	DefineCustomIntVariable("idem_gate.failed_retention",
							"How long failed_retryable claims are kept.",
							NULL,
							&failed_retention,
							7 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.stuck_after",
							"Age after which a claim still processing raises an alert.",
							"Measured from the claim's last heartbeat (updated_at).",
							&stuck_after,
							15 * SECS_PER_MINUTE, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("idem_gate.stuck_action",
							 "What the janitor does with a stuck claim: alert, or alert and move it to needs_review.",
							 NULL,
							 &stuck_action,
							 STUCK_ALERT, stuck_action_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.batch_size",
							"Rows the janitor handles per transaction.",
							NULL,
							&batch_size,
							1000, 1, 1000000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.batch_delay",
							"Pause of the background worker after each batch of a pass while the gate is in use.",
							"While claims are being made the worker works in batches of a tenth of idem_gate.batch_size and pauses this long after each, so that claims keep their latency; with no claims it does not pause. 0 never pauses.",
							&batch_delay,
							5, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.receipt_retention",
							"How long completed claims keep their receipt; 0 keeps it as long as the row.",
							"Receipts may hold personal data: the janitor clears them after this, and keeps the key until idem_gate.retention, so a late redelivery is still answered completed. Must be shorter than idem_gate.retention.",
							&receipt_retention,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							check_receipt_retention, NULL, NULL);
	DefineCustomIntVariable("idem_gate.audit_retention",
							"How long the janitor keeps the rows of idem_gate.audit.",
							NULL,
							&audit_retention,
							400 * SECS_PER_DAY, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
}


/* while the gate is in use, batches are this many times smaller */
#define BUSY_BATCH_DIVISOR	10

/* The counter of each step's rows. */
static const IgStat step_stats[IG_NUM_STEPS] = {
	IG_STAT_DELETED_COMPLETED, IG_STAT_DELETED_FAILED, IG_STAT_RECEIPTS_CLEARED,
	IG_STAT_ALERTS, IG_STAT_RECEIPTS_CLEARED, IG_STAT_RECEIPTS_CLEARED,
	IG_STAT_RECEIPTS_CLEARED
};

/* Each step's setting, in seconds, for workflows without a policy. */
static const int *const step_settings[IG_NUM_STEPS] = {
	&retention, &failed_retention, &receipt_retention,
	&stuck_after, &receipt_retention, &receipt_retention,
	&receipt_retention
};

/* Load the policies (and, on 1.1, the receipt watermarks) for a pass. */
static void
load_policies(Pass *pass)
{
	ig_janitor_sql_begin(&pass->db);
	pass->npolicies = ig_janitor_sql_policies(&pass->db, &pass->policies);
	if (pass->db.v11)
		pass->watermarks = ig_janitor_sql_watermarks(&pass->db);
	ig_janitor_sql_end(&pass->db);
}

/*
 * The effective interval of a step for a workflow, in microseconds: its
 * policy's, else the setting's; 0 means the step does nothing there.
 */
static int64
step_usecs(Pass *pass, IgStep step, const char *workflow)
{
	double		secs = -1;
	double		row_retention = -1;

	for (int i = 0; i < pass->npolicies; i++)
		if (strcmp(pass->policies[i].workflow, workflow) == 0)
		{
			secs = pass->policies[i].secs[step];
			row_retention = pass->policies[i].secs[IG_STEP_DELETE_COMPLETED];
			break;
		}
	if (secs < 0)
		secs = *step_settings[step];
	if (step == IG_STEP_CLEAR_RECEIPTS && secs > 0)
	{
		/* a receipt never outlives its row: keep within the retention */
		if (row_retention < 0)
			row_retention = retention;
		if (secs >= row_retention)
			secs = 0;
	}
	return (int64) (secs * USECS_PER_SEC);
}

/* Where the receipts of a workflow were cleared up to, or DT_NOBEGIN. */
static TimestampTz
watermark(Pass *pass, const char *workflow)
{
	ListCell   *lc;

	if (pass->db.shard != NULL)
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
 * Raise the alerts of one stuck batch: a NOTIFY per claim, raised on the
 * coordinator too from a Citus worker, and the examples of the WARNING
 * line.  With stuck_action = 'review' the claim entered the inbox as
 * needs_review, otherwise as stuck.
 */
static void
raise_alerts(Pass *pass, const IgBatchResult *batch, bool review)
{
	TimestampTz now = GetCurrentTimestamp();
	List	   *forward = NIL;

	for (uint64 i = 0; i < batch->count; i++)
	{
		const IgStuckClaim *c = &batch->stuck[i];
		char	   *payload;

		payload = ig_alert_announce(c->workflow, review ? "needs_review" : "stuck", now);
		if (review)
			ig_durable_wrote(c->workflow, c->key);
		if (pass->forward_alerts)
			forward = lappend(forward, payload);
		/* janitor_run()'s WARNING names only claims its caller may see */
		if (pass->nexamples < ALERT_EXAMPLES &&
			(!OidIsValid(pass->caller) || ig_acl_visible(pass->caller, c->workflow)))
		{
			MemoryContext old = MemoryContextSwitchTo(pass->db.cxt);

			pass->examples[pass->nexamples++] = psprintf("workflow \"%s\" key \"%s\" stuck for %s",
										 ig_alert_log_display(c->workflow),
										 ig_alert_log_display(c->key), c->age);
			MemoryContextSwitchTo(old);
		}
	}
	if (forward != NIL)
		ig_citus_notify_coordinator(forward);
}

/*
 * Run one batch of step over workflow's rows after *cursor and before
 * cutoff, and return the rows it touched; *cursor moves to the last row
 * it chose in (updated_at, token) order, and *examined says how many it
 * chose (receipt clearing chooses rows before it skips those another
 * transaction holds; every other step skips them as it chooses).
 */
static uint64
run_batch(Pass *pass, IgStep step, const char *workflow,
		  IgCursor *cursor, TimestampTz cutoff, TimestampTz now,
		  uint64 *examined)
{
	bool		review = (stuck_action == STUCK_REVIEW);
	IgBatchArgs args;
	IgBatchResult res;

	args.workflow = workflow;
	args.after = *cursor;
	args.cutoff = cutoff;
	args.limit = pass->limit;
	args.now = now;
	args.review = review;
	args.setting = *step_settings[step];

	ig_janitor_sql_begin(&pass->db);
	ig_janitor_sql_batch(&pass->db, step, &args, &res);
	if (res.examined > 0)
		*cursor = res.last;
	*examined = res.examined;
	if (step == IG_STEP_CLEAR_RECEIPTS)
		pass->skipped = Min(pass->skipped, res.skipped);
	if (step == IG_STEP_STUCK)
		raise_alerts(pass, &res, review);
	ig_janitor_sql_end(&pass->db);

	/* counted as each batch commits, so the counters follow the rows */
	ig_stats_add(step_stats[step], res.count);
	if (step == IG_STEP_STUCK && review)
		ig_stats_add(IG_STAT_ESCALATIONS, res.count);
	return res.count;
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
yield(Pass *pass)
{
	uint64		calls_now;

	if (!pass->db.own_transactions || batch_delay == 0)
		return;
	calls_now = ig_stats_gate_calls();
	if (calls_now == pass->calls)
	{
		pass->limit = batch_size;
		return;
	}
	pass->calls = calls_now;
	pass->limit = Max(1, batch_size / BUSY_BATCH_DIVISOR);
	/* SIGTERM still ends the wait at once */
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 batch_delay, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/* The next workflow after prev with rows in step's state, or NULL. */
static char *
next_workflow(Pass *pass, IgStep step, const char *prev)
{
	char	   *wf;

	ig_janitor_sql_begin(&pass->db);
	wf = ig_janitor_sql_next_workflow(&pass->db, step, prev);
	ig_janitor_sql_end(&pass->db);
	return wf;
}

/*
 * Remember that the receipts of workflow are cleared up to upto, so the
 * next pass starts there and does not walk rows it already cleared.  On
 * Citus a shard has no watermark of its own.
 */
static void
save_watermark(Pass *pass, const char *workflow, TimestampTz upto)
{
	if (pass->db.shard != NULL)
		return;
	ig_janitor_sql_begin(&pass->db);
	ig_janitor_sql_save_watermark(&pass->db, workflow, upto);
	ig_janitor_sql_end(&pass->db);
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
receipts_horizon(Pass *pass, TimestampTz *horizon)
{
	bool		known = !IsolationUsesXactSnapshot();
	int			n;

	*horizon = DT_NOEND;
	ig_janitor_sql_begin(&pass->db);
	if (known && max_prepared_xacts > 0)
		known = !ig_janitor_sql_prepared_xacts(&pass->db);
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
	ig_janitor_sql_end(&pass->db);
	return known;
}

/*
 * One step over every workflow with rows in its state.  Returns the rows
 * it touched.
 */
static uint64
run_step(Pass *pass, IgStep step)
{
	uint64		total = 0;
	char	   *wf = pstrdup("");
	TimestampTz horizon = DT_NOEND;
	bool		horizon_known = false;

	if (step == IG_STEP_CLEAR_RECEIPTS)
		horizon_known = receipts_horizon(pass, &horizon);
	while ((wf = next_workflow(pass, step, wf)) != NULL)
	{
		int64		usecs = step_usecs(pass, step, wf);
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz cutoff = now - usecs;
		IgCursor	cursor = {DT_NOBEGIN, 0};
		uint64		n;

		CHECK_FOR_INTERRUPTS();
		if (usecs <= 0)
			continue;
		if (step == IG_STEP_CLEAR_RECEIPTS)
		{
			cursor.at = watermark(pass, wf);
			if (cursor.at >= cutoff)
				continue;
			pass->skipped = DT_NOEND;
		}
		/*
		 * A batch that found as many rows as it asked for may have more
		 * behind it.  It is measured against the limit it ran with:
		 * yield() changes the limit for the next batch, and a batch of a
		 * tenth run while the gate was busy is not short once the traffic
		 * stops.  And by the rows it chose, not those it touched: rows
		 * another transaction holds are skipped, not the end of the step.
		 */
		for (;;)
		{
			int			limit = pass->limit;
			uint64		examined;

			n = run_batch(pass, step, wf, &cursor, cutoff, now, &examined);
			total += n;
			if (step == IG_STEP_STUCK)
				pass->counts->alerts += n;
			if (examined < (uint64) limit)
				break;
			yield(pass);
		}
		if (step == IG_STEP_CLEAR_RECEIPTS && horizon_known)
			save_watermark(pass, wf, Min(Min(cutoff, horizon), pass->skipped));
	}
	return total;
}

/* Drop audit rows older than idem_gate.audit_retention, in batches. */
static void
prune_audit(Pass *pass)
{
	TimestampTz before = GetCurrentTimestamp() -
	(int64) audit_retention * USECS_PER_SEC;
	uint64		n;

	do
	{
		ig_janitor_sql_begin(&pass->db);
		n = ig_janitor_sql_prune_audit(&pass->db, before, pass->limit);
		ig_janitor_sql_end(&pass->db);
	} while (n >= (uint64) pass->limit);
}

/* Does this database hold idem_gate 1.1's objects, and 1.2's? */
static void
catalog_version(Pass *pass)
{
	Oid			nsp;

	ig_janitor_sql_begin(&pass->db);
	nsp = get_namespace_oid("idem_gate", false);
	pass->db.v11 = OidIsValid(get_relname_relid("janitor_watermarks", nsp));
	pass->db.v12 = (get_attnum(get_relname_relid("claims", nsp), "payload") != InvalidAttrNumber);
	ig_janitor_sql_end(&pass->db);
}

/*
 * Is a receipt retention set, by the setting or a policy?  Without one the
 * clearing steps have nothing to do, and do not walk the workflows.
 */
static bool
receipt_retention_set(Pass *pass)
{
	if (receipt_retention > 0)
		return true;
	for (int i = 0; i < pass->npolicies; i++)
		if (pass->policies[i].secs[IG_STEP_CLEAR_RECEIPTS] > 0)
			return true;
	return false;
}

/* A step of a pass, as try_step() runs it. */
typedef uint64 (*StepFn) (Pass *pass, IgStep step);

/* The longest a janitor waits for a table lock, in ms (lock_timeout). */
#define IG_JANITOR_LOCK_TIMEOUT_MS	100

/*
 * Run one step.  Rows other transactions lock are skipped by the
 * statements themselves (SKIP LOCKED); a table lock held longer than a
 * tenth of a second ends the step there, and the pass goes on with the
 * next one (the rest is done at a later pass).  In the worker that is the
 * step's own transaction; in idem_gate.janitor_run(), which runs in its
 * caller's transaction, a subtransaction of it, with lock_timeout lowered
 * to that tenth for the step.  So no session can make the janitor wait,
 * nor keep it from announcing stuck claims.
 */
static uint64
try_step(Pass *pass, IgStep step, StepFn fn)
{
	volatile uint64 n = 0;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		sub = !pass->db.own_transactions;
	int			level = 0;

	if (sub)
	{
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		level = NewGUCNestLevel();
		if (LockTimeout == 0 || LockTimeout > IG_JANITOR_LOCK_TIMEOUT_MS)
			(void) set_config_option("lock_timeout", CppAsString2(IG_JANITOR_LOCK_TIMEOUT_MS),
									 PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
	}
	PG_TRY();
	{
		n = fn(pass, step);
		if (sub)
		{
			AtEOXact_GUC(true, level);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(pass->db.cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		if (sub)
		{
			RollbackAndReleaseCurrentSubTransaction();
			CurrentResourceOwner = owner;
		}
		else
			AbortCurrentTransaction();
		MemoryContextSwitchTo(pass->db.cxt);
		ereport(LOG,
				(errmsg("idem_gate janitor: a step of the pass skipped: %s", edata->message),
				 errdetail("Another session holds a lock on one of the extension's tables; the step runs again at the next pass.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return n;
}

/* The audit pruning, as a step. */
static uint64
prune_step(Pass *pass, IgStep step)
{
	prune_audit(pass);
	return 0;
}

/*
 * The grants of dropped roles, as a step: once per pass in each database
 * (on Citus, where each node keeps its own grants, on each node).  Left
 * alone while anything is attached to the grants table, which the pass
 * would run: the DBA who attached it removes them by hand.
 */
static uint64
orphan_grants_step(Pass *pass, IgStep step)
{
	uint64		n = 0;

	ig_janitor_sql_begin(&pass->db);
	/* a rule is write code too; cached code need not be (a partition key) */
	if (ig_shape_table(IG_TABLE_WORKFLOW_ACL)->cached_code == NULL &&
		ig_call_attached_code(IG_TABLE_WORKFLOW_ACL, true) == NULL)
		n = ig_janitor_sql_drop_orphan_grants(&pass->db);
	ig_janitor_sql_end(&pass->db);
	if (n > 0)
		ereport(LOG,
				(errmsg_plural("idem_gate janitor: removed " UINT64_FORMAT " workflow grant of a role that no longer exists",
							   "idem_gate janitor: removed " UINT64_FORMAT " workflow grants of roles that no longer exist",
							   n, n),
				 errdetail("DROP ROLE leaves a role's rows in idem_gate.workflow_acl; removed, they cannot reach a role created later with the same oid.")));
	return n;
}

/*
 * The steps of a pass over idem_gate.claims, or on Citus over one of the
 * shards this node holds.
 */
static void
pass_steps(Pass *pass)
{
	IgJanitorCounts *counts = pass->counts;

	counts->deleted_completed += try_step(pass, IG_STEP_DELETE_COMPLETED, run_step);
	counts->deleted_failed += try_step(pass, IG_STEP_DELETE_FAILED, run_step);
	if (pass->db.v11 && receipt_retention_set(pass))
		pass->receipts_cleared += try_step(pass, IG_STEP_CLEAR_RECEIPTS, run_step);
	try_step(pass, IG_STEP_STUCK, run_step);
	if (pass->db.v12 && receipt_retention_set(pass))
	{
		pass->receipts_cleared += try_step(pass, IG_STEP_CLEAR_PAYLOADS_PROCESSING, run_step);
		pass->receipts_cleared += try_step(pass, IG_STEP_CLEAR_PAYLOADS_FAILED, run_step);
		pass->receipts_cleared += try_step(pass, IG_STEP_CLEAR_PAYLOADS_REVIEW, run_step);
	}
	if (pass->db.v11)
		try_step(pass, IG_STEP_STUCK, prune_step);
}

/*
 * The shards of idem_gate.claims this node holds, or NIL where the table
 * is not a Citus table (citus set accordingly).
 */
static List *
local_shards(Pass *pass, bool *citus)
{
	List	   *shards = NIL;

	ig_janitor_sql_begin(&pass->db);
	*citus = ig_shape_is_citus();
	if (*citus)
	{
		MemoryContext old = MemoryContextSwitchTo(pass->db.cxt);

		shards = ig_citus_local_shards();
		MemoryContextSwitchTo(old);
		pass->forward_alerts = (ig_citus_local_group() != 0);
	}
	ig_janitor_sql_end(&pass->db);
	return shards;
}

/*
 * One janitor pass.  own_transactions is true in the worker, which must be
 * outside any transaction when it calls this.  role, for
 * idem_gate.janitor_run(), is its caller: the WARNING it sees names only
 * stuck claims of workflows it may see (InvalidOid: the worker's log
 * line, for the DBA, names any).  On Citus each node cleans the shards it
 * holds, so each claim is cleaned once across the cluster.
 */
void
ig_janitor_pass(IgJanitorCounts *counts, bool own_transactions, Oid role)
{
	Pass		pass;
	TimestampTz start = GetCurrentTimestamp();
	MemoryContext caller = CurrentMemoryContext;
	List	   *shards;
	ListCell   *lc;
	bool		citus;

	memset(counts, 0, sizeof(*counts));
	memset(&pass, 0, sizeof(pass));
	pass.db.own_transactions = own_transactions;
	pass.caller = role;
	pass.counts = counts;
	pass.limit = batch_size;
	pass.calls = ig_stats_gate_calls();
	pass.db.cxt = AllocSetContextCreate(own_transactions ? TopMemoryContext : caller,
										"idem_gate janitor pass",
										ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(pass.db.cxt);

	catalog_version(&pass);
	load_policies(&pass);
	shards = local_shards(&pass, &citus);
	if (!citus)
		pass_steps(&pass);
	foreach(lc, shards)
	{
		pass.db.shard = lfirst(lc);
		pass_steps(&pass);
	}
	pass.db.shard = NULL;
	if (pass.db.v11)
		try_step(&pass, IG_STEP_STUCK, orphan_grants_step);
	if (stuck_action == STUCK_REVIEW)
		counts->escalated = counts->alerts;

	if (counts->alerts > 0)
	{
		StringInfoData detail;

		initStringInfo(&detail);
		for (int i = 0; i < pass.nexamples; i++)
			appendStringInfo(&detail, "%s%s", i > 0 ? "; " : "", pass.examples[i]);
		if (counts->alerts > pass.nexamples)
			appendStringInfo(&detail, pass.nexamples > 0 ? "; and " INT64_FORMAT " more" :
							 INT64_FORMAT " in workflows not shown here",
							 counts->alerts - pass.nexamples);
		ereport(WARNING,
				(errmsg_plural("idem_gate: " INT64_FORMAT " claim stuck in processing%s",
							   "idem_gate: " INT64_FORMAT " claims stuck in processing%s",
							   counts->alerts, counts->alerts,
							   stuck_action == STUCK_REVIEW ?
							   ", moved to needs_review" : ""),
				 errdetail("%s.", detail.data),
				 errhint("Their side effects may have half-happened: check them, then call idem_resolve() with 'completed' or 'retry'.")));
	}

	ig_stats_pass_done(start, GetCurrentTimestamp());

	ereport(DEBUG1,
			(errmsg("idem_gate janitor pass: deleted " INT64_FORMAT " completed and " INT64_FORMAT " failed rows, cleared " INT64_FORMAT " receipts, " INT64_FORMAT " stuck-claim alerts in %ld ms",
					counts->deleted_completed, counts->deleted_failed,
					pass.receipts_cleared, counts->alerts,
					(long) ((GetCurrentTimestamp() - start) / 1000))));

	MemoryContextSwitchTo(caller);
	MemoryContextDelete(pass.db.cxt);
}
