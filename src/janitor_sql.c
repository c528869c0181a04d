/*-------------------------------------------------------------------------
 *
 * janitor_sql.c
 *	  The janitor's statements, the units of work that run them (in the
 *	  background worker each its own transaction, in idem_gate.janitor_run()
 *	  the caller's), and their results, decoded here so that the pass reads
 *	  counts, cursors and claims rather than columns.
 *
 * Every statement is fully schema-qualified, operators included, and is
 * prepared once per backend and catalog version as a generic plan: its
 * parameters never change the best plan, an index range scan.  Results a
 * pass keeps across units are copied into its memory context; a stuck
 * batch's claims are valid until its unit ends.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "audit.h"
#include "janitor_sql.h"

/* The prepared statements, per catalog version. */
typedef enum StmtId
{
	STMT_NEXT_WF,				/* + IgStep: one per step */
	STMT_BATCH = IG_NUM_STEPS,	/* + IgStep */
	STMT_POLICIES = 2 * IG_NUM_STEPS,
	STMT_WATERMARK,
	STMT_PRUNE_AUDIT,
	STMT_ORPHAN_GRANTS,
	STMT_DROP_ORPHAN_GRANTS,
	NUM_STMTS
} StmtId;

/* The state each step walks. */
static const char *const step_states[IG_NUM_STEPS] = {
	"completed", "failed_retryable", "completed", "processing",
	"processing", "failed_retryable", "needs_review"
};

static SPIPlanPtr plans[2][NUM_STMTS];

/*
 * One workflow's rows of a state, after the cursor ($2, $7) in
 * (updated_at, token) order and before the cutoff $3.  Tokens are unique,
 * so the order is total and a batch resumes exactly after the last.  The
 * cutoff was computed from the policies as the pass read them; the last
 * condition applies the workflow's policy as the batch's own snapshot sees
 * it ($8: the setting's seconds), so a policy made since then is honoured:
 * a row it keeps longer is never touched.
 */
#define IG_RANGE \
	" WHERE c.state OPERATOR(pg_catalog.=) '%s'::idem_gate.state" \
	" AND c.workflow OPERATOR(pg_catalog.=) $1" \
	" AND (c.updated_at, c.token) OPERATOR(pg_catalog.>) ($2, $7)" \
	" AND c.updated_at OPERATOR(pg_catalog.<) $3%s"

/*
 * The policy as the batch's snapshot sees it (column %s of policies).  On
 * Citus a shard's statement cannot read the policies (a reference table),
 * and the check is left out there: the pass's own reading applies.
 */
static const char *const policy_recheck =
" AND c.updated_at OPERATOR(pg_catalog.<) ($5 OPERATOR(pg_catalog.-)"
"  pg_catalog.make_interval(secs => COALESCE((SELECT pg_catalog.date_part('epoch', p.%s)"
"   FROM ONLY idem_gate.policies p WHERE p.workflow OPERATOR(pg_catalog.=) $1), $8)))";
#define IG_ORDER " ORDER BY c.updated_at, c.token"

/*
 * A batch's answer: the rows it touched and the last of them in
 * (updated_at, token) order, where the next batch resumes.
 */
#define IG_LAST(cte) \
	"SELECT (SELECT pg_catalog.count(*) FROM " cte "), l.updated_at, l.token" \
	" FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT x.updated_at, x.token FROM " cte " x" \
	"  ORDER BY x.updated_at DESC, x.token DESC LIMIT 1) l ON true"

/*
 * The deletion batches.  Rows another transaction holds are skipped (a
 * claim retrying a failed row, a release, a late completion of a
 * completed one), never waited for: the next pass takes them.  Locking
 * a row before deleting it writes a little WAL more, the price of a
 * janitor that no session can stall.
 */
static const char *const delete_sql =
"WITH del AS ("
" DELETE FROM ONLY idem_gate.claims d WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
"  SELECT c.ctid FROM ONLY idem_gate.claims c" IG_RANGE IG_ORDER
"  LIMIT $4 FOR UPDATE OF c SKIP LOCKED))"
" AND d.state OPERATOR(pg_catalog.=) '%s'::idem_gate.state"
" AND d.workflow OPERATOR(pg_catalog.=) $1"
" AND d.updated_at OPERATOR(pg_catalog.<) $3"
" RETURNING d.updated_at, d.token)"
IG_LAST("del");

