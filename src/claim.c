/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The claim state machine: idem_claim, idem_claim_ex, idem_heartbeat,
 *	  idem_complete, idem_fail, idem_resolve and idem_status.
 *
 * Every function works on one row of idem_gate.claims through prepared SPI
 * plans.  Atomicity comes from PostgreSQL itself:
 *
 * - a new key is inserted with INSERT ... ON CONFLICT DO NOTHING, so of any
 *   number of concurrent first claims exactly one inserts and the others
 *   wait for it and then see its row;
 * - every other grant (retry of a failed_retryable row, takeover of a stale
 *   processing row) is an UPDATE that re-checks the token it read, the
 *   state and the staleness in its WHERE clause, so under READ COMMITTED
 *   the re-check after a concurrent update lets exactly one caller win;
 * - a caller that loses such a race reads the row again and answers from
 *   what it sees.
 *
 * Duplicates of completed, in-flight or needs_review claims are answered
 * from a plain read: they write nothing, not even WAL.
 *
 * The functions run their SQL as the owner of the function (normally the
 * superuser who created the extension), the way referential-integrity
 * triggers act as the table owner: clients need EXECUTE on the API, not
 * privileges on the table, so no client can forge a completed row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "idem_gate.h"
#include "stats.h"

/* States and outcomes, in the order of the SQL enum labels. */
typedef enum IgState
{
	IG_PROCESSING,
	IG_COMPLETED,
	IG_FAILED_RETRYABLE,
	IG_NEEDS_REVIEW,
	IG_NUM_STATES
} IgState;

static const char *const ig_state_names[IG_NUM_STATES] = {
	"processing", "completed", "failed_retryable", "needs_review"
};

static const char *const ig_outcome_names[IG_NUM_OUTCOMES] = {
	"new", "in_flight", "completed", "stale_taken", "needs_review"
};

/*
 * Enum label OIDs, looked up once per backend and again only if the type's
 * OID changes (the extension was dropped and created again).
 */
typedef struct IgEnumCache
{
	Oid			typoid;
	Oid			labels[IG_NUM_OUTCOMES];
} IgEnumCache;

static IgEnumCache ig_state_cache;
static IgEnumCache ig_outcome_cache;

/* The prepared plans, kept for the life of the backend. */
typedef enum IgPlanId
{
	IG_PLAN_INSERT,
	IG_PLAN_RETRY,
	IG_PLAN_TAKEOVER,
	IG_PLAN_HEARTBEAT,
	IG_PLAN_COMPLETE,
	IG_PLAN_FAIL,
	IG_PLAN_RESOLVE,
	IG_PLAN_STATUS,
	IG_NUM_PLANS
} IgPlanId;

typedef struct IgPlanDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[6];
} IgPlanDef;

/*
 * The SQL of every plan.  Everything is schema-qualified, operators
 * included, so that a caller's search_path can never change what runs.
 * Tests of the state are written "(...) IS TRUE" so that they cannot use
 * the (state, updated_at) index: every plan must find its row through the
 * primary key, even a generic plan made while the table was empty (which
 * otherwise may scan every processing row for each call).
 * A row's timestamps never go backwards, even if the clock does:
 * GREATEST(now(), updated_at) keeps the CHECK constraints true.
 */
#define IG_WHERE_KEY \
	" WHERE c.workflow OPERATOR(pg_catalog.=) $1 AND c.key OPERATOR(pg_catalog.=) $2"
#define IG_NOW_OR_LATER \
	"GREATEST(pg_catalog.now(), c.updated_at)"
#define IG_NEXT_TOKEN \
	"pg_catalog.nextval('idem_gate.token_seq'::pg_catalog.regclass)"
#define IG_RETURNING \
	" RETURNING c.state, c.token, c.attempt, c.claimed_at"

static const IgPlanDef ig_plan_defs[IG_NUM_PLANS] = {
	[IG_PLAN_INSERT] = {
		"INSERT INTO idem_gate.claims AS c (workflow, key, state, attempt,"
		" token, execution_id, fingerprint, created_at, claimed_at, updated_at)"
		" VALUES ($1, $2, 'processing', 1, " IG_NEXT_TOKEN ", $3, $4,"
		" pg_catalog.now(), pg_catalog.now(), pg_catalog.now())"
		" ON CONFLICT (workflow, key) DO NOTHING" IG_RETURNING,
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[IG_PLAN_RETRY] = {
		"UPDATE idem_gate.claims c SET state = 'processing',"
		" attempt = c.attempt OPERATOR(pg_catalog.+) 1, token = " IG_NEXT_TOKEN ","
		" execution_id = $3, fingerprint = COALESCE(c.fingerprint, $4),"
		" claimed_at = " IG_NOW_OR_LATER ", updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'failed_retryable') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $5" IG_RETURNING,
		5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID}
	},
	[IG_PLAN_TAKEOVER] = {
		"UPDATE idem_gate.claims c SET"
		" attempt = c.attempt OPERATOR(pg_catalog.+) 1, token = " IG_NEXT_TOKEN ","
		" execution_id = $3, fingerprint = COALESCE(c.fingerprint, $4),"
		" claimed_at = " IG_NOW_OR_LATER ", updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $5"
		" AND c.updated_at OPERATOR(pg_catalog.<=) $6" IG_RETURNING,
		6, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}
	},
	[IG_PLAN_HEARTBEAT] = {
		"UPDATE idem_gate.claims c SET updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND c.token OPERATOR(pg_catalog.=) $3" IG_RETURNING,
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[IG_PLAN_COMPLETE] = {
		"UPDATE idem_gate.claims c SET state = 'completed', result = $4,"
		" completed_at = " IG_NOW_OR_LATER ", updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND ($3 IS NULL OR c.token OPERATOR(pg_catalog.=) $3)" IG_RETURNING,
		4, {TEXTOID, TEXTOID, INT8OID, JSONBOID}
	},
	[IG_PLAN_FAIL] = {
		"UPDATE idem_gate.claims c SET state = CASE WHEN $5"
		" THEN 'failed_retryable'::idem_gate.state"
		" ELSE 'needs_review'::idem_gate.state END,"
		" last_error = $4, updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE"
		" AND ($3 IS NULL OR c.token OPERATOR(pg_catalog.=) $3)" IG_RETURNING,
		5, {TEXTOID, TEXTOID, INT8OID, TEXTOID, BOOLOID}
	},
	[IG_PLAN_RESOLVE] = {
		"UPDATE idem_gate.claims c SET state = CASE WHEN $3"
		" THEN 'completed'::idem_gate.state"
		" ELSE 'failed_retryable'::idem_gate.state END,"
		" result = CASE WHEN $3 THEN $4 END,"
		" completed_at = CASE WHEN $3 THEN " IG_NOW_OR_LATER " END,"
		" updated_at = " IG_NOW_OR_LATER
		IG_WHERE_KEY
		" AND (c.state OPERATOR(pg_catalog.=) 'processing'"
		" OR c.state OPERATOR(pg_catalog.=) 'needs_review') IS TRUE" IG_RETURNING,
		4, {TEXTOID, TEXTOID, BOOLOID, JSONBOID}
	},
	[IG_PLAN_STATUS] = {
		"SELECT c FROM idem_gate.claims c" IG_WHERE_KEY,
		2, {TEXTOID, TEXTOID}
	},
};

