/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The claim state machine and its SQL entry points: idem_claim,
 *	  idem_claim_ex, idem_claim_many, idem_heartbeat, idem_complete,
 *	  idem_fail, idem_resolve, idem_release and idem_status.
 *
 * Each call reads the row of its key (store.c), then either answers from
 * it or attempts the one write that the row's state allows; a write that
 * finds the row changed since it was read starts over.  Expected
 * situations never raise an error (an n8n Postgres node sends all items as
 * one statement, and one error fails them all); only bad input does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "audit.h"
#include "call.h"
#include "citus_batch.h"
#include "durable.h"
#include "janitor.h"
#include "shape.h"
#include "store.h"

/* The arguments of one claim, checked. */
typedef struct IgClaimArgs
{
	bool		has_stale;
	TimestampTz cutoff;			/* processing rows updated up to here are stale */
	IgGrant		grant;
	const char *execution_str;
	const char *fingerprint_str;
} IgClaimArgs;

/* The result of one claim. */
typedef struct IgClaimResult
{
	IgOutcome	outcome;
	IgRow		row;
	bool		granted;		/* the caller owns the token */
	bool		wrote;			/* the claim wrote the row (not a re-entry) */
	XLogRecPtr	durable;		/* an answer read from the row: what the
								 * synchronous standbys must confirm first */
} IgClaimResult;

/*
 * An optional text argument that, when given, must not be empty: an empty
 * execution id would make two runs one, an empty fingerprint would match
 * any payload hashed to nothing.
 */
static const char *
ig_optional_text(FunctionCallInfo fcinfo, int argno, const char *what,
				 Datum *value, bool *given)
{
	text	   *t;

	*given = (PG_NARGS() > argno && !PG_ARGISNULL(argno));
	if (!*given)
		return NULL;
	t = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(t) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint("Pass NULL when there is none.")));
	*value = PointerGetDatum(t);
	return text_to_cstring(t);
}

/*
 * A delivery's payload, kept with the claim as a reviewer's evidence: a
 * JSON object or array (a scalar is refused, a SQL NULL is none).  One
 * larger than idem_gate.max_payload_bytes is not kept; its size is.
 */
static void
ig_payload(Datum d, const char *what, IgGrant *grant)
{
	Jsonb	   *j = DatumGetJsonbP(d);
	Size		bytes = VARSIZE(j);

	if (JB_ROOT_IS_SCALAR(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object or array", what),
				 errdetail("It is a single JSON value."),
				 errhint("Pass the delivery's body as it came, such as $json.body in n8n, or NULL to keep none.")));
	grant->has_payload = true;
	grant->payload = PointerGetDatum(j);
	grant->payload_dropped = (bytes > (Size) idem_max_payload_bytes) ?
		(int32) Min(bytes, (Size) PG_INT32_MAX) : 0;
}

/*
 * Check the claim arguments after key and workflow: stale_interval (NULL
 * never takes over), fingerprint, execution_id and the payload (1.2).  The
 * staleness cutoff
 * is measured from the start of the caller's transaction, the older and
 * so safer of the two clocks: a claim never takes over sooner than the
 * interval says.
 */
static void
ig_claim_args(FunctionCallInfo fcinfo, int stale_arg, int fp_arg,
			  int exec_arg, int payload_arg, bool token_issued, IgClaimArgs *a)
{
	memset(a, 0, sizeof(*a));
	if (!PG_ARGISNULL(stale_arg))
	{
		int64		usecs = ig_duration_usecs(fcinfo, stale_arg, "stale_interval");

		a->has_stale = true;
		a->cutoff = GetCurrentTransactionStartTimestamp() - usecs;
	}
	if (fp_arg >= 0)
		a->fingerprint_str = ig_optional_text(fcinfo, fp_arg, "fingerprint",
											  &a->grant.fingerprint,
											  &a->grant.has_fp);
	if (exec_arg >= 0)
		a->execution_str = ig_optional_text(fcinfo, exec_arg, "execution_id",
											&a->grant.execution_id,
											&a->grant.has_exec);
	if (payload_arg >= 0 && PG_NARGS() > payload_arg && !PG_ARGISNULL(payload_arg))
		ig_payload(PG_GETARG_DATUM(payload_arg), "payload", &a->grant);
	a->grant.token_issued = token_issued;
}

/*
 * The error for a key reused for another payload.  It shows the caller's
 * fingerprint, never the stored one.
 */
