/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The claim state machine, and its single-key entry points idem_claim
 *	  and idem_claim_ex.
 *
 * Each claim reads the row of its key (store.c), then either answers from
 * it or attempts the one write that the row's state allows; a write that
 * finds the row changed since it was read starts over.  Expected
 * situations never raise an error (an n8n Postgres node sends all items as
 * one statement, and one error fails them all); only bad input does.
 * idem_claim_many runs the same machine per key (claim_many.c); what the
 * owner and operators do next is in claim_owner.c and claim_operator.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "durable.h"
#include "stats.h"

/* idem_gate.max_payload_bytes */
static int	max_payload_bytes = 1024 * 1024;

/* idem_gate.max_attempts */
int			ig_claim_max_attempts = 5;

/*
 * Define the claim layer's limits: idem_gate.max_payload_bytes for a
 * delivery's payload, idem_gate.max_attempts for when a claim that keeps
 * failing needs a person.
 */
void
ig_claim_init(void)
{
	DefineCustomIntVariable("idem_gate.max_payload_bytes",
							"Largest delivery payload a claim keeps as evidence.",
							"A larger payload is not kept; the claim proceeds and its payload_dropped_bytes says the size. 0 keeps none.",
							&max_payload_bytes,
							1024 * 1024,
							0,
							256 * 1024 * 1024,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.max_attempts",
							"Attempts after which a claim that keeps failing before its side effect is shown in idem_gate.inbox.",
							"A failed_retryable claim at this attempt or later is announced once on idem_gate_alert and listed as failing.",
							&ig_claim_max_attempts,
							5,
							1,
							1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/*
 * An optional text argument that, when given, must not be empty: an empty
 * execution id would make two runs one, an empty fingerprint would match
 * any payload hashed to nothing.
 */
static const char *
optional_text(FunctionCallInfo fcinfo, int argno, const char *what,
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
void
ig_claim_payload(Datum d, const char *what, IgGrant *grant)
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
	grant->payload_dropped = (bytes > (Size) max_payload_bytes) ?
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
void
ig_claim_args(FunctionCallInfo fcinfo, int stale_arg, int fp_arg,
			  int exec_arg, int payload_arg, bool token_issued, IgClaimArgs *a)
{
	memset(a, 0, sizeof(*a));
	if (!PG_ARGISNULL(stale_arg))
	{
		int64		usecs = ig_call_duration_arg(fcinfo, stale_arg, "stale_interval");

		a->has_stale = true;
		a->cutoff = GetCurrentTransactionStartTimestamp() - usecs;
	}
	if (fp_arg >= 0)
		a->fingerprint_str = optional_text(fcinfo, fp_arg, "fingerprint",
										   &a->grant.fingerprint,
										   &a->grant.has_fp);
	if (exec_arg >= 0)
		a->execution_str = optional_text(fcinfo, exec_arg, "execution_id",
										 &a->grant.execution_id,
										 &a->grant.has_exec);
	if (payload_arg >= 0 && PG_NARGS() > payload_arg && !PG_ARGISNULL(payload_arg))
		ig_claim_payload(PG_GETARG_DATUM(payload_arg), "payload", &a->grant);
	a->grant.token_issued = token_issued;
}

/*
 * The error for a key reused for another payload.  It shows the caller's
 * fingerprint, never the stored one.
 */
void
ig_claim_error_fingerprint(IgCall *call, const char *given)
{
	ig_stats_count(IG_STAT_MISMATCHES);
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
			 errmsg("fingerprint mismatch for key \"%s\" in workflow \"%s\"",
					ig_display(call->key_str),
					ig_display(call->workflow_str)),
			 errdetail("The key was first claimed with another fingerprint; this call gives \"%s\".",
					   ig_display(given)),
			 errhint("The same key was reused for a different payload: check the sender's event ids, or derive the key from the payload with idem_hash().")));
}

/*
 * The key's row exists (the first claim's insert met it) but row level
 * security keeps the owner of the gate's functions from reading it: the
 * gate can neither answer from it nor write around it.
 */
static void
error_hidden(IgCall *call)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("row level security of idem_gate.claims hides the claim of key \"%s\" in workflow \"%s\" from the owner of idem_gate's functions",
					ig_display(call->key_str), ig_display(call->workflow_str)),
			 errdetail("The key is claimed already, but a policy on idem_gate.claims keeps role \"%s\" from reading its row.",
					   GetUserNameFromId(GetUserId(), false)),
			 errhint("Let the policies of idem_gate.claims show the owner of the gate's functions every workflow it serves.")));
}

