/*-------------------------------------------------------------------------
 *
 * store_sql.c
 *	  The claim store's SQL path: prepared statements for every write the
 *	  direct path does not make, and for all writes when it cannot be used.
 *
 * Everything is schema-qualified, operators included, so that a caller's
 * search_path can never change what runs.  Tests of the state are written
 * "(...) IS TRUE" so that they cannot use the state index: every plan finds
 * its row through the primary key, even a generic plan made while the
 * table was empty.  Every update names the token it read, so a row changed
 * since it was read matches nothing and the state machine reads it again.
 * Times are parameters computed by the caller (the time of the write), and
 * a row's timestamps never go backwards, even if the clock does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "citus.h"
#include "shape.h"
#include "store_sql.h"

typedef enum PlanId
{
	PLAN_INSERT,
	PLAN_RETRY,
	PLAN_TAKEOVER,
	PLAN_HEARTBEAT,
	PLAN_COMPLETE,
	PLAN_FAIL,
	PLAN_RESOLVE,
	PLAN_RELEASE,
	PLAN_STATUS,
	PLAN_PROBE,				/* Citus: the probe, through SQL */
	NUM_PLANS
} PlanId;

typedef struct PlanDef
{
	const char *sql;			/* %s: the new token, the fragments of the
								 * columns of 1.1 and 1.2 */
	int			nargs;
	Oid			argtypes[8];
} PlanDef;

/*
 * A plan's parameter types, and their number counted from that list, so
 * that the two cannot disagree (a count one too high would have the plan
 * read a value past the caller's arrays).
 */
#define IG_PARAMS(...) \
	(int) (sizeof((Oid[]) {__VA_ARGS__}) / sizeof(Oid)), {__VA_ARGS__}

#define IG_WHERE_KEY \
	" WHERE c.workflow OPERATOR(pg_catalog.=) $1 AND c.key OPERATOR(pg_catalog.=) $2"
/* a grant's new token: from the sequence, or a parameter on Citus */
#define IG_NEXT_TOKEN \
	"pg_catalog.nextval('idem_gate.token_seq'::pg_catalog.regclass)"
#define IG_REGRANT(state_test) \
	"UPDATE ONLY idem_gate.claims c SET state = 'processing'::idem_gate.state," \
	" attempt = c.attempt OPERATOR(pg_catalog.+) 1, token = %s," \
	" execution_id = $3, fingerprint = COALESCE(c.fingerprint, $4)," \
	" claimed_at = GREATEST($6, c.updated_at), updated_at = GREATEST($6, c.updated_at)%s%s" \
	IG_WHERE_KEY " AND c.token OPERATOR(pg_catalog.=) $5 AND " state_test \
	" RETURNING c.token, c.attempt, c.claimed_at, c.updated_at"