static void
ig_error_fingerprint(IgCall *call, const char *given)
{
	idem_stats_count(IG_STAT_MISMATCHES);
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
			 errmsg("fingerprint mismatch for key \"%s\" in workflow \"%s\"",
					idem_display(call->key_str),
					idem_display(call->workflow_str)),
			 errdetail("The key was first claimed with another fingerprint; this call gives \"%s\".",
					   idem_display(given)),
			 errhint("The same key was reused for a different payload: check the sender's event ids, or derive the key from the payload with idem_hash().")));
}

/*
 * The key's row exists (the first claim's insert met it) but row level
 * security keeps the owner of the gate's functions from reading it: the
 * gate can neither answer from it nor write around it.
 */
static void
ig_error_hidden(IgCall *call)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("row level security of idem_gate.claims hides the claim of key \"%s\" in workflow \"%s\" from the owner of idem_gate's functions",
					idem_display(call->key_str), idem_display(call->workflow_str)),
			 errdetail("The key is claimed already, but a policy on idem_gate.claims keeps role \"%s\" from reading its row.",
					   GetUserNameFromId(GetUserId(), false)),
			 errhint("Let the policies of idem_gate.claims show the owner of the gate's functions every workflow it serves.")));
}

/*
 * One claim of call's key: the state machine of idem_claim, idem_claim_ex
 * and each element of idem_claim_many.
 */
static void
ig_claim_key(IgCall *call, const IgClaimArgs *a, IgClaimResult *res)
{
	IgRow	   *row = &res->row;
	bool		raced = false;	/* a first insert met a concurrent claim */

	res->granted = false;
	res->wrote = false;
	res->durable = InvalidXLogRecPtr;
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();

		ig_store_probe(call, row, false);

		if (!row->found && raced && ig_rls_applies(IG_TABLE_CLAIMS))
			ig_error_hidden(call);
		if (!row->found)
		{
			/* first claim: exactly one concurrent inserter wins */
			if (ig_store_insert(call, &a->grant, raced, row) == IG_WRITE_RETRY)
			{
				raced = true;
				continue;
			}
			res->outcome = IG_OUTCOME_NEW;
			res->granted = true;
			res->wrote = true;
			return;
		}

		if (a->grant.has_fp && row->fingerprint != NULL &&
			strcmp(row->fingerprint, a->fingerprint_str) != 0)
			ig_error_fingerprint(call, a->fingerprint_str);

		switch (row->state)
		{
			case IG_COMPLETED:
				res->outcome = IG_OUTCOME_COMPLETED;
				res->durable = ig_durable_lsn(call->workflow_str, call->key_str);
				return;
			case IG_NEEDS_REVIEW:
				res->outcome = IG_OUTCOME_NEEDS_REVIEW;
				res->durable = ig_durable_lsn(call->workflow_str, call->key_str);
				return;
			case IG_FAILED_RETRYABLE:
				/* a retry after a clean failure is a new attempt */
				if (ig_store_regrant(call, &a->grant, row, false, 0) == IG_WRITE_RETRY)
					continue;
				res->outcome = IG_OUTCOME_NEW;
				res->granted = true;
				res->wrote = true;
				return;
			default:
				break;
		}

		/* processing */
		if (a->grant.has_exec && row->execution_id != NULL &&
			strcmp(row->execution_id, a->execution_str) == 0)
		{
			/* the owning run came back: same token, nothing changes */
			res->outcome = IG_OUTCOME_NEW;
			res->granted = true;
			res->durable = ig_durable_lsn(call->workflow_str, call->key_str);
			return;
		}
		if (a->has_stale && row->updated_at <= a->cutoff)
		{
			if (ig_store_regrant(call, &a->grant, row, true, a->cutoff) == IG_WRITE_RETRY)
				continue;
			res->outcome = IG_OUTCOME_STALE_TAKEN;
			res->granted = true;
			res->wrote = true;
			return;
		}
		res->outcome = IG_OUTCOME_IN_FLIGHT;
		res->durable = ig_durable_lsn(call->workflow_str, call->key_str);
		return;
	}
}

/*
 * idem_claim(key, workflow, stale_interval): the outcome only.  No token
 * is handed out, so the owner's calls keep 1.0's rule: a NULL token is not
 * checked.
 */
PG_FUNCTION_INFO_V1(idem_claim);

