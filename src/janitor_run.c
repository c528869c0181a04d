/*-------------------------------------------------------------------------
 *
 * janitor_run.c
 *	  idem_gate.janitor_run(): one janitor pass from SQL, in the caller's
 *	  transaction, for a DBA's hand or a scheduler (janitor.c runs it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "call.h"
#include "janitor.h"
#include "shape.h"
#include "store.h"

/*
 * Guard a pass that runs in a caller's session (idem_gate.janitor_run())
 * against code attached to the tables it touches: the claims, the audit
 * trail and the watermarks it writes, the policies it reads.  Returns the
 * GUC nest level of the pinned search_path, or 0 when nothing is attached.
 */
static int
janitor_guard(void)
{
	static const IgTable written[] = {
		IG_TABLE_CLAIMS, IG_TABLE_AUDIT, IG_TABLE_WATERMARKS
	};
	bool		code = false;
	const char *policies;

	ig_store_refuse();
	for (int i = 0; i < lengthof(written); i++)
	{
		const char *what;

		ig_call_refuse_rules(written[i]);
		what = ig_call_attached_code(written[i], true);
		if (what != NULL)
		{
			ig_call_guard_user_code(NULL, written[i], what);
			code = true;
		}
	}
	policies = ig_call_attached_code(IG_TABLE_POLICIES, false);
	if (policies != NULL)
	{
		ig_call_guard_user_code(NULL, IG_TABLE_POLICIES, policies);
		code = true;
	}
	return code ? ig_call_pin_search_path() : 0;
}

/*
 * idem_gate.janitor_run(): one pass from SQL, in the caller's transaction,
 * acting as the function's owner like the API functions, and under the
 * same guard for code attached to the tables it touches.
 */
PG_FUNCTION_INFO_V1(idem_gate_janitor_run);

Datum
idem_gate_janitor_run(PG_FUNCTION_ARGS)
{
	IgJanitorCounts counts;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level;

	PreventCommandIfReadOnly("idem_gate.janitor_run()");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	guc_level = janitor_guard();
	ig_janitor_pass(&counts, false, save_userid);
	if (guc_level != 0)
		AtEOXact_GUC(true, guc_level);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	values[0] = Int64GetDatum(counts.deleted_completed + counts.deleted_failed);
	values[1] = Int64GetDatum(counts.deleted_completed);
	values[2] = Int64GetDatum(counts.deleted_failed);
	values[3] = Int64GetDatum(counts.alerts);
	values[4] = Int64GetDatum(counts.escalated);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