static const PlanDef plan_defs[NUM_PLANS] = {
	[PLAN_INSERT] = {
		"INSERT INTO idem_gate.claims AS c (workflow, key, state, attempt,"
		" token, execution_id, fingerprint, created_at, claimed_at, updated_at%s%s)"
		" VALUES ($1, $2, 'processing', 1, %s, $3, $4, $5, $5, $5%s%s)"
		" ON CONFLICT (workflow, key) DO NOTHING RETURNING c.token",
		IG_PARAMS(TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, BOOLOID)
	},
	[PLAN_RETRY] = {
		IG_REGRANT("(c.state OPERATOR(pg_catalog.=) 'failed_retryable') IS TRUE"),
		IG_PARAMS(TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, BOOLOID)
	},
	[PLAN_TAKEOVER] = {
		IG_REGRANT("(c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
				   " AND c.updated_at OPERATOR(pg_catalog.<=) $8"),
		IG_PARAMS(TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, BOOLOID,
				  TIMESTAMPTZOID)
	},
	[PLAN_HEARTBEAT] = {
		"UPDATE ONLY idem_gate.claims c SET updated_at = GREATEST($4, c.updated_at)"
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $3 RETURNING c.token",
		IG_PARAMS(TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID)
	},
	[PLAN_COMPLETE] = {
		"UPDATE ONLY idem_gate.claims c SET state = 'completed'::idem_gate.state,"
		" result = $4, completed_at = $5, updated_at = $5%s"
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $3 RETURNING c.token",
		IG_PARAMS(TEXTOID, TEXTOID, INT8OID, JSONBOID, TIMESTAMPTZOID)
	},
	[PLAN_FAIL] = {
		"UPDATE ONLY idem_gate.claims c SET state = CASE WHEN $6"
		" THEN 'failed_retryable'::idem_gate.state"
		" ELSE 'needs_review'::idem_gate.state END,"
		" last_error = $4, updated_at = $5"
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $3 RETURNING c.token",
		IG_PARAMS(TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID, BOOLOID)
	},
	[PLAN_RESOLVE] = {
		"UPDATE ONLY idem_gate.claims c SET state = CASE WHEN $3"
		" THEN 'completed'::idem_gate.state"
		" ELSE 'failed_retryable'::idem_gate.state END,"
		" result = CASE WHEN $3 THEN $4 END,"
		" completed_at = CASE WHEN $3 THEN $5 END,"
		" updated_at = $5%s"
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing'"
		" OR c.state OPERATOR(pg_catalog.=) 'needs_review') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $6 RETURNING c.token",
		IG_PARAMS(TEXTOID, TEXTOID, BOOLOID, JSONBOID, TIMESTAMPTZOID, INT8OID)
	},
	[PLAN_RELEASE] = {
		"DELETE FROM ONLY idem_gate.claims c" IG_WHERE_KEY
		" AND c.token OPERATOR(pg_catalog.=) $3 RETURNING c.state",
		IG_PARAMS(TEXTOID, TEXTOID, INT8OID)
	},
	[PLAN_STATUS] = {
		"SELECT c FROM ONLY idem_gate.claims c" IG_WHERE_KEY,
		IG_PARAMS(TEXTOID, TEXTOID)
	},
	[PLAN_PROBE] = {
		"SELECT c.state, c.token, c.attempt, c.claimed_at, c.updated_at,"
		" c.execution_id, c.fingerprint, c.token_issued, c.result"
		" FROM ONLY idem_gate.claims c" IG_WHERE_KEY,
		IG_PARAMS(TEXTOID, TEXTOID)
	},
};

/*
 * On a Citus table the token of a grant is a parameter, drawn by
 * ig_citus_next_token(): Citus refuses the volatile nextval() in an
 * UPDATE of a distributed table, and the token must be unique across
 * nodes.  It is always $9, after every plan's own parameters.  A grant's
 * payload (1.2) is $10 (given), $11 (kept) and $12 (its size, when too
 * large to keep).
 */
#define TOKEN_PARAM		9
#define PAYLOAD_GIVEN	10
#define PAYLOAD			11
#define PAYLOAD_DROPPED	12
#define MAX_PARAMS		12

/* The fragments that write the payload columns, where the table has them. */
#define IG_PAYLOAD_INSERT_COLS	", payload, payload_dropped_bytes"
#define IG_PAYLOAD_INSERT_VALS	", $11, $12"
#define IG_PAYLOAD_REGRANT \
	", payload = CASE WHEN $10 THEN $11 ELSE c.payload END" \
	", payload_dropped_bytes = CASE WHEN $10 THEN $12 ELSE c.payload_dropped_bytes END"
#define IG_PAYLOAD_CLEAR	", payload = NULL, payload_dropped_bytes = NULL"
#define IG_PAYLOAD_RESOLVE \
	", payload = CASE WHEN $3 THEN NULL ELSE c.payload END" \
	", payload_dropped_bytes = CASE WHEN $3 THEN NULL ELSE c.payload_dropped_bytes END"

static SPIPlanPtr plans[NUM_PLANS];
static uint32 plans_epoch = 0;	/* the shape epoch they were made for */

/*
 * The table changed its shape since the plans were made (a 1.0 table
 * updated to 1.1, the extension made anew, Citus): prepare every plan
 * again on its next use.
 */
static void
watch_epoch(void)
{
	if (plans_epoch == ig_shape.epoch)
		return;
	for (int i = 0; i < NUM_PLANS; i++)
	{
		if (plans[i] != NULL)
			SPI_freeplan(plans[i]);
		plans[i] = NULL;
	}
	plans_epoch = ig_shape.epoch;
}

