/*-------------------------------------------------------------------------
 *
 * claim_many.c
 *	  idem_claim_many: many keys of one workflow in one call, one row per
 *	  key in input order, each claimed as idem_claim_ex would claim it.
 *
 * An n8n Postgres node sends all its items as one statement; claiming them
 * in one call costs one round trip and one frame instead of one per item.
 * Keys are claimed in sorted order, so two calls sharing keys wait for
 * each other in one order and never deadlock.  On Citus, outside a
 * transaction block, each shard group goes in one round trip to the node
 * holding it (citus_batch.c), which claims its keys here again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"

#include "citus_batch.h"
#include "claim.h"
#include "durable.h"
#include "stats.h"

/* An element of idem_claim_many, in the order it is claimed. */
typedef struct Elem
{
	int			idx;			/* 0-based index in this call's arrays */
	int			ord;			/* 1-based position in the caller's array */
	Datum		key;
	const char *key_str;		/* for messages: the stored form if keyed */
	const char *sort_str;		/* the caller's key, for the order */
	IgKeyForms *forms;			/* its stored forms, in a keyed workflow */
	Datum		fingerprint;
	bool		has_fp;
	IgGrant		payload;		/* its payload fields only */
	bool		repeat;			/* the key occurred earlier in the input */
} Elem;

/* Claim order: by key, then by position, so repeats follow their first. */
static int
elem_cmp(const void *a, const void *b)
{
	const Elem *x = a;
	const Elem *y = b;
	int			c = strcmp(x->sort_str, y->sort_str);

	if (c != 0)
		return c;
	return (x->ord > y->ord) - (x->ord < y->ord);
}

/* Name the element of idem_claim_many an error is about. */
static void
elem_context(void *arg)
{
	errcontext("element %d of keys", *(int *) arg);
}

/* The text elements of an array argument; NULL elements are 22004. */
static int
text_elements(FunctionCallInfo fcinfo, int argno, const char *what,
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
claim_many(FunctionCallInfo fcinfo, bool group)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	IgCall		call;
	IgStore		st;
	IgClaimArgs a;
	Datum	   *keys;
	Datum	   *fps = NULL;
	int		   *ords = NULL;
	int			guc_level = 0;
	int			n;
	Elem	   *elems;
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
	n = text_elements(fcinfo, 0, "keys", &keys);
	if (!PG_ARGISNULL(3) &&
		text_elements(fcinfo, 3, "fingerprints", &fps) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fingerprints must have as many elements as keys"),
				 errdetail("keys has %d elements, fingerprints %d.", n,
						   ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(3)),
										  ARR_DIMS(PG_GETARG_ARRAYTYPE_P(3)))),
				 errhint("Pass one fingerprint per key, or NULL for none.")));
	if (group)
		ords = ig_citus_batch_ords(fcinfo, 6, n);
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
	ig_store_begin(&st, &call);
	if (group)
		guc_level = ig_citus_batch_group_begin(fcinfo, 7, call.workflow_str);
	if (n == 0)
	{
		ig_store_close(&st);
		ig_call_end(&call);
		if (group)
			AtEOXact_GUC(true, guc_level);
		return;
	}

	elems = palloc0(sizeof(Elem) * n);
	results = palloc0(sizeof(IgClaimResult) * n);
	for (int i = 0; i < n; i++)
	{
		elems[i].idx = i;
		elems[i].ord = group ? ords[i] : i + 1;
		elems[i].key_str = ig_call_key_element(&call, keys[i], elems[i].ord,
											   &elems[i].key, &elems[i].forms);
		elems[i].sort_str = elems[i].forms == NULL ? elems[i].key_str :
			TextDatumGetCString(keys[i]);
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
			ig_claim_payload(payloads[i], psprintf("payloads[%d]", elems[i].ord),
							 &elems[i].payload);
	}

	/*
	 * On Citus, outside a transaction block, each shard group goes in one
	 * round trip to the node holding it (citus_batch.c); a keyed workflow's
	 * keys are claimed one by one, each where its stored form lives.
	 */
	if (!group && payloads == NULL && !call.workflow_keyed &&
		ig_citus_batch_applies())
	{
		ig_citus_batch_claim(fcinfo, keys, fps, n, call.save_userid);
		ig_store_close(&st);
		ig_call_end(&call);
		return;
	}
	qsort(elems, n, sizeof(Elem), elem_cmp);

	errcb.callback = elem_context;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	for (int i = 0; i < n; i++)
	{
		Elem	   *e = &elems[i];
		IgClaimResult *res = &results[e->idx];

		errcb.arg = &e->ord;
		call.key = e->key;
		call.key_str = e->key_str;
		call.keyed = e->forms;
		a.grant.fingerprint = e->fingerprint;
		a.grant.has_fp = e->has_fp;
		a.grant.has_payload = e->payload.has_payload;
		a.grant.payload = e->payload.payload;
		a.grant.payload_dropped = e->payload.payload_dropped;
		a.fingerprint_str = e->has_fp ? TextDatumGetCString(e->fingerprint) : NULL;
		e->repeat = (i > 0 && strcmp(elems[i - 1].sort_str, e->sort_str) == 0);
		if (e->repeat)
		{
			/*
			 * Only the first occurrence can own the key; a later one is
			 * in_flight, and its fingerprint is checked against the one the
			 * key now has, as idem_claim_ex would.
			 */
			if (a.grant.has_fp && stored_fp != NULL &&
				strcmp(stored_fp, a.fingerprint_str) != 0)
				ig_claim_error_fingerprint(&call, a.fingerprint_str);
			*res = results[elems[i - 1].idx];
			res->outcome = IG_OUTCOME_IN_FLIGHT;
			res->granted = false;
		}
		else
		{
			ig_claim_key(&st, &a, res);
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
	ig_store_close(&st);
	ig_call_end(&call);
	if (group)
		AtEOXact_GUC(true, guc_level);
	ig_durable_wait(durable);

	/* one shared-memory add per outcome, not per key */
	for (int o = 0; o < IG_NUM_OUTCOMES; o++)
		ig_stats_add((IgStat) o, counts[o]);

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
 * execution_id): one row per element, in input order (claim_many).
 */
PG_FUNCTION_INFO_V1(idem_claim_many);

Datum
idem_claim_many(PG_FUNCTION_ARGS)
{
	claim_many(fcinfo, false);
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
	claim_many(fcinfo, true);
	return (Datum) 0;
}

