/*-------------------------------------------------------------------------
 *
 * acl_sql.c
 *	  The SQL functions of per-workflow access: idem_gate.workflow_visible(),
 *	  which the row security policies and the views filter by, and
 *	  idem_gate.grant_workflow() and idem_gate.revoke_workflow(), which
 *	  change the grants acting as the owner of the function called.
 *
 * The decision itself, and its cache, are in acl.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "acl.h"
#include "call.h"

/*
 * idem_gate.workflow_visible(workflow): may the current role see the
 * workflow's claims and audit rows?  Always, where per-workflow access
 * does not apply to the role; otherwise as for calling the gate's
 * functions.  The row security policies of idem_gate.claims and
 * idem_gate.audit, and the views (security barriers, so that no
 * expression of the reader sees a row first), filter by it; NULL is not
 * visible.  The gate's own reads inside a call run as the owner of the
 * function called, which is never restricted: whether a call is running
 * is read from the role in effect, which an aborted call cannot leave
 * behind, not from a count of calls.
 */
PG_FUNCTION_INFO_V1(idem_gate_workflow_visible);

Datum
idem_gate_workflow_visible(PG_FUNCTION_ARGS)
{
	char	   *workflow;

	workflow = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	PG_RETURN_BOOL(ig_acl_visible(GetUserId(), workflow));
}

/*
 * The arguments of grant_workflow() and revoke_workflow(): both given, the
 * pattern not empty and escaping only what can be escaped, the role
 * existing.  Returns the role.
 */
static Oid
acl_args(FunctionCallInfo fcinfo, char **pattern)
{
	const char *name;
	Oid			role;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(0) ? "role" : "pattern"),
				 errhint("Name a role and a pattern of workflows, such as 'orders_%%'.")));
	*pattern = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if ((*pattern)[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pattern must not be empty"),
				 errhint("Use '%%' for every workflow.")));
	for (const char *p = *pattern; *p != '\0'; p++)
	{
		if (*p != '\\')
			continue;
		if (p[1] != '%' && p[1] != '\\')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("pattern \"%s\" has a backslash that escapes nothing",
							ig_display(*pattern)),
					 errdetail("In a pattern, %% is any run of characters, \\%% a literal %% and \\\\ a literal backslash; every other character, _ included, stands for itself."),
					 errhint("Double the backslash to match one.")));
		p++;
	}
	name = NameStr(*PG_GETARG_NAME(0));
	role = get_role_oid(name, true);
	if (!OidIsValid(role))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" does not exist", name),
				 errhint("Check the spelling (role names are case sensitive), or create the role first.")));
	return role;
}

/*
 * Grant or revoke (grant false) pattern to role, acting as the owner of
 * the function called, guarded against code attached to the grants table.
 * Returns whether a row was added or removed.
 */
static bool
acl_write(FunctionCallInfo fcinfo, bool grant)
{
	static const char *const sql[2] = {
		"DELETE FROM ONLY idem_gate.workflow_acl a"
		" WHERE a.role OPERATOR(pg_catalog.=) $1 AND a.pattern OPERATOR(pg_catalog.=) $2",
		"INSERT INTO idem_gate.workflow_acl (role, pattern) VALUES ($1, $2)"
		" ON CONFLICT DO NOTHING"
	};
	Oid			argtypes[2] = {REGROLEOID, TEXTOID};
	Datum		values[2];
	char	   *pattern;
	Oid			role = acl_args(fcinfo, &pattern);
	Oid			caller = GetUserId();
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level = 0;
	const char *what;
	bool		done;

	PreventCommandIfReadOnly(grant ? "idem_gate.grant_workflow()" : "idem_gate.revoke_workflow()");
	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	ig_acl_check_administer(caller, GetUserId(), pattern, grant ? "grant" : "revoke");
	ig_call_refuse_rules(IG_TABLE_WORKFLOW_ACL);
	what = ig_call_attached_code(IG_TABLE_WORKFLOW_ACL, true);
	if (what != NULL)
	{
		ig_call_guard_user_code(NULL, IG_TABLE_WORKFLOW_ACL, what);
		guc_level = ig_call_pin_search_path();
	}

	values[0] = ObjectIdGetDatum(role);
	values[1] = CStringGetTextDatum(pattern);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql[grant], 2, argtypes, values, NULL, false, 0) < 0)
		elog(ERROR, "could not change idem_gate.workflow_acl");
	done = (SPI_processed > 0);
	SPI_finish();

	if (guc_level != 0)
		AtEOXact_GUC(true, guc_level);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return done;
}

/*
 * idem_gate.grant_workflow(role, pattern): let a role (and its members)
 * use the workflows the pattern matches; false if already granted.
 */
PG_FUNCTION_INFO_V1(idem_gate_grant_workflow);

Datum
idem_gate_grant_workflow(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acl_write(fcinfo, true));
}

/*
 * idem_gate.revoke_workflow(role, pattern): take back a grant; false if
 * there was no such grant.
 */
PG_FUNCTION_INFO_V1(idem_gate_revoke_workflow);

Datum
idem_gate_revoke_workflow(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acl_write(fcinfo, false));
}