/*
 * The number of parameters of a plan and their types: a grant's plan
 * also takes the token ($9, on Citus) and the payload ($10 to $12).
 */
static int
plan_args(PlanId id, Oid *argtypes)
{
	const PlanDef *def = &plan_defs[id];

	memcpy(argtypes, def->argtypes, sizeof(def->argtypes));
	if (!(id == PLAN_INSERT || id == PLAN_RETRY || id == PLAN_TAKEOVER))
		return def->nargs;
	for (int i = def->nargs; i < TOKEN_PARAM - 1; i++)
		argtypes[i] = BOOLOID;	/* unused */
	argtypes[TOKEN_PARAM - 1] = INT8OID;
	argtypes[PAYLOAD_GIVEN - 1] = BOOLOID;
	argtypes[PAYLOAD - 1] = JSONBOID;
	argtypes[PAYLOAD_DROPPED - 1] = INT4OID;
	return MAX_PARAMS;
}

/*
 * The text of a plan: with the token_issued column where the table has
 * it (from 1.1), the payload columns where it has them (1.2), and a
 * grant's token from the sequence or, on Citus, from its parameter.
 */
static char *
plan_text(PlanId id)
{
	bool		has = ig_shape.has_token_issued;
	bool		pay = ig_shape.has_payload;
	const char *token = ig_shape.citus ? psprintf("$%d", TOKEN_PARAM) : IG_NEXT_TOKEN;

	switch (id)
	{
		case PLAN_INSERT:
			return psprintf(plan_defs[id].sql, has ? ", token_issued" : "",
							pay ? IG_PAYLOAD_INSERT_COLS : "", token,
							has ? ", $6" : "", pay ? IG_PAYLOAD_INSERT_VALS : "");
		case PLAN_RETRY:
		case PLAN_TAKEOVER:
			return psprintf(plan_defs[id].sql, token,
							has ? ", token_issued = $7" : "",
							pay ? IG_PAYLOAD_REGRANT : "");
		case PLAN_COMPLETE:
			return psprintf(plan_defs[id].sql, pay ? IG_PAYLOAD_CLEAR : "");
		case PLAN_RESOLVE:
			return psprintf(plan_defs[id].sql, pay ? IG_PAYLOAD_RESOLVE : "");
		default:
			return pstrdup(plan_defs[id].sql);
	}
}

/* A grant's payload parameters ($10 to $12) and their nulls. */
static void
plan_payload(const IgGrant *grant, Datum *values, bool *nulls)
{
	bool		kept = grant->has_payload && grant->payload_dropped == 0;

	values[PAYLOAD_GIVEN - 1] = BoolGetDatum(grant->has_payload);
	nulls[PAYLOAD_GIVEN - 1] = false;
	values[PAYLOAD - 1] = kept ? grant->payload : (Datum) 0;
	nulls[PAYLOAD - 1] = !kept;
	values[PAYLOAD_DROPPED - 1] = Int32GetDatum(grant->payload_dropped);
	nulls[PAYLOAD_DROPPED - 1] = (grant->payload_dropped == 0);
}

/*
 * Run one of the plans and return the number of rows it touched (0 or 1).
 * Prepared on first use and kept: the SQL text is fully qualified, so a
 * plan re-analyzed after DROP/CREATE EXTENSION still means the same thing.
 * Plans are generic from the first call: each finds one row by primary key
 * whatever the parameters, so planning again per call would only cost time.
 */