Datum
idem_claim(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgClaimArgs a;
	IgClaimResult res;

	ig_call_begin(fcinfo, &call, "idem_claim()", true);
	ig_claim_args(fcinfo, 2, -1, -1, -1, false, &a);
	ig_claim_key(&call, &a, &res);
	ig_call_end(&call);
	ig_durable_wait(res.durable);
	idem_stats_count_outcome(res.outcome);

	PG_RETURN_DATUM(ig_outcome_datum(ig_rettype(fcinfo, "outcome"), res.outcome));
}

/*
 * The result row of idem_claim_ex and idem_claim_many.  The token is
 * returned only to the run that owns the claim, so a duplicate delivery
 * cannot complete someone else's; the stored receipt only with completed.
 */
static void
ig_claim_values(TupleDesc desc, int first, IgClaimResult *res, Datum *values,
				bool *nulls)
{
	values[first] = ig_outcome_datum(TupleDescAttr(desc, first)->atttypid,
									 res->outcome);
	values[first + 1] = Int64GetDatum(res->row.token);
	nulls[first + 1] = !res->granted;
	values[first + 2] = Int32GetDatum(res->row.attempt);
	values[first + 3] = ig_state_datum(TupleDescAttr(desc, first + 3)->atttypid,
									   res->row.state);
	values[first + 4] = res->row.result;
	nulls[first + 4] = (res->outcome != IG_OUTCOME_COMPLETED ||
						res->row.result_isnull);
	values[first + 5] = TimestampTzGetDatum(res->row.claimed_at);
}

/*
 * idem_claim_ex(key, workflow, stale_interval, fingerprint, execution_id):
 * one row of flat columns.  The token it hands out is then required by
 * idem_complete, idem_fail and idem_heartbeat (where the table has the
 * column that records it, from 1.1 on).
 */
PG_FUNCTION_INFO_V1(idem_claim_ex);

Datum
idem_claim_ex(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgClaimArgs a;
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

	ig_call_begin(fcinfo, &call, "idem_claim_ex()", true);
	ig_claim_args(fcinfo, 2, 3, 4, 5, true, &a);
	ig_claim_key(&call, &a, &res);
	ig_call_end(&call);
	ig_durable_wait(res.durable);
	idem_stats_count_outcome(res.outcome);

	ig_claim_values(tupdesc, 0, &res, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* An element of idem_claim_many, in the order it is claimed. */
typedef struct IgManyElem
{
	int			idx;			/* 0-based index in this call's arrays */
	int			ord;			/* 1-based position in the caller's array */
	Datum		key;
	const char *key_str;
	Datum		fingerprint;
	bool		has_fp;
	IgGrant		payload;		/* its payload fields only */
	bool		repeat;			/* the key occurred earlier in the input */
} IgManyElem;

/* Claim order: by key, then by position, so repeats follow their first. */
static int
ig_many_cmp(const void *a, const void *b)
{
	const IgManyElem *x = a;
	const IgManyElem *y = b;
	int			c = strcmp(x->key_str, y->key_str);

	if (c != 0)
		return c;
	return (x->ord > y->ord) - (x->ord < y->ord);
}

/* Name the element of idem_claim_many an error is about. */
static void
ig_many_context(void *arg)
{
	errcontext("element %d of keys", *(int *) arg);
}

/* The text elements of an array argument; NULL elements are 22004. */
static int
ig_text_elements(FunctionCallInfo fcinfo, int argno, const char *what,
				 Datum **elems)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(argno);
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", what),
				 errhint("Pass one element per key, such as ARRAY['evt_1', 'evt_2'].")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s[%d] must not be null", what, i + 1),
					 errhint("Pass one non-null value per element.")));
	return n;
}

/*
 * The body of idem_claim_many and of one of its shard groups on Citus
 * (group): one row per element, in input order, each claimed as
 * idem_claim_ex would claim it.  Keys are claimed in sorted order, so two
 * calls sharing keys wait for each other in one order and never deadlock;
 * a key that occurs again later in the array is in_flight there.
 */