static SPIPlanPtr ig_plans[IG_NUM_PLANS];

/* The row as read by ig_probe() (or the RETURNING of a write). */
typedef struct IgRow
{
	bool		found;
	IgState		state;
	int64		token;
	int32		attempt;
	TimestampTz claimed_at;
	TimestampTz updated_at;
	char	   *execution_id;	/* NULL if null */
	char	   *fingerprint;	/* likewise */
	bool		result_isnull;
	Datum		result;			/* a detoasted copy, in the caller's context */
	ItemPointerData tid;		/* where ig_probe() found it */
	HeapTuple	tuple;			/* a copy of it, if ig_probe() was asked */
} IgRow;

/*
 * The columns ig_probe() reads, and their numbers in idem_gate.claims,
 * looked up once per table OID.
 */
typedef enum IgCol
{
	IG_COL_STATE,
	IG_COL_TOKEN,
	IG_COL_ATTEMPT,
	IG_COL_CLAIMED_AT,
	IG_COL_UPDATED_AT,
	IG_COL_EXECUTION_ID,
	IG_COL_FINGERPRINT,
	IG_COL_RESULT,
	/* written, not read */
	IG_COL_WORKFLOW,
	IG_COL_KEY,
	IG_COL_CREATED_AT,
	IG_COL_COMPLETED_AT,
	IG_COL_LAST_ERROR,
	IG_NUM_COLS
} IgCol;

static const char *const ig_col_names[IG_NUM_COLS] = {
	"state", "token", "attempt", "claimed_at", "updated_at",
	"execution_id", "fingerprint", "result",
	"workflow", "key", "created_at", "completed_at", "last_error"
};

static Oid	ig_claims_relid = InvalidOid;
static Oid	ig_token_seq_relid = InvalidOid;
static AttrNumber ig_col_attnums[IG_NUM_COLS];

/* What each API function sets up and tears down. */
typedef struct IgCall
{
	Oid			save_userid;
	int			save_sec_context;
	MemoryContext callcxt;		/* the caller's context, for results */
	Datum		workflow;
	Datum		key;
	const char *workflow_str;	/* for messages */
	const char *key_str;
	bool		writes;			/* the call may write idem_gate.claims */
	Relation	rel;			/* idem_gate.claims, opened on first use */
	bool		spi_connected;	/* only calls that write need SPI */
} IgCall;


/*
 * Make a value printable in a message: long keys are cut, so that an error
 * about a 255-character key stays readable.
 */
char *
idem_display(const char *s)
{
	int			len = strlen(s);
	int			clip;

	if (pg_mbstrlen_with_len(s, len) <= IDEM_DISPLAY_CHARS)
		return pstrdup(s);
	clip = pg_mbcharcliplen(s, len, IDEM_DISPLAY_CHARS - 3);
	return psprintf("%.*s...", clip, s);
}

/*
 * Check a key or workflow argument: present, not empty, not longer than
 * idem_gate.max_key_length characters.  The limit keeps index entries far
 * below btree's size limit and makes a payload-as-key mistake loud.
 */
static Datum
ig_check_name(FunctionCallInfo fcinfo, int argno, const char *what,
			  const char **str)
{
	text	   *t;
	int			bytes;
	int			chars;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what),
				 errhint(strcmp(what, "key") == 0 ?
						 "Pass the event's identity, such as the provider's event id, or derive one with idem_hash()." :
						 "Pass the name of the side effect the key protects, such as 'stripe_charge'.")));

	t = PG_GETARG_TEXT_PP(argno);
	bytes = VARSIZE_ANY_EXHDR(t);
	*str = text_to_cstring(t);

	if (bytes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint(strcmp(what, "key") == 0 ?
						 "An empty key would make every delivery without an id one event; refuse such deliveries before claiming." :
						 "Pass the name of the side effect the key protects, such as 'stripe_charge'.")));

	if (bytes > idem_max_key_length)
	{
		chars = pg_mbstrlen_with_len(VARDATA_ANY(t), bytes);
		if (chars > idem_max_key_length)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s \"%s\" is too long", what, idem_display(*str)),
					 errdetail("It has %d characters; idem_gate.max_key_length is %d.",
							   chars, idem_max_key_length),
					 errhint("Derive a shorter key, for example with idem_hash(), or raise idem_gate.max_key_length.")));
	}

	return PointerGetDatum(t);
}

/*
 * A token argument that must be given (idem_heartbeat).
 */
static int64
ig_check_required_token(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token must not be null"),
				 errhint("Pass the token returned by idem_claim_ex() for this claim.")));
	return PG_GETARG_INT64(argno);
}

/*
 * Load the label OIDs of one of our enum types, once per type OID.
 */
static void
ig_enum_load(IgEnumCache *cache, Oid typoid, const char *const *names, int n)
{
	Oid			labels[IG_NUM_OUTCOMES];

	if (cache->typoid == typoid)
		return;

	for (int i = 0; i < n; i++)
	{
		labels[i] = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
									ObjectIdGetDatum(typoid),
									CStringGetDatum(names[i]));
		if (!OidIsValid(labels[i]))
			elog(ERROR, "type %s has no label \"%s\"",
				 format_type_be(typoid), names[i]);
	}
	memcpy(cache->labels, labels, sizeof(Oid) * n);
	cache->typoid = typoid;
}

/*
 * The OID of one of idem_gate's types, for when the call site does not
 * tell us (a function called without an expression tree).
 */
static Oid
ig_type_oid(const char *name)
{
	Oid			nsp = get_namespace_oid("idem_gate", false);

	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(name), ObjectIdGetDatum(nsp));
}

