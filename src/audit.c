/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  idem_gate.audit: one row per resolve, release and janitor escalation.
 *
 * Rows are written by the gate's functions in the caller's transaction, so
 * a decision and its record commit or roll back together.  A trigger
 * (idem_gate.audit_guard) refuses every change to the table except the
 * janitor's pruning of rows older than idem_gate.audit_retention, which
 * this file allows for the length of the janitor's statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/datum.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "audit.h"

/* %s: the actor (1.2), where the table has the column */
static const char *const audit_sql =
"INSERT INTO idem_gate.audit (at, session_role, acting_role, action,"
" workflow, key, state_before, state_after, token, reason%s)"
" VALUES ($1, $2, $3, $4, $5, $6, $7::pg_catalog.text::idem_gate.state,"
" $8::pg_catalog.text::idem_gate.state, $9, $10%s)";

static SPIPlanPtr audit_plan = NULL;
static Oid	audit_plan_relid = InvalidOid;
static bool audit_plan_actor = false;	/* the plan names the actor */

/* The janitor is pruning old rows: the guard lets its deletes through. */
static bool pruning = false;

/*
 * Allow or forbid the janitor's deletes; reset at the end of every
 * statement that allowed them (the janitor calls it around its batch).
 */
void
ig_audit_allow_pruning(bool allow)
{
	pruning = allow;
}

/*
 * Record an operator's action on the claim of call.  The acting role is
 * the caller's (the gate functions act as the extension's owner, but the
 * decision is the caller's); the session role is who logged in; the actor
 * (1.2) is the person who decided, as the calling application knows them.
 * A database still at 1.0 has no audit table and records nothing.
 */