static void
ig_many(FunctionCallInfo fcinfo, bool group)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	IgCall		call;
	IgClaimArgs a;
	Datum	   *keys;
	Datum	   *fps = NULL;
	int		   *ords = NULL;
	int			guc_level = 0;
	int			n;
	IgManyElem *elems;
	IgClaimResult *results;
	ErrorContextCallback errcb;
	const char *stored_fp = NULL;
	uint64		counts[IG_NUM_OUTCOMES] = {0};
	XLogRecPtr	durable = InvalidXLogRecPtr;
	Datum	   *payloads = NULL;
	bool	   *payload_nulls = NULL;
	int			npayloads = 0;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("keys must not be null"),
				 errhint("Pass an array of keys; an empty array claims nothing.")));
	n = ig_text_elements(fcinfo, 0, "keys", &keys);
	if (!PG_ARGISNULL(3) &&
		ig_text_elements(fcinfo, 3, "fingerprints", &fps) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fingerprints must have as many elements as keys"),
				 errdetail("keys has %d elements, fingerprints %d.", n,
						   ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(3)),
										  ARR_DIMS(PG_GETARG_ARRAYTYPE_P(3)))),
				 errhint("Pass one fingerprint per key, or NULL for none.")));
	if (group)
		ords = ig_citus_group_ords(fcinfo, 6, n);
	else if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(5);

		if (ARR_NDIM(arr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("payloads must be a one-dimensional array"),
					 errhint("Pass one payload per key, or NULL for none.")));
		deconstruct_array(arr, JSONBOID, -1, false, TYPALIGN_INT,
						  &payloads, &payload_nulls, &npayloads);
		if (npayloads != n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("payloads must have as many elements as keys"),
					 errdetail("keys has %d elements, payloads %d.", n, npayloads),
					 errhint("Pass one payload per key (NULL where there is none), or NULL for none at all.")));
	}

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	/* every argument is checked, even when there is nothing to claim */
	ig_claim_args(fcinfo, 2, -1, 4, -1, true, &a);
	ig_call_open(fcinfo, &call, "idem_claim_many()", true);
	if (group)
		guc_level = ig_citus_group_begin(fcinfo, 7, call.workflow_str);
	if (n == 0)
	{
		ig_call_end(&call);
		if (group)
			AtEOXact_GUC(true, guc_level);
		return;
	}

	elems = palloc0(sizeof(IgManyElem) * n);
	results = palloc0(sizeof(IgClaimResult) * n);
	for (int i = 0; i < n; i++)
	{
		elems[i].idx = i;
		elems[i].ord = group ? ords[i] : i + 1;
		elems[i].key_str = ig_key_element(keys[i], elems[i].ord, &elems[i].key);
		if (fps != NULL)
		{
			text	   *fp = DatumGetTextPP(fps[i]);

			if (VARSIZE_ANY_EXHDR(fp) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("fingerprints[%d] must not be empty", elems[i].ord),
						 errhint("Pass NULL for no fingerprints.")));
			elems[i].fingerprint = PointerGetDatum(fp);
			elems[i].has_fp = true;
		}
		if (payloads != NULL && !payload_nulls[i])
			ig_payload(payloads[i], psprintf("payloads[%d]", elems[i].ord),
					   &elems[i].payload);
	}

	/*
	 * On Citus, outside a transaction block, each shard group goes in one
	 * round trip to the node holding it (citus_batch.c).
	 */
	if (!group && payloads == NULL && ig_citus_batch_applies())
	{
		ig_citus_claim_many(fcinfo, keys, fps, n, call.save_userid);
		ig_call_end(&call);
		return;
	}
	qsort(elems, n, sizeof(IgManyElem), ig_many_cmp);

	errcb.callback = ig_many_context;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	for (int i = 0; i < n; i++)
	{
		IgManyElem *e = &elems[i];
		IgClaimResult *res = &results[e->idx];

		errcb.arg = &e->ord;
		call.key = e->key;
		call.key_str = e->key_str;
		a.grant.fingerprint = e->fingerprint;
		a.grant.has_fp = e->has_fp;
		a.grant.has_payload = e->payload.has_payload;
		a.grant.payload = e->payload.payload;
		a.grant.payload_dropped = e->payload.payload_dropped;
		a.fingerprint_str = e->has_fp ? TextDatumGetCString(e->fingerprint) : NULL;
		e->repeat = (i > 0 && strcmp(elems[i - 1].key_str, e->key_str) == 0);
		if (e->repeat)
		{
			/*
			 * Only the first occurrence can own the key; a later one is
			 * in_flight, and its fingerprint is checked against the one the
			 * key now has, as idem_claim_ex would.
			 */
			if (a.grant.has_fp && stored_fp != NULL &&
				strcmp(stored_fp, a.fingerprint_str) != 0)
				ig_error_fingerprint(&call, a.fingerprint_str);
			*res = results[elems[i - 1].idx];
			res->outcome = IG_OUTCOME_IN_FLIGHT;
			res->granted = false;
		}
		else
		{
			ig_claim_key(&call, &a, res);
			/*
			 * The key's fingerprint now: as read, or as this claim stored
			 * (a re-entry of the owning run writes nothing)
			 */
			stored_fp = res->row.fingerprint;
			if (stored_fp == NULL && res->wrote && a.grant.has_fp)
				stored_fp = a.fingerprint_str;
		}
		counts[res->outcome]++;
		if (!e->repeat)
			durable = Max(durable, res->durable);
	}
	error_context_stack = errcb.previous;
	ig_call_end(&call);
	if (group)
		AtEOXact_GUC(true, guc_level);
	ig_durable_wait(durable);

	/* one shared-memory add per outcome, not per key */
	for (int o = 0; o < IG_NUM_OUTCOMES; o++)
		idem_stats_add((IgStat) o, counts[o]);

	for (int i = 0; i < n; i++)
	{
		Datum		values[8];
		bool		nulls[8] = {false, false, false, false, false, false, false, false};

		values[0] = Int32GetDatum(group ? ords[i] : i + 1);
		values[1] = keys[i];
		ig_claim_values(rsinfo->setDesc, 2, &results[i], values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * idem_claim_many(keys, workflow, stale_interval, fingerprints,
 * execution_id): one row per element, in input order (ig_many).
 */
PG_FUNCTION_INFO_V1(idem_claim_many);

Datum
idem_claim_many(PG_FUNCTION_ARGS)
{
	ig_many(fcinfo, false);
	return (Datum) 0;
}

/*
 * idem_gate.claim_many_group(keys, workflow, stale_interval, fingerprints,
 * execution_id, anchor, ords, caller): the keys of one shard group of an
 * idem_claim_many on Citus, sent by citus_batch.c to the node holding
 * anchor's shard; ords are their positions in the caller's array.
 */
PG_FUNCTION_INFO_V1(idem_claim_many_group);

Datum
idem_claim_many_group(PG_FUNCTION_ARGS)
{
	ig_many(fcinfo, true);
	return (Datum) 0;
}

/*
 * Read the row an owner's call acts on, and check that the caller may act
 * on it: the claim exists, the token (if given) still owns it, and a NULL
 * token is allowed only where no token was handed out.  Returns false for
 * a completed row when completed_ok (a retried completion is harmless);
 * otherwise the row must be processing.
 */
static bool
ig_owner_read(IgCall *call, const char *verb, const char *fname,
			  bool has_token, int64 token, bool completed_ok, IgRow *row)
{
	ig_store_probe(call, row, true);
	if (!row->found)
		ig_error_no_claim(call, verb);
	if (has_token && row->token != token)
		ig_error_stale_token(call, token, row->state, row->attempt);
	if (!has_token && row->token_issued)
		ig_error_token_required(call, fname);
	if (row->state == IG_COMPLETED && completed_ok)
		return false;
	if (row->state != IG_PROCESSING)
		ig_error_state(call, verb, row->state);
	return true;
}

/*
 * An owner's transition out of processing (idem_complete, idem_fail) to
 * new_state, storing value in the receipt or error column.  A row changed
 * between the read and the write is read again.  Returns what the
 * synchronous standbys must confirm before a retried completion, which
 * answers from the row it read, may say true.
 */
static XLogRecPtr
ig_owner_finish(FunctionCallInfo fcinfo, IgCall *call, const char *verb,
				const char *fname, bool completed_ok, IgState new_state,
				IgRow *row)
{
	bool		has_token = !PG_ARGISNULL(2);
	int64		token = has_token ? PG_GETARG_INT64(2) : 0;
	Datum		value = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (!ig_owner_read(call, verb, fname, has_token, token, completed_ok, row))
			return ig_durable_lsn(call->workflow_str, call->key_str);
		if (ig_store_finish(call, row, new_state, value, PG_ARGISNULL(3)) == IG_WRITE_DONE)
			return InvalidXLogRecPtr;
	}
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
	int64		token = ig_required_token(fcinfo, 2);
	bool		owns;

	XLogRecPtr	durable = InvalidXLogRecPtr;

	ig_call_begin(fcinfo, &call, "idem_heartbeat()", true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_store_probe(&call, &row, false);
		if (!row.found)
			ig_error_no_claim(&call, "heartbeat");
		owns = (row.state == IG_PROCESSING && row.token == token);
		if (!owns)
		{
			durable = ig_durable_lsn(call.workflow_str, call.key_str);
			break;
		}
		if (ig_store_heartbeat(&call, &row) == IG_WRITE_DONE)
			break;
	}
	ig_call_end(&call);
	ig_durable_wait(durable);
	PG_RETURN_BOOL(owns);
}

/*
 * idem_complete(key, workflow, token, result): the side effect happened;
 * store its receipt.  Completing again with the same token is harmless,
 * so a retried completion call never fails a workflow.
 */
PG_FUNCTION_INFO_V1(idem_complete);

Datum
idem_complete(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;

	XLogRecPtr	durable;

	ig_call_begin(fcinfo, &call, "idem_complete()", true);
	durable = ig_owner_finish(fcinfo, &call, "complete", "idem_complete()", true,
							  IG_COMPLETED, &row);
	ig_call_end(&call);
	ig_durable_wait(durable);
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
	bool		retryable = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);

	ig_call_begin(fcinfo, &call, "idem_fail()", true);
	ig_owner_finish(fcinfo, &call, "fail", "idem_fail()", false,
					retryable ? IG_FAILED_RETRYABLE : IG_NEEDS_REVIEW, &row);
	/* the claim enters the inbox: announce it, once, with this transaction */
	if (!retryable)
		ig_alert_announce(call.workflow_str, "needs_review");
	else if (row.attempt >= idem_max_attempts)
		ig_alert_announce(call.workflow_str, "failing");
	ig_call_end(&call);
	idem_stats_count(retryable ? IG_STAT_FAILS_RETRYABLE : IG_STAT_FAILS_REVIEW);

	PG_RETURN_DATUM(ig_state_datum(ig_rettype(fcinfo, "state"), row.state));
}