/* Enum datum of a state, for a result of type idem_gate.state. */
static Datum
ig_state_datum(Oid typoid, IgState state)
{
	ig_enum_load(&ig_state_cache, typoid, ig_state_names, IG_NUM_STATES);
	return ObjectIdGetDatum(ig_state_cache.labels[state]);
}

/* Enum datum of an outcome, for a result of type idem_gate.outcome. */
static Datum
ig_outcome_datum(Oid typoid, IgOutcome outcome)
{
	ig_enum_load(&ig_outcome_cache, typoid, ig_outcome_names, IG_NUM_OUTCOMES);
	return ObjectIdGetDatum(ig_outcome_cache.labels[outcome]);
}

/* Decode a state read from the table. */
static IgState
ig_state_from_datum(Oid typoid, Datum d)
{
	ig_enum_load(&ig_state_cache, typoid, ig_state_names, IG_NUM_STATES);
	for (int i = 0; i < IG_NUM_STATES; i++)
		if (ig_state_cache.labels[i] == DatumGetObjectId(d))
			return (IgState) i;
	elog(ERROR, "unrecognized idem_gate.state value %u", DatumGetObjectId(d));
	return IG_PROCESSING;		/* keep compiler quiet */
}

/*
 * The owner of the called function: the role the API acts as.
 */
Oid
idem_function_owner(FunctionCallInfo fcinfo)
{
	HeapTuple	proctup;
	Oid			owner;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u",
			 fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(proctup))->proowner;
	ReleaseSysCache(proctup);
	return owner;
}

/*
 * Start an API call: check the key and workflow, refuse writes in a
 * read-only transaction (and so on a standby) with PostgreSQL's own error,
 * act as the function's owner.  SPI is connected on first use.
 */
static void
ig_begin(FunctionCallInfo fcinfo, IgCall *call, const char *fname, bool writes)
{
	call->key = ig_check_name(fcinfo, 0, "key", &call->key_str);
	call->workflow = ig_check_name(fcinfo, 1, "workflow", &call->workflow_str);

	if (writes)
		PreventCommandIfReadOnly(fname);

	call->callcxt = CurrentMemoryContext;
	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
	SetUserIdAndSecContext(idem_function_owner(fcinfo),
						   call->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	call->writes = writes;
	call->rel = NULL;
	call->spi_connected = false;
}

/*
 * Finish an API call: close the table (its lock stays until the end of the
 * transaction), disconnect from SPI and become the caller again.
 */
static void
ig_end(IgCall *call)
{
	if (call->rel != NULL)
		table_close(call->rel, NoLock);
	call->rel = NULL;
	if (call->spi_connected && SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	call->spi_connected = false;
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
}

/*
 * Run one of the plans.  Prepared on first use and kept: the SQL text is
 * fully qualified, so a plan re-analyzed after DROP/CREATE EXTENSION still
 * means the same thing.  Plans are generic from the first call: each finds
 * one row by primary key whatever the parameters, so planning again per
 * call would only cost time.
 */
static int
ig_exec(IgCall *call, IgPlanId id, Datum *values, const char *nulls)
{
	int			rc;

	if (!call->spi_connected)
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		call->spi_connected = true;
	}

	if (ig_plans[id] == NULL)
	{
		const IgPlanDef *def = &ig_plan_defs[id];
		SPIPlanPtr	plan;

		plan = SPI_prepare_cursor(def->sql, def->nargs, (Oid *) def->argtypes,
								  CURSOR_OPT_GENERIC_PLAN);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 def->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		ig_plans[id] = plan;
	}

	rc = SPI_execute_plan(ig_plans[id], values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "idem_gate query failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > 1)
		elog(ERROR, "idem_gate query returned " UINT64_FORMAT " rows",
			 SPI_processed);
	return SPI_processed;
}

/*
 * Read the RETURNING row of the last write into *row: state, token,
 * attempt, claimed_at.
 */
static void
ig_read_row(IgRow *row)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;
	HeapTuple	tup = SPI_tuptable->vals[0];
	bool		isnull;
	Datum		d;

	memset(row, 0, sizeof(*row));
	row->found = true;
	d = SPI_getbinval(tup, desc, 1, &isnull);
	row->state = ig_state_from_datum(SPI_gettypeid(desc, 1), d);
	row->token = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	row->attempt = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	row->claimed_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
	row->result_isnull = true;
}

/*
 * The OID of idem_gate.claims; the numbers of the columns ig_probe() reads
 * are looked up again whenever it changes (DROP/CREATE EXTENSION).
 */
static Oid
ig_claims_oid(void)
{
	Oid			nsp = get_namespace_oid("idem_gate", false);
	Oid			relid = get_relname_relid("claims", nsp);

	if (!OidIsValid(relid))
		elog(ERROR, "relation idem_gate.claims does not exist");
	if (relid != ig_claims_relid)
	{
		for (int i = 0; i < IG_NUM_COLS; i++)
		{
			ig_col_attnums[i] = get_attnum(relid, ig_col_names[i]);
			if (ig_col_attnums[i] == InvalidAttrNumber)
				elog(ERROR, "idem_gate.claims has no column \"%s\"",
					 ig_col_names[i]);
		}
		ig_token_seq_relid = get_relname_relid("token_seq", nsp);
		if (!OidIsValid(ig_token_seq_relid))
			elog(ERROR, "sequence idem_gate.token_seq does not exist");
		ig_claims_relid = relid;
	}
	return relid;
}

/* The type of idem_gate.claims.state: the enum of the current extension. */
static Oid
ig_state_type(Relation rel)
{
	return TupleDescAttr(RelationGetDescr(rel),
						 ig_col_attnums[IG_COL_STATE] - 1)->atttypid;
}

/*
 * idem_gate.claims, opened once per call: with the lock of a write if the
 * call may write, so that reading the row and writing it take one lock.
 */
static Relation
ig_rel(IgCall *call)
{
	if (call->rel == NULL)
		call->rel = table_open(ig_claims_oid(),
							   call->writes ? RowExclusiveLock : AccessShareLock);
	return call->rel;
}

/*
 * Read the row of (workflow, key) as it is now; found = false if none.
 *
 * This is the whole of a duplicate claim, so it reads the primary key
 * index directly rather than through SPI and the executor.  Like an SPI
 * query it takes a new snapshot (under READ COMMITTED), so after waiting
 * for a concurrent claim it sees that claim's committed row.  Values are
 * copied into the caller's memory context.
 */
static void
ig_probe(IgCall *call, IgRow *row, bool keep_tuple)
{
	MemoryContext old = MemoryContextSwitchTo(call->callcxt);
	Relation	rel;
	Relation	idx;
	ScanKeyData skey[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snap;

	memset(row, 0, sizeof(*row));
	row->result_isnull = true;

	rel = ig_rel(call);
	idx = index_open(ig_compat_primary_key(rel), AccessShareLock);
	ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_TEXTEQ, call->workflow);
	skey[0].sk_collation = idx->rd_indcollation[0];
	ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_TEXTEQ, call->key);
	skey[1].sk_collation = idx->rd_indcollation[1];

	CommandCounterIncrement();
	snap = RegisterSnapshot(GetTransactionSnapshot());
	slot = table_slot_create(rel, NULL);
	scan = ig_compat_index_beginscan(rel, idx, snap, 2, 0);
	index_rescan(scan, skey, 2, NULL, 0);

	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d;

		row->found = true;
		d = slot_getattr(slot, ig_col_attnums[IG_COL_STATE], &isnull);
		row->state = ig_state_from_datum(ig_state_type(rel), d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_TOKEN], &isnull);
		row->token = DatumGetInt64(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_ATTEMPT], &isnull);
		row->attempt = DatumGetInt32(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_CLAIMED_AT], &isnull);
		row->claimed_at = DatumGetTimestampTz(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_UPDATED_AT], &isnull);
		row->updated_at = DatumGetTimestampTz(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_EXECUTION_ID], &isnull);
		row->execution_id = isnull ? NULL : TextDatumGetCString(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_FINGERPRINT], &isnull);
		row->fingerprint = isnull ? NULL : TextDatumGetCString(d);
		d = slot_getattr(slot, ig_col_attnums[IG_COL_RESULT], &row->result_isnull);
		if (!row->result_isnull)
			row->result = PointerGetDatum(DatumGetJsonbPCopy(d));
		row->tid = slot->tts_tid;
		if (keep_tuple)
			row->tuple = ExecCopySlotHeapTuple(slot);
	}

	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
	index_close(idx, NoLock);
	MemoryContextSwitchTo(old);
}

