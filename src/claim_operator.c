/*-------------------------------------------------------------------------
 *
 * claim_operator.c
 *	  What an operator does with a claim the gate cannot decide:
 *	  idem_resolve, idem_release and idem_replay, which name the person and
 *	  are recorded in idem_gate.audit, and the reads idem_status and
 *	  idem_gate.history.
 *
 * An operator acts on any claim, without its token: the decision is a
 * person's, and the audit trail keeps who made it (the session and acting
 * roles, and the actor the calling application names) and why.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/typcache.h"

#include "audit.h"
#include "claim.h"
#include "stats.h"

/* The optional reason or actor of an operator's action (argument argno). */
static text *
reason_arg(FunctionCallInfo fcinfo, int argno)
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
	IgStore		st;
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
				 errmsg("unknown resolution \"%s\"", ig_display(resolution)),
				 errhint("Use 'completed' if the side effect happened, 'retry' if it did not.")));
	if (!complete && !PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resolution \"retry\" takes no result"),
				 errhint("A receipt is stored only with resolution 'completed'.")));

	ig_call_begin(fcinfo, &call, "idem_resolve()", true);
	ig_store_begin(&st, &call);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_claim_probe(&st, &row, false);
		if (!row.found)
			ig_call_error_no_claim(&call, "resolve",
								   ig_audit_last_decision(&call, 0));
		if (row.state != IG_PROCESSING && row.state != IG_NEEDS_REVIEW)
			ig_call_error_state(&call, "resolve", row.state,
								ig_audit_last_decision(&call, row.updated_at));
		before = row.state;
		if (ig_store_resolve(&st, &row, complete,
							 PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3),
							 PG_ARGISNULL(3)) == IG_WRITE_DONE)
			break;
	}
	ig_audit_record(&call, "resolve", before, true, row.state, row.token,
					reason_arg(fcinfo, 4), reason_arg(fcinfo, 5));
	ig_store_close(&st);
	ig_call_end(&call);
	ig_stats_count(IG_STAT_RESOLVES);

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
	IgStore		st;
	IgRow		row;

	ig_call_begin(fcinfo, &call, "idem_release()", true);
	ig_store_begin(&st, &call);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_claim_probe(&st, &row, false);
		if (!row.found || ig_store_release(&st, &row) == IG_WRITE_DONE)
			break;
	}
	if (row.found)
		ig_audit_record(&call, "release", row.state, false, row.state,
						row.token, reason_arg(fcinfo, 2), reason_arg(fcinfo, 3));
	ig_store_close(&st);
	ig_call_end(&call);
	if (row.found)
		ig_stats_count(IG_STAT_RELEASES);
	PG_RETURN_BOOL(row.found);
}

/*
 * idem_replay(key, workflow [, reason [, actor]]): an operator sends a
 * failed_retryable claim's stored payload to the gate again, as a
 * redelivery, because its sender cannot.  The gate changes nothing here:
 * the redelivery claims the key as any delivery would.  This records the
 * decision in idem_gate.audit (the state before and after are the same)
 * and answers the payload to send, so that the replay has a record of
 * its own and a claim that cannot be replayed is refused before anything
 * is sent: no claim (P0002), another state or no payload kept (55000).
 * Per-workflow access is checked as for idem_resolve().
 */
PG_FUNCTION_INFO_V1(idem_replay);

