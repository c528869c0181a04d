/*-------------------------------------------------------------------------
 *
 * claim_owner.c
 *	  What the run that owns a claim does next: idem_heartbeat while its
 *	  side effect takes long, then idem_complete with the receipt or
 *	  idem_fail.
 *
 * Each checks that the caller's token still owns the claim (a run that
 * lost its claim to a takeover must not record an outcome), then writes
 * the one transition; a row changed between the read and the write is
 * read again.  A failure that puts a claim in front of a person is
 * announced on idem_gate_alert (alert.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlogdefs.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "alert.h"
#include "claim.h"
#include "durable.h"
#include "stats.h"

/*
 * Read the row an owner's call acts on, and check that the caller may act
 * on it: the claim exists, the token (if given) still owns it, and a NULL
 * token is allowed only where no token was handed out.  Returns false for
 * a completed row when completed_ok (a retried completion is harmless);
 * otherwise the row must be processing.
 */
static bool
owner_read(IgStore *st, const char *verb, const char *fname,
		   bool has_token, int64 token, bool completed_ok, IgRow *row)
{
	IgCall	   *call = st->call;

	ig_claim_probe(st, row, true);
	if (!row->found)
		ig_call_error_no_claim(call, verb, NULL);
	if (has_token && row->token != token)
		ig_call_error_stale_token(call, token, row->state, row->attempt);
	if (!has_token && row->token_issued)
		ig_call_error_token_required(call, fname);
	if (row->state == IG_COMPLETED && completed_ok)
		return false;
	if (row->state != IG_PROCESSING)
		ig_call_error_state(call, verb, row->state, NULL);
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
owner_finish(FunctionCallInfo fcinfo, IgStore *st, const char *verb,
			 const char *fname, bool completed_ok, IgState new_state,
			 IgRow *row)
{
	bool		has_token = !PG_ARGISNULL(2);
	int64		token = has_token ? PG_GETARG_INT64(2) : 0;
	Datum		value = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	IgCall	   *call = st->call;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (!owner_read(st, verb, fname, has_token, token, completed_ok, row))
			return ig_durable_lsn(call->workflow_str, call->key_str);
		if (ig_store_finish(st, row, new_state, value, PG_ARGISNULL(3)) == IG_WRITE_DONE)
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
	IgStore		st;
	IgRow		row;
	int64		token = ig_call_token_arg(fcinfo, 2);
	bool		owns;

	XLogRecPtr	durable = InvalidXLogRecPtr;

	ig_call_begin(fcinfo, &call, "idem_heartbeat()", true);
	ig_store_begin(&st, &call);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ig_claim_probe(&st, &row, false);
		if (!row.found)
			ig_call_error_no_claim(&call, "heartbeat", NULL);
		owns = (row.state == IG_PROCESSING && row.token == token);
		if (!owns)
		{
			durable = ig_durable_lsn(call.workflow_str, call.key_str);
			break;
		}
		if (ig_store_heartbeat(&st, &row) == IG_WRITE_DONE)
			break;
	}
	ig_store_close(&st);
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
	IgStore		st;
	IgRow		row;

	XLogRecPtr	durable;

	ig_call_begin(fcinfo, &call, "idem_complete()", true);
	ig_store_begin(&st, &call);
	durable = owner_finish(fcinfo, &st, "complete", "idem_complete()", true,
						   IG_COMPLETED, &row);
	ig_store_close(&st);
	ig_call_end(&call);
	ig_durable_wait(durable);
	ig_stats_count(IG_STAT_COMPLETIONS);
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
	IgStore		st;
	IgRow		row;
	bool		retryable = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);

	ig_call_begin(fcinfo, &call, "idem_fail()", true);
	ig_store_begin(&st, &call);
	owner_finish(fcinfo, &st, "fail", "idem_fail()", false,
				 retryable ? IG_FAILED_RETRYABLE : IG_NEEDS_REVIEW, &row);
	/*
	 * the claim enters the inbox: announce it, once, with this transaction.
	 * A failing claim is announced at the max_attempts-th failure only: the
	 * failures after it are the same reason, which the digest reports, so a
	 * sender that retries for days does not flood the chat.
	 */
	if (!retryable)
		(void) ig_alert_announce(call.workflow_str, "needs_review",
								 GetCurrentTimestamp());
	else if (row.attempt == ig_claim_max_attempts)
		(void) ig_alert_announce(call.workflow_str, "failing",
								 GetCurrentTimestamp());
	ig_store_close(&st);
	ig_call_end(&call);
	ig_stats_count(retryable ? IG_STAT_FAILS_RETRYABLE : IG_STAT_FAILS_REVIEW);

	PG_RETURN_DATUM(ig_state_datum(ig_rettype(fcinfo, "state"), row.state));
}