/*
 * Direct writes.
 *
 * The writes on the path of every event (the insert of a new key, and the
 * owner's completion or failure) go straight to the heap and its indexes
 * instead of through SPI and the executor.  They use the building blocks
 * of INSERT ... ON CONFLICT and UPDATE themselves: the pre-check of the
 * primary key that waits for a concurrent inserter, speculative insertion,
 * the executor's index maintenance, and table_tuple_update(), which waits
 * for a concurrent writer and reports what it did.  Concurrency therefore
 * behaves as the SQL does.  What they skip is executor start-up and the
 * evaluation of the CHECK constraints, which the rows written here satisfy
 * by construction (the regression tests check every row they write).
 *
 * They are used only while idem_gate.claims is as the extension created
 * it: no triggers, no row security, no defaults, no generated columns and
 * only its own CHECK constraints.  A DBA who adds an audit trigger or a
 * constraint of their own gets the SQL path, which honours them; a NOT NULL
 * added by hand is checked here and also sends the write to the SQL path.
 */
typedef enum IgDirect
{
	IG_DIRECT_DONE,				/* written */
	IG_DIRECT_RETRY,			/* the row changed under us: read it again */
	IG_DIRECT_UNUSABLE			/* the table was changed: use the SQL path */
} IgDirect;

/* idem_gate.claims as the extension creates it */
#define IG_CLAIMS_NATTS		14
#define IG_CLAIMS_NCHECKS	8

typedef struct IgWriter
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* virtual: the row to write */
} IgWriter;

/*
 * Open idem_gate.claims and its indexes for one write.  updated lists the
 * columns an update changes (none for an insert): the executor's index
 * maintenance uses it to hint "key unchanged" to the primary key, which
 * lets btree remove old versions bottom-up instead of splitting pages.
 * precheck prepares the primary key for ExecCheckIndexConstraints(); the
 * insert's own conflict detection does not need that.  Returns false,
 * with nothing opened, if the table is not as idem_gate made it.
 */
static bool
ig_writer_begin(IgWriter *w, IgCall *call, const IgCol *updated, int nupdated,
				bool precheck)
{
	Relation	rel = ig_rel(call);
	TupleDesc	desc = RelationGetDescr(rel);
	Bitmapset  *updated_cols = NULL;
	MemoryContext old;

	if (rel->trigdesc != NULL || rel->rd_rel->relrowsecurity ||
		desc->natts != IG_CLAIMS_NATTS || desc->constr == NULL ||
		desc->constr->num_check != IG_CLAIMS_NCHECKS ||
		desc->constr->num_defval != 0 || desc->constr->has_generated_stored)
		return false;

	w->rel = rel;
	w->estate = CreateExecutorState();
	old = MemoryContextSwitchTo(w->estate->es_query_cxt);

	for (int i = 0; i < nupdated; i++)
		updated_cols = bms_add_member(updated_cols,
									  ig_col_attnums[updated[i]] -
									  FirstLowInvalidHeapAttributeNumber);
	ig_compat_init_range_table(w->estate, rel, updated_cols);

	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);
	ExecOpenIndices(w->rri, precheck);
	w->estate->es_output_cid = GetCurrentCommandId(true);
	w->slot = ExecInitExtraTupleSlot(w->estate, desc, &TTSOpsVirtual);
	ExecClearTuple(w->slot);

	MemoryContextSwitchTo(old);
	return true;
}

/* Close what ig_writer_begin() opened; the locks stay until commit. */
static void
ig_writer_end(IgWriter *w)
{
	ExecCloseIndices(w->rri);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
}

/* Set one column of the row being written. */
static inline void
ig_writer_set(IgWriter *w, IgCol col, Datum value, bool isnull)
{
	int			i = ig_col_attnums[col] - 1;

	w->slot->tts_values[i] = value;
	w->slot->tts_isnull[i] = isnull;
}

/*
 * Finish the row being written.  False if it has a null in a NOT NULL
 * column, which only a NOT NULL added by hand can cause: the SQL path then
 * raises PostgreSQL's own error.
 */
static bool
ig_writer_store(IgWriter *w)
{
	TupleDesc	desc = RelationGetDescr(w->rel);

	ExecStoreVirtualTuple(w->slot);
	if (desc->constr->has_not_null)
	{
		for (int i = 0; i < desc->natts; i++)
			if (TupleDescAttr(desc, i)->attnotnull && w->slot->tts_isnull[i])
				return false;
	}
	return true;
}