Datum
idem_replay(PG_FUNCTION_ARGS)
{
	IgCall		call;
	IgStore		st;
	IgRow		row;
	HeapTuple	tuple;
	TupleDesc	desc;
	Datum		payload = (Datum) 0;
	bool		isnull = true;
	MemoryContext old;

	ig_call_begin(fcinfo, &call, "idem_replay()", true);
	ig_store_begin(&st, &call);
	ig_claim_probe(&st, &row, false);
	if (!row.found)
		ig_call_error_no_claim(&call, "replay", ig_audit_last_decision(&call, 0));
	if (row.state != IG_FAILED_RETRYABLE)
		ig_call_error_state(&call, "replay", row.state,
							ig_audit_last_decision(&call, row.updated_at));
	tuple = ig_store_status(&st);
	if (tuple != NULL)
	{
		desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(tuple->t_data),
									  HeapTupleHeaderGetTypMod(tuple->t_data));
		for (int i = 0; i < desc->natts; i++)
			if (strcmp(NameStr(TupleDescAttr(desc, i)->attname), "payload") == 0)
				payload = heap_getattr(tuple, i + 1, desc, &isnull);
		ReleaseTupleDesc(desc);
	}
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot replay key \"%s\" in workflow \"%s\": no payload is kept",
						ig_display(call.key_str), ig_display(call.workflow_str)),
				 errdetail("Only a claim whose delivery's payload was kept can be replayed: the gate keeps it when the delivery passes it and it fits in idem_gate.max_payload_bytes."),
				 errhint("Ask the sender to deliver the event again.")));
	old = MemoryContextSwitchTo(call.callcxt);
	payload = PointerGetDatum(PG_DETOAST_DATUM_COPY(payload));
	MemoryContextSwitchTo(old);
	ig_audit_record(&call, "replay", row.state, true, row.state, row.token,
					reason_arg(fcinfo, 2), reason_arg(fcinfo, 3));
	ig_store_close(&st);
	ig_call_end(&call);
	PG_RETURN_DATUM(payload);
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
	IgStore		st;
	HeapTuple	tuple;

	ig_call_begin(fcinfo, &call, "idem_status()", false);
	ig_store_begin(&st, &call);
	tuple = ig_store_status(&st);
	/* a keyed workflow's claim may be under an older secret */
	for (int i = 1; tuple == NULL && call.keyed != NULL && i < call.keyed->n; i++)
	{
		call.key = call.keyed->form[i];
		call.key_str = call.keyed->form_str[i];
		tuple = ig_store_status(&st);
	}
	ig_store_close(&st);
	ig_call_end(&call);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (tuple != NULL)
		tuplestore_puttuple(rsinfo->setResult, tuple);
	return (Datum) 0;
}

/*
 * idem_gate.history(key, workflow): the audit rows of a claim, oldest
 * first, for a reviewer (a released claim's too: its row is gone, its
 * history is not).  Checked like every call of the gate: the key and
 * workflow, and the caller's workflow grants; read as the owner, guarded
 * against code attached to the audit trail.  No tokens: a person needs
 * none.  An unknown key has no rows.  A keyed workflow's rows are found
 * under every listed secret.
 */
PG_FUNCTION_INFO_V1(idem_gate_history);

Datum
idem_gate_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	IgCall		call;
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	MemoryContext old;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ig_call_begin(fcinfo, &call, "idem_gate.history()", false);
	ig_call_guard_table(&call, IG_TABLE_AUDIT, false);
	values[0] = call.workflow;
	values[1] = call.keyed == NULL ?
		PointerGetDatum(construct_array(&call.key, 1, TEXTOID, -1, false, TYPALIGN_INT)) :
		PointerGetDatum(construct_array(call.keyed->form, call.keyed->n, TEXTOID,
										-1, false, TYPALIGN_INT));
	ig_call_spi(&call);
	if (SPI_execute_with_args("SELECT a.at, a.action, a.actor, a.session_role, a.acting_role,"
							  " a.state_before, a.state_after, a.reason"
							  " FROM ONLY idem_gate.audit a"
							  " WHERE a.workflow OPERATOR(pg_catalog.=) $1"
							  " AND a.key OPERATOR(pg_catalog.=) ANY ($2) ORDER BY a.id",
							  2, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read idem_gate.audit");
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[8];
		bool		nulls[8];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
		for (int c = 0; c < 8; c++)
			if (!nulls[c])
				row[c] = datumCopy(row[c], TupleDescAttr(SPI_tuptable->tupdesc, c)->attbyval,
								   TupleDescAttr(SPI_tuptable->tupdesc, c)->attlen);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	MemoryContextSwitchTo(old);
	ig_call_end(&call);
	return (Datum) 0;
}