/* The optional reason or actor of an operator's action (argument argno). */
static text *
ig_reason_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	return PG_GETARG_TEXT_PP(argno);
}

/*
 * idem_resolve(key, workflow, resolution, result [, reason]): an
 * operator's decision about a claim whose side effect may or may not have
 * happened, recorded in idem_gate.audit.
 */
PG_FUNCTION_INFO_V1(idem_resolve);

Datum
idem_resolve(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;
	char	   *resolution;
	bool		complete;
	IgState		before;

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

	ig_call_begin(fcinfo, &call, "idem_resolve()", true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_store_probe(&call, &row, false);
		if (!row.found)
			ig_error_no_claim(&call, "resolve");
		if (row.state != IG_PROCESSING && row.state != IG_NEEDS_REVIEW)
			ig_error_state(&call, "resolve", row.state);
		before = row.state;
		if (ig_store_resolve(&call, &row, complete,
							 PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3),
							 PG_ARGISNULL(3)) == IG_WRITE_DONE)
			break;
	}
	ig_audit_record(&call, "resolve", before, true, row.state, row.token,
					ig_reason_arg(fcinfo, 4), ig_reason_arg(fcinfo, 5));
	ig_call_end(&call);
	idem_stats_count(IG_STAT_RESOLVES);

	PG_RETURN_DATUM(ig_state_datum(ig_rettype(fcinfo, "state"), row.state));
}

