/*-------------------------------------------------------------------------
 *
 * keyed_sql.c
 *	  The SQL functions of keyed keys: idem_key(), which gives an operator
 *	  the stored form of a personal value, idem_key_forms(), its form in
 *	  every keyed workflow, idem_gate.secret_ids(), which
 *	  lists the secrets' ids (never a secret), and the trigger that tells
 *	  every backend that idem_gate.policies changed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/tuplestore.h"

#include "acl.h"
#include "call.h"
#include "keyed.h"
#include "keyed_workflows.h"

/*
 * idem_key(workflow, key): the form the gate stores the key in, so that
 * an operator can find a claim from the personal value: under the current
 * secret for a keyed workflow, the key itself for a plain one.  Checked as
 * a call of the gate: the key and workflow, and the caller's workflow
 * grants.  The key never appears in an error.
 */
PG_FUNCTION_INFO_V1(idem_key);

Datum
idem_key(PG_FUNCTION_ARGS)
{
	Datum		workflow;
	Datum		key;
	const char *workflow_str;
	bool		keyed;
	Oid			save_userid;
	int			save_sec_context;

	workflow_str = ig_call_text_arg(fcinfo, 0, "workflow", &workflow, false);
	keyed = ig_keyed_workflows_has(workflow_str);
	(void) ig_call_text_arg(fcinfo, 1, "key", &key, keyed);

	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	ig_acl_check(save_userid, GetUserId(), workflow_str);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	if (!keyed)
		PG_RETURN_DATUM(key);
	PG_RETURN_DATUM(ig_keyed_forms(workflow_str, DatumGetTextPP(key))->form[0]);
}

/*
 * idem_key_forms(key): the key's stored form in each keyed workflow the
 * caller may see, as idem_key() gives it.  A search over every workflow
 * (the inbox page's) finds a keyed claim from the personal value with it,
 * without reading the inbox for the workflows it holds.  A workflow the
 * caller may not see is left out, not refused; a plain workflow's form is
 * the key itself, which the caller has.
 */
PG_FUNCTION_INFO_V1(idem_key_forms);

Datum
idem_key_forms(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		key;
	List	   *visible = NIL;
	ListCell   *lc;
	Oid			save_userid;
	int			save_sec_context;

	(void) ig_call_text_arg(fcinfo, 0, "key", &key, true);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	foreach(lc, ig_keyed_workflows_list())
		if (ig_acl_visible(save_userid, (const char *) lfirst(lc)))
			visible = lappend(visible, pstrdup((const char *) lfirst(lc)));
	SetUserIdAndSecContext(save_userid, save_sec_context);

	foreach(lc, visible)
	{
		const char *workflow = (const char *) lfirst(lc);
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = CStringGetTextDatum(workflow);
		values[1] = ig_keyed_forms(workflow, DatumGetTextPP(key))->form[0];
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * idem_gate.secret_ids(): the ids of the secrets in force, the current
 * one first (position 1), for the view idem_gate.secrets.
 */
PG_FUNCTION_INFO_V1(idem_gate_secret_ids);

Datum
idem_gate_secret_ids(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char		ids[IG_KEYED_MAX_SECRETS][IG_KEYED_MAX_ID + 1];
	int			n = ig_keyed_secret_ids(ids);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = CStringGetTextDatum(ids[i]);
		values[1] = Int32GetDatum(i + 1);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * idem_gate.policies_changed(): the trigger that makes every backend read
 * again which workflows are keyed after idem_gate.policies changes.
 */
PG_FUNCTION_INFO_V1(idem_gate_policies_changed);

Datum
idem_gate_policies_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_gate.policies_changed() must be called as a trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