/*
 * The error REPEATABLE READ and SERIALIZABLE raise when the row of the key
 * was written by a transaction the caller's snapshot does not see: the
 * claim can neither wait and read that row (as under READ COMMITTED) nor
 * ignore it.
 */
static void
ig_error_serialization(IgCall *call, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access to key \"%s\" in workflow \"%s\" due to concurrent %s",
					idem_display(call->key_str),
					idem_display(call->workflow_str), what),
			 errdetail("The claim was written by a transaction that this transaction's snapshot does not see."),
			 errhint("Retry the transaction, or call idem_gate's functions under READ COMMITTED, where they wait for a concurrent claim and answer from its row.")));
}

/* A text or jsonb argument as stored: not toasted, short header kept. */
static inline Datum
ig_untoasted(Datum d)
{
	return PointerGetDatum(PG_DETOAST_DATUM_PACKED(d));
}

/*
 * Insert the first claim of (workflow, key), as INSERT ... ON CONFLICT DO
 * NOTHING would: IG_DIRECT_RETRY if a concurrent claim inserted it first.
 *
 * The executor first looks for a conflicting row, waiting for an inserter
 * still in progress, and only then inserts; the insert itself detects the
 * conflicts that pre-check missed, and removes its row again.  The caller
 * has just read the key and found nothing, so the pre-check is done only
 * when a first attempt has met a concurrent claim (precheck): it then
 * waits for that claim's transaction to end, and the caller sees its row.
 */
static IgDirect
ig_direct_insert(IgCall *call, Datum execution_id, bool has_exec,
				 Datum fingerprint, bool has_fp, bool precheck, IgRow *row)
{
	IgWriter	w;
	TupleDesc	desc;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	int64		token;
	List	   *arbiter;
	ItemPointerData conflict_tid;
	bool		committed = false;	/* the pre-check found a committed row */
	bool		conflict = false;	/* the insert met a concurrent one */

	if (!ig_writer_begin(&w, call, NULL, 0, precheck))
		return IG_DIRECT_UNUSABLE;
	desc = RelationGetDescr(w.rel);

	memset(w.slot->tts_isnull, true, sizeof(bool) * desc->natts);
	token = nextval_internal(ig_token_seq_relid, true);
	ig_writer_set(&w, IG_COL_WORKFLOW, call->workflow, false);
	ig_writer_set(&w, IG_COL_KEY, call->key, false);
	ig_writer_set(&w, IG_COL_STATE,
				  ig_state_datum(ig_state_type(w.rel), IG_PROCESSING), false);
	ig_writer_set(&w, IG_COL_ATTEMPT, Int32GetDatum(1), false);
	ig_writer_set(&w, IG_COL_TOKEN, Int64GetDatum(token), false);
	ig_writer_set(&w, IG_COL_EXECUTION_ID,
				  has_exec ? ig_untoasted(execution_id) : (Datum) 0, !has_exec);
	ig_writer_set(&w, IG_COL_FINGERPRINT,
				  has_fp ? ig_untoasted(fingerprint) : (Datum) 0, !has_fp);
	ig_writer_set(&w, IG_COL_CREATED_AT, TimestampTzGetDatum(now), false);
	ig_writer_set(&w, IG_COL_CLAIMED_AT, TimestampTzGetDatum(now), false);
	ig_writer_set(&w, IG_COL_UPDATED_AT, TimestampTzGetDatum(now), false);
	if (!ig_writer_store(&w))
	{
		ig_writer_end(&w);
		return IG_DIRECT_UNUSABLE;
	}

	arbiter = list_make1_oid(ig_compat_primary_key(w.rel));
	if (precheck &&
		!ig_compat_check_index_constraints(w.rri, w.slot, w.estate,
										   &conflict_tid, arbiter))
		committed = true;
	else
	{
		TransactionId xid = GetCurrentTransactionId();
		uint32		spec_token = SpeculativeInsertionLockAcquire(xid);

		table_tuple_insert_speculative(w.rel, w.slot, w.estate->es_output_cid,
									   0, NULL, spec_token);
		ig_compat_insert_index_tuples(w.rri, w.slot, w.estate, &conflict,
									  arbiter);
		table_tuple_complete_speculative(w.rel, w.slot, spec_token, !conflict);
		SpeculativeInsertionLockRelease(xid);
	}
	list_free(arbiter);
	ig_writer_end(&w);

	if (committed)
	{
		/*
		 * Committed by a claim our snapshot does not see.  Under REPEATABLE
		 * READ no later read could see it either: fail as the SQL would.
		 */
		if (IsolationUsesXactSnapshot())
			ig_error_serialization(call, "update");
		return IG_DIRECT_RETRY;
	}
	if (conflict)
		return IG_DIRECT_RETRY;

	memset(row, 0, sizeof(*row));
	row->found = true;
	row->state = IG_PROCESSING;
	row->token = token;
	row->attempt = 1;
	row->claimed_at = now;
	row->result_isnull = true;
	return IG_DIRECT_DONE;
}

/*
 * The owner's transition of a processing row read by ig_probe(call, row,
 * true) to new_state, with the column extra (the receipt or the error)
 * set to value.  updated_at becomes now, or stays if the clock went back;
 * completed_at is set with it when the row completes.  IG_DIRECT_RETRY if
 * the row was changed concurrently (after waiting for that writer).
 */