/*
 * Receipt clearing skips a row another transaction holds too; its
 * watermark then must not move past that row, so the batch also answers
 * the first row it skipped (in updated_at order), and the watermark stops
 * there: the next pass starts at it.  The candidates are chosen before
 * they are locked, so a batch that skipped some cleared fewer rows than
 * its limit without being the last: it answers how many candidates it
 * had, and the last of them, where the next batch resumes.
 */
static const char *const clear_sql =
"WITH cand AS ("
" SELECT c.ctid AS tid, c.updated_at AS upd, c.token AS tok"
" FROM ONLY idem_gate.claims c" IG_RANGE
" AND c.result IS NOT NULL" IG_ORDER
" LIMIT $4),"
" lck AS ("
" SELECT c.ctid AS tid FROM ONLY idem_gate.claims c"
" WHERE c.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.tid FROM cand x))"
" FOR NO KEY UPDATE OF c SKIP LOCKED),"
" upd AS ("
" UPDATE ONLY idem_gate.claims d SET result = NULL"
" WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT l.tid FROM lck l))"
" AND d.state OPERATOR(pg_catalog.=) '%s'::idem_gate.state"
" AND d.workflow OPERATOR(pg_catalog.=) $1"
" AND d.updated_at OPERATOR(pg_catalog.<) $3"
" RETURNING 1)"
"SELECT (SELECT pg_catalog.count(*) FROM upd), l.upd, l.tok,"
" (SELECT pg_catalog.min(x.upd) FROM cand x"
"  WHERE x.tid OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT k.tid FROM lck k))),"
" (SELECT pg_catalog.count(*) FROM cand)"
" FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT x.upd, x.tok FROM cand x"
"  ORDER BY x.upd DESC, x.tok DESC LIMIT 1) l ON true";

/*
 * The payloads of a state's rows older than the receipt retention: kept
 * as a reviewer's evidence while a claim is open, but personal data like
 * a receipt, and so cleared by the same retention.  These rows are open
 * claims, which their runs lock while they heartbeat, fail or complete:
 * a locked one is skipped, and cleared at a later pass.  Clearing a
 * column is a no-key update, so the rows are locked as such (FOR NO KEY
 * UPDATE): a lock that does not stop an UPDATE (FOR KEY SHARE) does not
 * make a row skipped either.  Receipts likewise.
 */
static const char *const clear_payload_sql =
"WITH upd AS ("
" UPDATE ONLY idem_gate.claims d SET payload = NULL"
" WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
"  SELECT c.ctid FROM ONLY idem_gate.claims c" IG_RANGE
"  AND c.payload IS NOT NULL" IG_ORDER
"  LIMIT $4 FOR NO KEY UPDATE OF c SKIP LOCKED))"
" AND d.state OPERATOR(pg_catalog.=) '%s'::idem_gate.state"
" AND d.workflow OPERATOR(pg_catalog.=) $1"
" AND d.updated_at OPERATOR(pg_catalog.<) $3"
" RETURNING d.updated_at, d.token)"
IG_LAST("upd");

/*
 * The stuck claims of one workflow not yet alerted under their token; with
 * $6 (stuck_action = review) they move to needs_review, and on a 1.1
 * catalog each move is recorded in the audit trail.
 */
static const char *const stuck_sql =
"WITH stuck AS ("
" SELECT c.ctid AS tid, c.token AS tok, c.updated_at AS upd,"
"  $5 OPERATOR(pg_catalog.-) c.updated_at AS age"
" FROM ONLY idem_gate.claims c" IG_RANGE
" AND (c.alerted_token IS NULL OR c.alerted_token OPERATOR(pg_catalog.<>) c.token)"
IG_ORDER " LIMIT $4 FOR UPDATE OF c SKIP LOCKED),"
" done AS ("
" UPDATE ONLY idem_gate.claims c SET alerted_token = c.token,"
" state = CASE WHEN $6 THEN 'needs_review'::idem_gate.state ELSE c.state END,"
" last_error = CASE WHEN $6"
"   THEN 'stuck in processing for ' OPERATOR(pg_catalog.||) s.age::pg_catalog.text"
"   ELSE c.last_error END,"
" updated_at = CASE WHEN $6 THEN GREATEST($5, c.updated_at) ELSE c.updated_at END"
" FROM stuck s WHERE c.ctid OPERATOR(pg_catalog.=) s.tid"
" AND c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state"
" AND c.token OPERATOR(pg_catalog.=) s.tok AND c.updated_at OPERATOR(pg_catalog.=) s.upd"
" RETURNING c.workflow, c.key, c.token, c.attempt, c.claimed_at, s.age, s.upd, c.last_error)%s"
"SELECT workflow, key, token, attempt, claimed_at, age::pg_catalog.text, upd FROM done"
" ORDER BY upd, token";