/*
 * Read the row of the call's key: in a keyed workflow under each listed
 * secret, newest first, leaving the call's key at the form found (or at
 * the current one when none is).
 */
void
ig_claim_probe(IgStore *st, IgRow *row, bool keep_tuple)
{
	IgCall	   *call = st->call;
	IgKeyForms *f = call->keyed;

	if (f == NULL)
	{
		ig_store_probe(st, row, keep_tuple);
		return;
	}
	for (int i = 0; i < f->n; i++)
	{
		call->key = f->form[i];
		call->key_str = f->form_str[i];
		ig_store_probe(st, row, keep_tuple);
		if (row->found)
			return;
	}
	call->key = f->form[0];
	call->key_str = f->form_str[0];
}

/*
 * After the first claim of a keyed workflow's key inserted its row: two
 * backends whose lists of secrets differed for a moment (a reload that
 * rotated them) could each have inserted one, under its own current
 * secret.  Look for the key under every other secret listed now, waiting
 * for a claim still in progress there; if one exists, this claim yields
 * with a serialization failure, which rolls its row back.  Under
 * REPEATABLE READ and SERIALIZABLE this also finds a row committed since
 * the snapshot, as the primary key would under the current secret.  With
 * one secret and no rotation there is nothing to look for.
 */
static void
keyed_after_insert(IgStore *st)
{
	IgCall	   *call = st->call;
	IgKeyForms *f = call->keyed;
	Datum		mine = call->key;
	const char *mine_str = call->key_str;

	(void) ig_keyed_refresh(f);
	for (int i = 0; i < f->n; i++)
	{
		if (strcmp(f->form_str[i], mine_str) == 0)
			continue;
		call->key = f->form[i];
		call->key_str = f->form_str[i];
		if (ig_store_claimed_elsewhere(st))
			ig_call_error_serialization(call, "update");
	}
	call->key = mine;
	call->key_str = mine_str;
}

/*
 * One claim of the store's call's key: the state machine of idem_claim, idem_claim_ex
 * and each element of idem_claim_many.
 */
void
ig_claim_key(IgStore *st, const IgClaimArgs *a, IgClaimResult *res)
{
	IgCall	   *call = st->call;
	IgRow	   *row = &res->row;
	bool		raced = false;	/* a first insert met a concurrent claim */

	res->granted = false;
	res->wrote = false;
	res->durable = InvalidXLogRecPtr;
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();

		ig_claim_probe(st, row, false);

		if (!row->found && raced && ig_shape_rls_applies(IG_TABLE_CLAIMS))
			error_hidden(call);
		if (!row->found)
		{
			/* first claim: exactly one concurrent inserter wins */
			if (ig_store_insert(st, &a->grant, raced, row) == IG_WRITE_RETRY)
			{
				raced = true;
				continue;
			}
			if (call->keyed != NULL)
				keyed_after_insert(st);
			res->outcome = IG_OUTCOME_NEW;
			res->granted = true;
			res->wrote = true;
			return;
		}

		if (a->grant.has_fp && row->fingerprint != NULL &&
			strcmp(row->fingerprint, a->fingerprint_str) != 0)
			ig_claim_error_fingerprint(call, a->fingerprint_str);

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
				if (ig_store_regrant(st, &a->grant, row, false, 0) == IG_WRITE_RETRY)
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
			if (ig_store_regrant(st, &a->grant, row, true, a->cutoff) == IG_WRITE_RETRY)
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
	IgStore		st;
	IgClaimArgs a;
	IgClaimResult res;

	ig_call_begin(fcinfo, &call, "idem_claim()", true);
	ig_store_begin(&st, &call);
	ig_claim_args(fcinfo, 2, -1, -1, -1, false, &a);
	ig_claim_key(&st, &a, &res);
	ig_store_close(&st);
	ig_call_end(&call);
	ig_durable_wait(res.durable);
	ig_stats_count_outcome(res.outcome);

	PG_RETURN_DATUM(ig_outcome_datum(ig_rettype(fcinfo, "outcome"), res.outcome));
}

/*
 * The result row of idem_claim_ex and idem_claim_many.  The token is
 * returned only to the run that owns the claim, so a duplicate delivery
 * cannot complete someone else's; the stored receipt only with completed.
 */
void
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
	IgStore		st;
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
	ig_store_begin(&st, &call);
	ig_claim_args(fcinfo, 2, 3, 4, 5, true, &a);
	ig_claim_key(&st, &a, &res);
	ig_store_close(&st);
	ig_call_end(&call);
	ig_durable_wait(res.durable);
	ig_stats_count_outcome(res.outcome);

	ig_claim_values(tupdesc, 0, &res, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