static IgDirect
ig_direct_transition(IgCall *call, IgRow *row, IgState new_state, IgCol extra,
					 Datum value, bool isnull)
{
	static const IgCol updated[] = {
		IG_COL_STATE, IG_COL_UPDATED_AT, IG_COL_COMPLETED_AT, IG_COL_RESULT,
		IG_COL_LAST_ERROR
	};
	IgWriter	w;
	TupleDesc	desc;
	TimestampTz stamp = Max(GetCurrentTransactionStartTimestamp(),
							row->updated_at);
	TM_Result	result;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	IgIndexUpdate update_indexes;

	if (!ig_writer_begin(&w, call, updated, lengthof(updated), false))
		return IG_DIRECT_UNUSABLE;
	desc = RelationGetDescr(w.rel);

	heap_deform_tuple(row->tuple, desc, w.slot->tts_values, w.slot->tts_isnull);
	ig_writer_set(&w, IG_COL_STATE,
				  ig_state_datum(ig_state_type(w.rel), new_state), false);
	ig_writer_set(&w, IG_COL_UPDATED_AT, TimestampTzGetDatum(stamp), false);
	if (new_state == IG_COMPLETED)
		ig_writer_set(&w, IG_COL_COMPLETED_AT, TimestampTzGetDatum(stamp), false);
	ig_writer_set(&w, extra, isnull ? (Datum) 0 : ig_untoasted(value), isnull);
	if (!ig_writer_store(&w))
	{
		ig_writer_end(&w);
		return IG_DIRECT_UNUSABLE;
	}

	result = table_tuple_update(w.rel, &row->tid, w.slot, w.estate->es_output_cid,
								GetActiveSnapshot(), InvalidSnapshot, true,
								&tmfd, &lockmode, &update_indexes);
	switch (result)
	{
		case TM_Ok:
			ig_compat_update_index_tuples(w.rri, w.slot, w.estate,
										  update_indexes);
			break;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ig_error_serialization(call, result == TM_Updated ? "update" : "delete");
			break;
		default:
			elog(ERROR, "unexpected table_tuple_update status: %u", result);
	}
	ig_writer_end(&w);

	if (result != TM_Ok)
		return IG_DIRECT_RETRY;
	row->state = new_state;
	return IG_DIRECT_DONE;
}

/* Raise the "no claim exists" error. */
static void
ig_error_no_claim(IgCall *call, const char *verb)
{
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("cannot %s key \"%s\" in workflow \"%s\": no claim exists",
					verb, idem_display(call->key_str),
					idem_display(call->workflow_str)),
			 errhint("Claim the key with idem_claim() or idem_claim_ex() first; completed and failed claims are deleted once their retention has passed.")));
}

/*
 * Raise the "stale token" error: the caller's run lost its claim to a
 * takeover, so it must not record an outcome.
 */
static void
ig_error_stale_token(IgCall *call, int64 token, IgRow *row)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("token " INT64_FORMAT " no longer owns key \"%s\" in workflow \"%s\"",
					token, idem_display(call->key_str),
					idem_display(call->workflow_str)),
			 errdetail("The claim was granted to another run: it is now %s under token " INT64_FORMAT ", attempt %d.",
					   ig_state_names[row->state], row->token, row->attempt),
			 errhint("Another run owns this event now; this run must not record an outcome for it.")));
}

/*
 * Raise the "transition not allowed" error, with a hint that fits the
 * state the claim is in.
 */
static void
ig_error_state(IgCall *call, const char *verb, IgRow *row)
{
	const char *hint;

	switch (row->state)
	{
		case IG_COMPLETED:
			hint = "A completed claim is final; idem_status() shows its receipt.";
			break;
		case IG_NEEDS_REVIEW:
			hint = "Decide the outcome with idem_resolve(key, workflow, 'completed') or idem_resolve(key, workflow, 'retry').";
			break;
		case IG_FAILED_RETRYABLE:
			if (strcmp(verb, "resolve") == 0)
				hint = "Only needs_review and processing claims can be resolved; a failed_retryable claim runs again at its next claim.";
			else
				hint = "Claim the key again with idem_claim() or idem_claim_ex() before recording an outcome.";
			break;
		default:
			hint = "Only needs_review and processing claims can be resolved.";
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s key \"%s\" in workflow \"%s\": the claim is %s",
					verb, idem_display(call->key_str),
					idem_display(call->workflow_str),
					ig_state_names[row->state]),
			 errhint("%s", hint)));
}

/* The result of one claim. */
typedef struct IgClaimResult
{
	IgOutcome	outcome;
	IgRow		row;
	bool		granted;		/* the caller owns the token */
	Datum		result;			/* receipt, in the caller's context */
} IgClaimResult;

/*
 * Attempt one of the grant writes (insert, retry, takeover).  Returns false
 * if the row changed under it, and the caller reads it again.
 */
static bool
ig_try_grant(IgCall *call, IgPlanId plan, Datum *values, const char *nulls,
			 IgOutcome outcome, IgClaimResult *res)
{
	if (ig_exec(call, plan, values, nulls) == 0)
		return false;
	ig_read_row(&res->row);
	res->outcome = outcome;
	res->granted = true;
	return true;
}

/*
 * The state machine of idem_claim and idem_claim_ex.  Reads the row, then
 * either answers from it or attempts the one write that its state allows;
 * a write that finds the row changed under it starts over.
 */