static const char *const escalate_audit_sql =
", aud AS ("
" INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow,"
"  key, state_before, state_after, token, reason)"
" SELECT $5, SESSION_USER, CURRENT_USER, 'escalate', d.workflow, d.key,"
"  'processing', 'needs_review', d.token, d.last_error"
" FROM done d WHERE $6)";

/*
 * The grants of roles that no longer exist.  DROP ROLE does not see
 * idem_gate.workflow_acl (a regrole records no dependency), and the oid
 * such a row names goes to the next role created once the oid counter has
 * gone round: the pass removes them, long before that.  A row another
 * transaction holds is left to the next pass.
 */
#define IG_ROLE_GONE(grant) \
	" NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r" \
	"  WHERE r.oid OPERATOR(pg_catalog.=) " grant ".role::pg_catalog.oid)"
#define IG_ORPHAN_GRANTS \
	"SELECT g.ctid FROM ONLY idem_gate.workflow_acl g WHERE" IG_ROLE_GONE("g")

/*
 * Argument types of the batch statements: workflow, cursor time, cutoff,
 * limit, now, review, cursor token, the setting's seconds
 */
static Oid	batch_argtypes[8] = {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	INT4OID, TIMESTAMPTZOID, BOOLOID, INT8OID, FLOAT8OID};

/* The policy re-check of a step's column, or nothing on a Citus shard. */
static char *
recheck(const char *column, bool shard)
{
	return shard ? "" : psprintf(policy_recheck, column);
}

/*
 * The SQL of plan id on a catalog of version v11 or not, and for a Citus
 * shard or not.
 */
static char *
plan_sql(StmtId id, bool v11, bool shard, int *nargs, Oid **argtypes)
{
	static Oid	text_type[1] = {TEXTOID};
	static Oid	prune_types[2] = {TIMESTAMPTZOID, INT4OID};
	static Oid	watermark_types[2] = {TEXTOID, TIMESTAMPTZOID};

	*argtypes = batch_argtypes;
	if (id < STMT_BATCH)
	{
		*nargs = lengthof(text_type);
		*argtypes = text_type;
		return psprintf("SELECT c.workflow FROM ONLY idem_gate.claims c"
						" WHERE c.state OPERATOR(pg_catalog.=) '%s'::idem_gate.state"
						" AND c.workflow OPERATOR(pg_catalog.>) $1"
						" ORDER BY c.workflow LIMIT 1",
						step_states[id]);
	}
	*nargs = lengthof(batch_argtypes);
	switch ((int) id)
	{
		case STMT_BATCH + IG_STEP_DELETE_COMPLETED:
			return psprintf(delete_sql, "completed", recheck("retention", shard),
							"completed");
		case STMT_BATCH + IG_STEP_DELETE_FAILED:
			return psprintf(delete_sql, "failed_retryable",
							recheck("failed_retention", shard), "failed_retryable");
		case STMT_BATCH + IG_STEP_CLEAR_RECEIPTS:
			return psprintf(clear_sql, "completed",
							recheck("receipt_retention", shard), "completed");
		case STMT_BATCH + IG_STEP_CLEAR_PAYLOADS_PROCESSING:
		case STMT_BATCH + IG_STEP_CLEAR_PAYLOADS_FAILED:
		case STMT_BATCH + IG_STEP_CLEAR_PAYLOADS_REVIEW:
			return psprintf(clear_payload_sql, step_states[id - STMT_BATCH],
							recheck("receipt_retention", shard),
							step_states[id - STMT_BATCH]);
		case STMT_BATCH + IG_STEP_STUCK:
			return psprintf(stuck_sql, "processing", recheck("stuck_after", shard),
							v11 ? escalate_audit_sql : "");
		case STMT_POLICIES:
			*nargs = 0;
			return psprintf("SELECT p.workflow,"
							" pg_catalog.date_part('epoch', p.retention),"
							" pg_catalog.date_part('epoch', p.failed_retention),"
							" %s, pg_catalog.date_part('epoch', p.stuck_after)"
							" FROM ONLY idem_gate.policies p",
							v11 ? "pg_catalog.date_part('epoch', p.receipt_retention)" : "NULL::float8");
		case STMT_WATERMARK:
			*nargs = lengthof(watermark_types);
			*argtypes = watermark_types;
			return pstrdup("INSERT INTO idem_gate.janitor_watermarks AS w"
						   " (workflow, receipts_cleared_until) VALUES ($1, $2)"
						   " ON CONFLICT (workflow) DO UPDATE"
						   " SET receipts_cleared_until = GREATEST(w.receipts_cleared_until, $2)");
		case STMT_PRUNE_AUDIT:
			*nargs = lengthof(prune_types);
			*argtypes = prune_types;
			return pstrdup("WITH del AS (DELETE FROM ONLY idem_gate.audit a"
						   " WHERE a.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
						   "  SELECT b.ctid FROM ONLY idem_gate.audit b"
						   "  WHERE b.at OPERATOR(pg_catalog.<) $1 ORDER BY b.at LIMIT $2"
						   "  FOR UPDATE OF b SKIP LOCKED))"
						   " AND a.at OPERATOR(pg_catalog.<) $1"
						   " RETURNING 1) SELECT pg_catalog.count(*) FROM del");
		case STMT_ORPHAN_GRANTS:
			*nargs = 0;
			return pstrdup("SELECT EXISTS (" IG_ORPHAN_GRANTS ")");
		case STMT_DROP_ORPHAN_GRANTS:
			*nargs = 0;
			return pstrdup("WITH del AS (DELETE FROM ONLY idem_gate.workflow_acl a"
						   " WHERE a.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
						   IG_ORPHAN_GRANTS " FOR UPDATE OF g SKIP LOCKED))"
						   " AND" IG_ROLE_GONE("a")
						   " RETURNING 1) SELECT pg_catalog.count(*) FROM del");
		default:
			elog(ERROR, "unknown janitor statement %d", id);
	}
	return NULL;				/* keep compiler quiet */
}