void
ig_audit_record(IgCall *call, const char *action, IgState before,
				bool has_after, IgState after, int64 token, text *reason,
				text *actor)
{
	Oid			relid = get_relname_relid("audit",
										  get_namespace_oid("idem_gate", false));
	Oid			argtypes[11] = {TIMESTAMPTZOID, NAMEOID, NAMEOID, TEXTOID,
		TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID};
	Datum		values[11];
	char		nulls[11] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		has_actor;

	if (!OidIsValid(relid))
		return;
	has_actor = (get_attnum(relid, "actor") != InvalidAttrNumber);
	ig_call_guard_table(call, IG_TABLE_AUDIT, true);
	ig_call_spi(call);
	if (audit_plan == NULL || audit_plan_relid != relid ||
		audit_plan_actor != has_actor)
	{
		SPIPlanPtr	plan = SPI_prepare(psprintf(audit_sql,
												has_actor ? ", actor" : "",
												has_actor ? ", $11" : ""),
									   has_actor ? 11 : 10, argtypes);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "could not prepare the audit statement");
		if (audit_plan != NULL)
			SPI_freeplan(audit_plan);
		audit_plan = plan;
		audit_plan_relid = relid;
		audit_plan_actor = has_actor;
	}

	values[0] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[1] = DirectFunctionCall1(namein,
									CStringGetDatum(GetUserNameFromId(GetSessionUserId(), false)));
	values[2] = DirectFunctionCall1(namein,
									CStringGetDatum(GetUserNameFromId(call->save_userid, false)));
	values[3] = CStringGetTextDatum(action);
	values[4] = call->workflow;
	values[5] = call->key;
	values[6] = CStringGetTextDatum(ig_state_names[before]);
	values[7] = has_after ? CStringGetTextDatum(ig_state_names[after]) : (Datum) 0;
	nulls[7] = has_after ? ' ' : 'n';
	values[8] = Int64GetDatum(token);
	values[9] = reason ? PointerGetDatum(reason) : (Datum) 0;
	nulls[9] = reason ? ' ' : 'n';
	values[10] = actor ? PointerGetDatum(actor) : (Datum) 0;
	nulls[10] = actor ? ' ' : 'n';

	if (SPI_execute_plan(audit_plan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the audit row");
}

/*
 * Who last acted on the claim of call, for the answer to an operator who
 * comes second ("already decided"): the newest operator row of the audit
 * trail (resolve, release, replay; the janitor's escalations decide
 * nothing), as a sentence naming the action, the person and the time.
 * changed_at, when not 0, is the claim's last change: a later change than
 * the action is said as well, and without an operator's row the sentence
 * says only that time (NULL when there is neither).  Only who, what and
 * when: never the token, the reason or anything else stored.
 */
char *
ig_audit_last_decision(IgCall *call, TimestampTz changed_at)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	Datum		row[7];
	bool		nulls[7];
	StringInfoData buf;
	TimestampTz at;

	if (!OidIsValid(get_relname_relid("audit",
									  get_namespace_oid("idem_gate", false))))
		return NULL;
	ig_call_guard_table(call, IG_TABLE_AUDIT, false);
	values[0] = call->workflow;
	values[1] = call->keyed == NULL ?
		PointerGetDatum(construct_array(&call->key, 1, TEXTOID, -1, false, TYPALIGN_INT)) :
		PointerGetDatum(construct_array(call->keyed->form, call->keyed->n, TEXTOID,
										-1, false, TYPALIGN_INT));
	ig_call_spi(call);
	if (SPI_execute_with_args("SELECT a.at, a.action, a.actor, a.session_role::pg_catalog.text,"
							  " a.acting_role::pg_catalog.text,"
							  " a.state_before::pg_catalog.text, a.state_after::pg_catalog.text"
							  " FROM ONLY idem_gate.audit a"
							  " WHERE a.workflow OPERATOR(pg_catalog.=) $1"
							  " AND a.key OPERATOR(pg_catalog.=) ANY ($2)"
							  " AND a.action OPERATOR(pg_catalog.<>) 'escalate'"
							  " ORDER BY a.id DESC LIMIT 1",
							  2, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read idem_gate.audit");
	if (SPI_processed == 0)
		return changed_at == 0 ? NULL :
			psprintf("No operator has acted on it; it last changed at %s.",
					 timestamptz_to_str(changed_at));
	heap_deform_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, row, nulls);
	at = DatumGetTimestampTz(row[0]);

	initStringInfo(&buf);
	appendStringInfo(&buf, "The last operator action on it was %s",
					 TextDatumGetCString(row[1]));
	if (!nulls[5] && !nulls[6])
		appendStringInfo(&buf, " (%s to %s)", TextDatumGetCString(row[5]),
						 TextDatumGetCString(row[6]));
	appendStringInfoString(&buf, " by ");
	if (!nulls[2])
		appendStringInfo(&buf, "%s (role %s)",
						 ig_display(TextDatumGetCString(row[2])),
						 TextDatumGetCString(row[3]));
	else
		appendStringInfo(&buf, "role %s", TextDatumGetCString(row[3]));
	if (strcmp(TextDatumGetCString(row[3]), TextDatumGetCString(row[4])) != 0)
		appendStringInfo(&buf, " as %s", TextDatumGetCString(row[4]));
	appendStringInfo(&buf, " at %s.", timestamptz_to_str(at));
	if (changed_at != 0 && changed_at > at)
		appendStringInfo(&buf, " The claim changed since, at %s.",
						 timestamptz_to_str(changed_at));
	return buf.data;
}

/*
 * idem_gate.audit_guard(): the trigger that keeps the audit trail as it
 * was written.  Only the janitor's pruning may delete rows.
 */
PG_FUNCTION_INFO_V1(idem_gate_audit_guard);

Datum
idem_gate_audit_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_gate.audit_guard() must be called as a trigger")));
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) && pruning)
		return PointerGetDatum(trigdata->tg_trigtuple);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("idem_gate.audit cannot be changed"),
			 errdetail("The audit trail keeps every operator's decision as it was recorded; the janitor removes rows older than idem_gate.audit_retention."),
			 errhint("Shorten idem_gate.audit_retention to keep less history.")));
	PG_RETURN_NULL();
}