static void
ig_claim(FunctionCallInfo fcinfo, const char *fname, IgClaimResult *res)
{
	IgCall		call;
	Interval   *stale = NULL;
	TimestampTz cutoff = 0;
	Datum		execution_id = (Datum) 0;
	Datum		fingerprint = (Datum) 0;
	const char *execution_str = NULL;
	const char *fingerprint_str = NULL;
	bool		has_exec = false;
	bool		has_fp = false;
	bool		raced = false;	/* a first insert met a concurrent claim */

	/* stale_interval: NULL never takes over; otherwise it must be positive */
	if (!PG_ARGISNULL(2))
	{
		Interval	zero;

		stale = PG_GETARG_INTERVAL_P(2);
		memset(&zero, 0, sizeof(zero));
		if (DatumGetBool(DirectFunctionCall2(interval_le,
											 IntervalPGetDatum(stale),
											 IntervalPGetDatum(&zero))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stale_interval must be positive, not \"%s\"",
							DatumGetCString(DirectFunctionCall1(interval_out,
																IntervalPGetDatum(stale)))),
					 errhint("Pass NULL to never take over a claim, or a positive interval longer than the side effect can take, such as '15 minutes'.")));
		cutoff = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_mi_interval,
														 TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()),
														 IntervalPGetDatum(stale)));
	}
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
	{
		fingerprint = PG_GETARG_DATUM(3);
		fingerprint_str = TextDatumGetCString(fingerprint);
		has_fp = true;
	}
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
	{
		execution_id = PG_GETARG_DATUM(4);
		execution_str = TextDatumGetCString(execution_id);
		has_exec = true;
	}

	ig_begin(fcinfo, &call, fname, true);

	for (;;)
	{
		IgRow	   *row = &res->row;
		Datum		values[6];
		char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

		CHECK_FOR_INTERRUPTS();

		values[0] = call.workflow;
		values[1] = call.key;
		values[2] = execution_id;
		nulls[2] = has_exec ? ' ' : 'n';
		values[3] = fingerprint;
		nulls[3] = has_fp ? ' ' : 'n';

		ig_probe(&call, row, false);

		if (!row->found)
		{
			/* first claim: exactly one concurrent inserter wins */
			switch (ig_direct_insert(&call, execution_id, has_exec,
									 fingerprint, has_fp, raced, row))
			{
				case IG_DIRECT_DONE:
					res->outcome = IG_OUTCOME_NEW;
					res->granted = true;
					break;
				case IG_DIRECT_RETRY:
					raced = true;
					continue;
				case IG_DIRECT_UNUSABLE:
					if (!ig_try_grant(&call, IG_PLAN_INSERT, values, nulls,
									  IG_OUTCOME_NEW, res))
						continue;
					break;
			}
			break;
		}

		if (has_fp && row->fingerprint != NULL &&
			strcmp(row->fingerprint, fingerprint_str) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
					 errmsg("fingerprint mismatch for key \"%s\" in workflow \"%s\"",
							idem_display(call.key_str),
							idem_display(call.workflow_str)),
					 errdetail("The key was first claimed with fingerprint \"%s\"; this call gives \"%s\".",
							   idem_display(row->fingerprint),
							   idem_display(fingerprint_str)),
					 errhint("The same key was reused for a different payload: check the sender's event ids, or derive the key from the payload with idem_hash().")));

		if (row->state == IG_COMPLETED)
		{
			res->outcome = IG_OUTCOME_COMPLETED;
			if (!row->result_isnull)
				res->result = row->result;
			break;
		}
		if (row->state == IG_NEEDS_REVIEW)
		{
			res->outcome = IG_OUTCOME_NEEDS_REVIEW;
			break;
		}
		if (row->state == IG_FAILED_RETRYABLE)
		{
			/* a retry after a clean failure is a new attempt */
			values[4] = Int64GetDatum(row->token);
			if (!ig_try_grant(&call, IG_PLAN_RETRY, values, nulls,
							  IG_OUTCOME_NEW, res))
				continue;
			break;
		}

		/* processing */
		if (has_exec && row->execution_id != NULL &&
			strcmp(row->execution_id, execution_str) == 0)
		{
			/* the owning run came back: same token, nothing changes */
			res->outcome = IG_OUTCOME_NEW;
			res->granted = true;
			break;
		}
		if (stale != NULL && row->updated_at <= cutoff)
		{
			values[4] = Int64GetDatum(row->token);
			values[5] = TimestampTzGetDatum(cutoff);
			if (!ig_try_grant(&call, IG_PLAN_TAKEOVER, values, nulls,
							  IG_OUTCOME_STALE_TAKEN, res))
				continue;
			break;
		}
		res->outcome = IG_OUTCOME_IN_FLIGHT;
		break;
	}

	ig_end(&call);

	idem_stats_count_outcome(res->outcome);
}

/*
 * The return type of an enum-returning API function: from the call site,
 * or by name when called without an expression tree.
 */
static Oid
ig_rettype(FunctionCallInfo fcinfo, const char *name)
{
	Oid			rettype = get_fn_expr_rettype(fcinfo->flinfo);

	return OidIsValid(rettype) ? rettype : ig_type_oid(name);
}

/*
 * The first parameters of an owner's transition plan: $1 workflow, $2 key,
 * $3 the token (NULL: do not check it), $4 the call's fourth argument (the
 * receipt of idem_complete, the error of idem_fail).
 */
static void
ig_owner_args(FunctionCallInfo fcinfo, IgCall *call, Datum *values, char *nulls)
{
	values[0] = call->workflow;
	values[1] = call->key;
	values[2] = PG_ARGISNULL(2) ? Int64GetDatum(0) : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	values[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3) ? 'n' : ' ';
}

/*
 * May the caller of an owner's transition act on the row it read?  Raises
 * the error that explains why not, or returns false when the row is
 * already completed and completed_ok (a retried completion).
 */
static bool
ig_owner_check(IgCall *call, const char *verb, IgRow *row, bool has_token,
			   int64 token, bool completed_ok)
{
	if (!row->found)
		ig_error_no_claim(call, verb);
	if (has_token && row->token != token)
		ig_error_stale_token(call, token, row);
	if (row->state == IG_COMPLETED && completed_ok)
		return false;
	if (row->state != IG_PROCESSING)
		ig_error_state(call, verb, row);
	return true;
}

/*
 * An owner's transition out of processing (idem_complete, idem_fail) to
 * new_state, storing the call's fourth argument ($4 of the plan) in the
 * column extra.  Reads the row, checks it with ig_owner_check() and writes
 * it directly; a row changed in between is read again.  If direct writes
 * are not possible, runs the plan instead and reads the row only when it
 * matched nothing.  Argument $3 of the plan is the token, or NULL not to
 * check it.  Returns false for a retried completion.
 */
static bool
ig_owner_transition(IgCall *call, IgPlanId plan, const char *verb,
					Datum *values, const char *nulls, bool completed_ok,
					IgState new_state, IgCol extra, IgRow *row)
{
	bool		has_token = (nulls[2] != 'n');
	int64		token = DatumGetInt64(values[2]);
	bool		direct = true;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();

		if (direct)
		{
			ig_probe(call, row, true);
			if (!ig_owner_check(call, verb, row, has_token, token, completed_ok))
				return false;
			switch (ig_direct_transition(call, row, new_state, extra, values[3],
										 nulls[3] == 'n'))
			{
				case IG_DIRECT_DONE:
					return true;
				case IG_DIRECT_RETRY:
					continue;
				case IG_DIRECT_UNUSABLE:
					direct = false;
					break;
			}
		}

		if (ig_exec(call, plan, values, nulls) == 1)
		{
			ig_read_row(row);
			return true;
		}

		ig_probe(call, row, false);
		if (!ig_owner_check(call, verb, row, has_token, token, completed_ok))
			return false;
	}
}

/*
 * idem_claim(key, workflow, stale_interval): the outcome only.
 */
PG_FUNCTION_INFO_V1(idem_claim);

Datum
idem_claim(PG_FUNCTION_ARGS)
{
	IgClaimResult res;

	memset(&res, 0, sizeof(res));
	ig_claim(fcinfo, "idem_claim()", &res);

	PG_RETURN_DATUM(ig_outcome_datum(ig_rettype(fcinfo, "outcome"), res.outcome));
}

/*
 * idem_claim_ex(key, workflow, stale_interval, fingerprint, execution_id):
 * one row of flat columns.  The token is returned only to the run that
 * owns the claim, so a duplicate delivery cannot complete someone else's.
 */