/*
 * The role the worker's units act as (the owner of janitor_run()), and the
 * identity each unit's transaction began with.
 */
static Oid	act_as = InvalidOid;
static Oid	unit_save_userid = InvalidOid;
static int	unit_save_sec_context = 0;

/*
 * In the worker, the units of a pass act as owner, in a security-restricted
 * operation (InvalidOid: as the role the worker logged in as).  The switch
 * is made inside each unit's transaction and undone before its commit:
 * PostgreSQL begins a transaction only outside any such operation, and an
 * abort puts back the identity its transaction began with.
 */
void
ig_janitor_sql_act_as(Oid owner)
{
	act_as = owner;
}

/*
 * Become that owner in the transaction just begun (nothing without one);
 * ig_janitor_sql_leave() undoes it before the transaction commits.  Every
 * transaction of a worker's pass does this, the units below and the
 * worker's own look at the tables before a pass.
 */
void
ig_janitor_sql_enter(void)
{
	if (!OidIsValid(act_as))
		return;
	GetUserIdAndSecContext(&unit_save_userid, &unit_save_sec_context);
	SetUserIdAndSecContext(act_as, unit_save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/* Undo ig_janitor_sql_enter() before the transaction commits. */
void
ig_janitor_sql_leave(void)
{
	if (OidIsValid(act_as))
		SetUserIdAndSecContext(unit_save_userid, unit_save_sec_context);
}

/*
 * Start a unit of work: in the worker its own transaction.  SPI is
 * connected either way.
 */
void
ig_janitor_sql_begin(IgJanitorDb *db)
{
	if (db->own_transactions)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		ig_janitor_sql_enter();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "idem_gate janitor pass");
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/*
 * End a unit of work: in the worker, commit and report the statistics, so
 * that autovacuum sees the deletions.
 */
void
ig_janitor_sql_end(IgJanitorDb *db)
{
	SPI_finish();
	if (db->own_transactions)
	{
		PopActiveSnapshot();
		ig_janitor_sql_leave();
		CommitTransactionCommand();
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
		MemoryContextSwitchTo(db->cxt);
	}
}

/*
 * Run plan id with values (prepared on first use, as a generic plan: the
 * parameters never change the best plan, an index range scan).
 */
static void
exec_plan(IgJanitorDb *db, StmtId id, Datum *values, const char *nulls)
{
	SPIPlanPtr *slot = &plans[db->v11][id];

	if (db->shard != NULL && id != STMT_POLICIES && id != STMT_WATERMARK)
	{
		/* on Citus, the statement aimed at one local shard */
		int			nargs;
		Oid		   *argtypes;
		char	   *sql = plan_sql(id, db->v11, true, &nargs, &argtypes);

		sql = ig_citus_shard_sql(sql, db->shard);
		if (SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0) < 0)
			elog(ERROR, "idem_gate janitor query failed");
		return;
	}
	if (*slot == NULL)
	{
		int			nargs;
		Oid		   *argtypes;
		char	   *sql = plan_sql(id, db->v11, false, &nargs, &argtypes);
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes,
											  CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		*slot = plan;
	}
	if (SPI_execute_plan(*slot, values, nulls, false, 0) < 0)
		elog(ERROR, "idem_gate janitor query failed");
}

/* Column col of row i of the last result. */
static inline Datum
column(uint64 i, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col, isnull);
}