static uint64
exec_plan(IgStore *st, PlanId id, Datum *values, const bool *isnull)
{
	char		nulls[MAX_PARAMS];
	Oid			argtypes[MAX_PARAMS];
	int			nargs = plan_args(id, argtypes);
	int			rc;
	SPIPlanPtr *slot = &plans[id];

	ig_call_spi(st->call);

	watch_epoch();
	if (*slot == NULL)
	{
		char	   *sql = plan_text(id);
		SPIPlanPtr	plan;

		plan = SPI_prepare_cursor(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		*slot = plan;
		pfree(sql);
	}

	for (int i = 0; i < nargs; i++)
		nulls[i] = (isnull != NULL && (i < plan_defs[id].nargs || i >= TOKEN_PARAM) &&
					isnull[i]) ? 'n' : ' ';
	rc = SPI_execute_plan(*slot, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "idem_gate query failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > 1)
		elog(ERROR, "idem_gate query touched " UINT64_FORMAT " rows",
			 SPI_processed);
	return SPI_processed;
}

/* Column n (1-based) of the row the last write returned. */
static Datum
returned(int n)
{
	bool		isnull;

	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, n,
						 &isnull);
}

/* A first claim through SQL: INSERT ... ON CONFLICT DO NOTHING. */
IgWrite
ig_store_sql_insert(IgStore *st, const IgGrant *grant, TimestampTz now, IgRow *row)
{
	IgCall	   *call = st->call;
	Datum		values[MAX_PARAMS] = {0};
	bool		nulls[MAX_PARAMS] = {false, false, !grant->has_exec, !grant->has_fp,
	false, false};

	plan_payload(grant, values, nulls);
	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = grant->execution_id;
	values[3] = grant->fingerprint;
	values[4] = TimestampTzGetDatum(now);
	values[5] = BoolGetDatum(grant->token_issued);
	if (ig_shape.citus)
		values[TOKEN_PARAM - 1] = Int64GetDatum(ig_citus_next_token(ig_shape.token_seq, ig_shape.citus_group, 0));
	if (exec_plan(st, PLAN_INSERT, values, nulls) == 0)
		return IG_WRITE_RETRY;

	ig_store_row_new(row, DatumGetInt64(returned(1)), now, grant);
	return IG_WRITE_DONE;
}

/* A retry or takeover of the row as read, if it is still as read. */
IgWrite
ig_store_sql_regrant(IgStore *st, const IgGrant *grant, IgRow *row, bool takeover,
					 TimestampTz cutoff, TimestampTz now)
{
	IgCall	   *call = st->call;
	Datum		values[MAX_PARAMS] = {0};
	bool		nulls[MAX_PARAMS] = {false, false, !grant->has_exec, !grant->has_fp,
	false, false, false, false};

	plan_payload(grant, values, nulls);
	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = grant->execution_id;
	values[3] = grant->fingerprint;
	values[4] = Int64GetDatum(row->token);
	values[5] = TimestampTzGetDatum(now);
	values[6] = BoolGetDatum(grant->token_issued);
	values[7] = TimestampTzGetDatum(cutoff);
	if (ig_shape.citus)
		values[TOKEN_PARAM - 1] = Int64GetDatum(ig_citus_next_token(ig_shape.token_seq, ig_shape.citus_group, row->token));
	if (exec_plan(st, takeover ? PLAN_TAKEOVER : PLAN_RETRY,
				  values, nulls) == 0)
		return IG_WRITE_RETRY;

	row->state = IG_PROCESSING;
	row->token = DatumGetInt64(returned(1));
	row->attempt = DatumGetInt32(returned(2));
	row->claimed_at = DatumGetTimestampTz(returned(3));
	row->updated_at = DatumGetTimestampTz(returned(4));
	row->token_issued = grant->token_issued;
	row->result_isnull = true;
	return IG_WRITE_DONE;
}

/* The owner's completion or failure through SQL. */
IgWrite
ig_store_sql_finish(IgStore *st, IgRow *row, IgState new_state, Datum value,
					bool isnull, TimestampTz stamp)
{
	IgCall	   *call = st->call;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, isnull, false, false};

	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = Int64GetDatum(row->token);
	values[3] = value;
	values[4] = TimestampTzGetDatum(stamp);
	values[5] = BoolGetDatum(new_state == IG_FAILED_RETRYABLE);
	if (exec_plan(st, new_state == IG_COMPLETED ? PLAN_COMPLETE : PLAN_FAIL,
				  values, nulls) == 0)
		return IG_WRITE_RETRY;
	row->state = new_state;
	row->updated_at = stamp;
	return IG_WRITE_DONE;
}