PG_FUNCTION_INFO_V1(idem_claim_ex);

Datum
idem_claim_ex(PG_FUNCTION_ARGS)
{
	IgClaimResult res;
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	/* the result descriptor is built once per call site */
	tupdesc = (TupleDesc) fcinfo->flinfo->fn_extra;
	if (tupdesc == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
		fcinfo->flinfo->fn_extra = tupdesc;
		MemoryContextSwitchTo(old);
	}

	memset(&res, 0, sizeof(res));
	ig_claim(fcinfo, "idem_claim_ex()", &res);

	values[0] = ig_outcome_datum(TupleDescAttr(tupdesc, 0)->atttypid, res.outcome);
	values[1] = Int64GetDatum(res.row.token);
	nulls[1] = !res.granted;
	values[2] = Int32GetDatum(res.row.attempt);
	values[3] = ig_state_datum(TupleDescAttr(tupdesc, 3)->atttypid, res.row.state);
	values[4] = res.result;
	nulls[4] = (res.result == (Datum) 0);
	values[5] = TimestampTzGetDatum(res.row.claimed_at);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * idem_heartbeat(key, workflow, token): a long side effect keeps its claim
 * fresh so that no stale takeover happens; false tells the run it has lost
 * the claim and must stop.
 */
PG_FUNCTION_INFO_V1(idem_heartbeat);

Datum
idem_heartbeat(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;
	int64		token;
	Datum		values[3];
	bool		owns;

	token = ig_check_required_token(fcinfo, 2);
	ig_begin(fcinfo, &call, "idem_heartbeat()", true);

	values[0] = call.workflow;
	values[1] = call.key;
	values[2] = Int64GetDatum(token);
	owns = ig_exec(&call, IG_PLAN_HEARTBEAT, values, NULL) == 1;
	if (!owns)
	{
		ig_probe(&call, &row, false);
		if (!row.found)
			ig_error_no_claim(&call, "heartbeat");
	}

	ig_end(&call);
	PG_RETURN_BOOL(owns);
}

/*
 * idem_complete(key, workflow, token, result): the side effect happened;
 * store its receipt.  Completing again with the same token (or none) is
 * harmless, so a retried completion call never fails a workflow.
 */
PG_FUNCTION_INFO_V1(idem_complete);

Datum
idem_complete(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	ig_begin(fcinfo, &call, "idem_complete()", true);
	ig_owner_args(fcinfo, &call, values, nulls);

	ig_owner_transition(&call, IG_PLAN_COMPLETE, "complete", values, nulls,
						true, IG_COMPLETED, IG_COL_RESULT, &row);

	ig_end(&call);
	idem_stats_count(IG_STAT_COMPLETIONS);
	PG_RETURN_BOOL(true);
}

/*
 * idem_fail(key, workflow, token, error, retryable): the run failed.
 * retryable means "before any side effect": the next claim may run it
 * again.  Otherwise the side effect may have happened and a person decides.
 */
PG_FUNCTION_INFO_V1(idem_fail);

Datum
idem_fail(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		retryable = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);

	ig_begin(fcinfo, &call, "idem_fail()", true);
	ig_owner_args(fcinfo, &call, values, nulls);
	values[4] = BoolGetDatum(retryable);

	ig_owner_transition(&call, IG_PLAN_FAIL, "fail", values, nulls,
						false, retryable ? IG_FAILED_RETRYABLE : IG_NEEDS_REVIEW,
						IG_COL_LAST_ERROR, &row);

	ig_end(&call);
	idem_stats_count(retryable ? IG_STAT_FAILS_RETRYABLE : IG_STAT_FAILS_REVIEW);

	PG_RETURN_DATUM(ig_state_datum(ig_rettype(fcinfo, "state"), row.state));
}

/*
 * idem_resolve(key, workflow, resolution, result): an operator's decision
 * about a claim whose side effect may or may not have happened.
 */
PG_FUNCTION_INFO_V1(idem_resolve);

Datum
idem_resolve(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	char	   *resolution;
	bool		complete;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resolution must not be null"),
				 errhint("Use 'completed' if the side effect happened, 'retry' if it did not.")));
	resolution = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strcmp(resolution, "completed") == 0)
		complete = true;
	else if (strcmp(resolution, "retry") == 0)
		complete = false;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown resolution \"%s\"", idem_display(resolution)),
				 errhint("Use 'completed' if the side effect happened, 'retry' if it did not.")));
	if (!complete && !PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resolution \"retry\" takes no result"),
				 errhint("A receipt is stored only with resolution 'completed'.")));

	ig_begin(fcinfo, &call, "idem_resolve()", true);

	values[0] = call.workflow;
	values[1] = call.key;
	values[2] = BoolGetDatum(complete);
	values[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3) ? 'n' : ' ';

	if (ig_exec(&call, IG_PLAN_RESOLVE, values, nulls) == 1)
		ig_read_row(&row);
	else
	{
		ig_probe(&call, &row, false);
		if (!row.found)
			ig_error_no_claim(&call, "resolve");
		ig_error_state(&call, "resolve", &row);
	}

	ig_end(&call);
	idem_stats_count(IG_STAT_RESOLVES);

	PG_RETURN_DATUM(ig_state_datum(ig_rettype(fcinfo, "state"), row.state));
}

/*
 * idem_status(key, workflow): the whole row, for people and for error
 * workflows; works on a standby.
 */
PG_FUNCTION_INFO_V1(idem_status);

Datum
idem_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	IgCall		call;
	Datum		values[2];
	HeapTuple	tuple = NULL;

	ig_begin(fcinfo, &call, "idem_status()", false);

	values[0] = call.workflow;
	values[1] = call.key;
	if (ig_exec(&call, IG_PLAN_STATUS, values, NULL) == 1)
	{
		bool		isnull;
		HeapTupleHeader rec;
		HeapTupleData tmp;
		MemoryContext old;

		rec = DatumGetHeapTupleHeader(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc,
													1, &isnull));
		tmp.t_len = HeapTupleHeaderGetDatumLength(rec);
		ItemPointerSetInvalid(&tmp.t_self);
		tmp.t_tableOid = InvalidOid;
		tmp.t_data = rec;
		old = MemoryContextSwitchTo(call.callcxt);
		tuple = heap_copytuple(&tmp);
		MemoryContextSwitchTo(old);
	}
	ig_end(&call);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (tuple != NULL)
		tuplestore_puttuple(rsinfo->setResult, tuple);
	return (Datum) 0;
}