/* A float8 column of the last result, or -1 when NULL. */
static double
seconds(uint64 i, int col)
{
	bool		isnull;
	Datum		d = column(i, col, &isnull);

	return isnull ? -1 : DatumGetFloat8(d);
}

/* A text column of the last result, in the current memory context. */
static inline char *
text_column(uint64 i, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col);
}

/*
 * The rows of idem_gate.policies, each interval in seconds, in the pass's
 * memory; returns how many.  The receipt retention of a policy bounds the
 * clearing of its payloads too.
 */
int
ig_janitor_sql_policies(IgJanitorDb *db, IgPolicy **policies)
{
	MemoryContext old;
	int			n;

	exec_plan(db, STMT_POLICIES, NULL, NULL);
	old = MemoryContextSwitchTo(db->cxt);
	n = SPI_processed;
	*policies = palloc0(sizeof(IgPolicy) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		IgPolicy   *p = &(*policies)[i];

		p->workflow = text_column(i, 1);
		p->secs[IG_STEP_DELETE_COMPLETED] = seconds(i, 2);
		p->secs[IG_STEP_DELETE_FAILED] = seconds(i, 3);
		p->secs[IG_STEP_CLEAR_RECEIPTS] = seconds(i, 4);
		p->secs[IG_STEP_STUCK] = seconds(i, 5);
		p->secs[IG_STEP_CLEAR_PAYLOADS_PROCESSING] = seconds(i, 4);
		p->secs[IG_STEP_CLEAR_PAYLOADS_FAILED] = seconds(i, 4);
		p->secs[IG_STEP_CLEAR_PAYLOADS_REVIEW] = seconds(i, 4);
	}
	MemoryContextSwitchTo(old);
	return n;
}