/* idem_resolve of version 1.1, with its reason: the same function */
PG_FUNCTION_INFO_V1(idem_resolve_1_1);

Datum
idem_resolve_1_1(PG_FUNCTION_ARGS)
{
	return idem_resolve(fcinfo);
}

/*
 * idem_release(key, workflow, reason): an operator forgets a claim in any
 * state, so the next delivery is new; false when there was no claim.
 * Recorded in idem_gate.audit.
 */
PG_FUNCTION_INFO_V1(idem_release);

Datum
idem_release(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgRow		row;

	ig_call_begin(fcinfo, &call, "idem_release()", true);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_store_probe(&call, &row, false);
		if (!row.found || ig_store_release(&call, &row) == IG_WRITE_DONE)
			break;
	}
	if (row.found)
		ig_audit_record(&call, "release", row.state, false, row.state,
						row.token, ig_reason_arg(fcinfo, 2), ig_reason_arg(fcinfo, 3));
	ig_call_end(&call);
	if (row.found)
		idem_stats_count(IG_STAT_RELEASES);
	PG_RETURN_BOOL(row.found);
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
	HeapTuple	tuple;

	ig_call_begin(fcinfo, &call, "idem_status()", false);
	tuple = ig_store_status(&call);
	ig_call_end(&call);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (tuple != NULL)
		tuplestore_puttuple(rsinfo->setResult, tuple);
	return (Datum) 0;
}