/* A heartbeat of the processing row as read. */
IgWrite
ig_store_sql_heartbeat(IgStore *st, IgRow *row, TimestampTz stamp)
{
	IgCall	   *call = st->call;
	Datum		values[4];

	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = Int64GetDatum(row->token);
	values[3] = TimestampTzGetDatum(stamp);
	if (exec_plan(st, PLAN_HEARTBEAT, values, NULL) == 0)
		return IG_WRITE_RETRY;
	row->updated_at = stamp;
	return IG_WRITE_DONE;
}

/* An operator's resolution of the row as read. */
IgWrite
ig_store_sql_resolve(IgStore *st, IgRow *row, bool complete, Datum result,
					 bool isnull, TimestampTz stamp)
{
	IgCall	   *call = st->call;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, isnull, false, false};

	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = BoolGetDatum(complete);
	values[3] = result;
	values[4] = TimestampTzGetDatum(stamp);
	values[5] = Int64GetDatum(row->token);
	if (exec_plan(st, PLAN_RESOLVE, values, nulls) == 0)
		return IG_WRITE_RETRY;
	row->state = complete ? IG_COMPLETED : IG_FAILED_RETRYABLE;
	row->updated_at = stamp;
	return IG_WRITE_DONE;
}

/*
 * An operator's release (deletion) of the row as read.  The row's state
 * is what the deletion saw: a completion that committed while the release
 * waited for it has changed it.
 */
IgWrite
ig_store_sql_release(IgStore *st, IgRow *row)
{
	IgCall	   *call = st->call;
	Datum		values[3];

	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = Int64GetDatum(row->token);
	if (exec_plan(st, PLAN_RELEASE, values, NULL) == 0)
		return IG_WRITE_RETRY;
	row->state = ig_state_from_datum(ig_shape.state_type, returned(1));
	return IG_WRITE_DONE;
}

/*
 * The whole row of (workflow, key), copied into the caller's context, or
 * NULL.  Through SQL, which checks the owner's SELECT privilege.
 */
HeapTuple
ig_store_sql_status(IgStore *st)
{
	IgCall	   *call = st->call;
	Datum		values[2];
	bool		isnull;
	HeapTupleHeader rec;
	HeapTupleData tmp;
	MemoryContext old;
	HeapTuple	tuple;

	values[0] = call->workflow;
	values[1] = call->key;
	if (exec_plan(st, PLAN_STATUS, values, NULL) == 0)
		return NULL;

	rec = DatumGetHeapTupleHeader(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc,
												1, &isnull));
	tmp.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tmp.t_self);
	tmp.t_tableOid = InvalidOid;
	tmp.t_data = rec;
	old = MemoryContextSwitchTo(call->callcxt);
	tuple = heap_copytuple(&tmp);
	MemoryContextSwitchTo(old);
	return tuple;
}

/*
 * The probe on a Citus table, where the local heap is an empty shell:
 * the same read through SQL, which Citus routes to the key's shard.
 */
void
ig_store_sql_probe(IgStore *st, IgRow *row)
{
	IgCall	   *call = st->call;
	Datum		values[2];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	MemoryContext old;

	values[0] = call->workflow;
	values[1] = call->key;
	if (exec_plan(st, PLAN_PROBE, values, NULL) == 0)
		return;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old = MemoryContextSwitchTo(call->callcxt);
	row->found = true;
	row->state = ig_state_from_datum(ig_shape.state_type,
									 SPI_getbinval(tup, desc, 1, &isnull));
	row->token = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	row->attempt = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	row->claimed_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
	row->updated_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
	d = SPI_getbinval(tup, desc, 6, &isnull);
	row->execution_id = isnull ? NULL : TextDatumGetCString(d);
	d = SPI_getbinval(tup, desc, 7, &isnull);
	row->fingerprint = isnull ? NULL : TextDatumGetCString(d);
	d = SPI_getbinval(tup, desc, 8, &isnull);
	row->token_issued = !isnull && DatumGetBool(d);
	d = SPI_getbinval(tup, desc, 9, &row->result_isnull);
	if (!row->result_isnull)
		row->result = PointerGetDatum(DatumGetJsonbPCopy(d));
	MemoryContextSwitchTo(old);
}