/* The receipt watermarks (a 1.1 catalog), as IgWatermarks in the pass's memory. */
List *
ig_janitor_sql_watermarks(IgJanitorDb *db)
{
	List	   *watermarks = NIL;
	MemoryContext old;

	if (SPI_execute("SELECT w.workflow, w.receipts_cleared_until"
					" FROM ONLY idem_gate.janitor_watermarks w", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read idem_gate.janitor_watermarks");
	old = MemoryContextSwitchTo(db->cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		IgWatermark *w = palloc0(sizeof(IgWatermark));
		bool		isnull;

		w->workflow = text_column(i, 1);
		w->upto = DatumGetTimestampTz(column(i, 2, &isnull));
		watermarks = lappend(watermarks, w);
	}
	MemoryContextSwitchTo(old);
	return watermarks;
}

/* The next workflow after prev with rows in step's state, or NULL. */
char *
ig_janitor_sql_next_workflow(IgJanitorDb *db, IgStep step, const char *prev)
{
	Datum		value = CStringGetTextDatum(prev);
	char	   *wf = NULL;

	exec_plan(db, STMT_NEXT_WF + step, &value, NULL);
	if (SPI_processed == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(db->cxt);

		wf = text_column(0, 1);
		MemoryContextSwitchTo(old);
	}
	return wf;
}

/*
 * Run one batch of step: the rows it touched, the last of them in
 * (updated_at, token) order and, for the stuck step, the claims it
 * alerted, in that order.
 */
void
ig_janitor_sql_batch(IgJanitorDb *db, IgStep step, const IgBatchArgs *args,
					 IgBatchResult *res)
{
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	values[0] = CStringGetTextDatum(args->workflow);
	values[1] = TimestampTzGetDatum(args->after.at);
	values[2] = TimestampTzGetDatum(args->cutoff);
	values[3] = Int32GetDatum(args->limit);
	values[4] = TimestampTzGetDatum(args->now);
	values[5] = BoolGetDatum(args->review);
	values[6] = Int64GetDatum(args->after.token);
	/* a receipt retention of 0 keeps receipts: no cutoff without a policy */
	values[7] = Float8GetDatum((double) args->setting);
	nulls[7] = (args->setting == 0) ? 'n' : ' ';

	memset(res, 0, sizeof(*res));
	exec_plan(db, STMT_BATCH + step, values, nulls);
	if (step == IG_STEP_STUCK)
	{
		/* workflow, key, token, attempt, claimed_at, age, updated_at */
		res->count = SPI_processed;
		res->examined = res->count;
		res->stuck = palloc0(sizeof(IgStuckClaim) * Max(res->count, 1));
		for (uint64 i = 0; i < res->count; i++)
		{
			res->stuck[i].workflow = text_column(i, 1);
			res->stuck[i].key = text_column(i, 2);
			res->stuck[i].age = text_column(i, 6);
		}
		if (res->count > 0)
		{
			res->last.at = DatumGetTimestampTz(column(res->count - 1, 7, &isnull));
			res->last.token = DatumGetInt64(column(res->count - 1, 3, &isnull));
		}
		return;
	}
	/* one row: count(*), and the last row's updated_at and token */
	res->count = DatumGetInt64(column(0, 1, &isnull));
	res->examined = res->count;
	/*
	 * receipts: the candidates and the last of them, and the first one
	 * skipped because another transaction holds it
	 */
	res->skipped = DT_NOEND;
	if (step == IG_STEP_CLEAR_RECEIPTS)
	{
		Datum		d = column(0, 4, &isnull);

		if (!isnull)
			res->skipped = DatumGetTimestampTz(d);
		res->examined = DatumGetInt64(column(0, 5, &isnull));
	}
	if (res->examined > 0)
	{
		res->last.at = DatumGetTimestampTz(column(0, 2, &isnull));
		res->last.token = DatumGetInt64(column(0, 3, &isnull));
	}
}

/*
 * Remember that the receipts of workflow are cleared up to upto, so the
 * next pass starts there and does not walk rows it already cleared.
 */
void
ig_janitor_sql_save_watermark(IgJanitorDb *db, const char *workflow,
							  TimestampTz upto)
{
	Datum		values[2];

	values[0] = CStringGetTextDatum(workflow);
	values[1] = TimestampTzGetDatum(upto);
	exec_plan(db, STMT_WATERMARK, values, NULL);
}

/* Is a prepared transaction waiting for its commit or rollback? */
bool
ig_janitor_sql_prepared_xacts(IgJanitorDb *db)
{
	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_prepared_xacts LIMIT 1",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_prepared_xacts");
	return SPI_processed > 0;
}

/*
 * Drop at most limit audit rows older than before, which only the janitor
 * may (the trail's guard lets its deletes through); returns how many.
 */
uint64
ig_janitor_sql_prune_audit(IgJanitorDb *db, TimestampTz before, int limit)
{
	Datum		values[2];
	bool		isnull;

	values[0] = TimestampTzGetDatum(before);
	values[1] = Int32GetDatum(limit);
	ig_audit_allow_pruning(true);
	PG_TRY();
	{
		exec_plan(db, STMT_PRUNE_AUDIT, values, NULL);
	}
	PG_FINALLY();
	{
		ig_audit_allow_pruning(false);
	}
	PG_END_TRY();
	return DatumGetInt64(column(0, 1, &isnull));
}

/*
 * Remove the grants of roles that no longer exist; returns how many.  The
 * grants table is read first, so that a pass with nothing to remove
 * writes nothing: its trigger would make every session read the grants
 * again.
 */
uint64
ig_janitor_sql_drop_orphan_grants(IgJanitorDb *db)
{
	bool		isnull;

	exec_plan(db, STMT_ORPHAN_GRANTS, NULL, NULL);
	if (!DatumGetBool(column(0, 1, &isnull)))
		return 0;
	exec_plan(db, STMT_DROP_ORPHAN_GRANTS, NULL, NULL);
	return DatumGetInt64(column(0, 1, &isnull));
}
