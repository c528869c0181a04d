/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Per-workflow access: with idem_gate.workflow_acl on, a role may call
 *	  the gate's functions only for the workflows granted to it (or to a
 *	  role it is a member of) in idem_gate.workflow_acl.
 *
 * A pattern has one wildcard, %, any run of characters; _ is a literal
 * underscore, \% and \\ a literal % and \.  (1.1 matched patterns with LIKE,
 * where _ is a wildcard too: the update to 1.2 lists the grants that now
 * match less.)
 *
 * The gate's functions are on every delivery's path, so the decision is
 * cached per backend: the patterns that apply to the calling role, and the
 * answers for the last few workflows.  The cache is dropped when the grants
 * change (a trigger on the table invalidates its relcache entry in every
 * backend) and when role memberships change.  The same cached decision
 * filters what a role reads (idem_gate.workflow_visible(), in the row
 * security policies of idem_gate.claims and idem_gate.audit and in the
 * views), and bounds what a role that administers access may grant.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "idem_gate.h"
#include "call.h"

/* idem_gate.workflow_acl */
bool		idem_workflow_acl = false;

/* Answers remembered for this many workflows. */
#define IG_ACL_ANSWERS	8

typedef struct IgAclAnswer
{
	char	   *workflow;
	bool		allowed;
} IgAclAnswer;

typedef struct IgAclCache
{
	bool		valid;
	Oid			roleid;			/* the calling role the cache is for */
	Oid			relid;			/* idem_gate.workflow_acl */
	Oid			extowner;		/* the extension's owner */
	int			npatterns;
	char	  **patterns;		/* patterns granted to roleid */
	int			nanswers;
	int			next;			/* the answer slot to replace next */
	IgAclAnswer answers[IG_ACL_ANSWERS];
} IgAclCache;

static IgAclCache ig_acl;

static Oid	ig_extension_owner(void);
static MemoryContext ig_acl_cxt = NULL;

/* The grants or the role memberships changed: decide again. */
static void
ig_acl_relcache_cb(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == ig_acl.relid)
		ig_acl.valid = false;
}

static void
ig_acl_syscache_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	ig_acl.valid = false;
}

/*
 * Load the patterns granted to roleid or to any role it has the
 * privileges of.
 */
static void
ig_acl_load(Oid roleid, Oid relid)
{
	static bool registered = false;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *patterns = NIL;
	ListCell   *lc;
	int			i = 0;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(ig_acl_relcache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, ig_acl_syscache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, ig_acl_syscache_cb, (Datum) 0);
		ig_acl_cxt = AllocSetContextCreate(TopMemoryContext,
										   "idem_gate workflow acl",
										   ALLOCSET_SMALL_SIZES);
		registered = true;
	}
	MemoryContextReset(ig_acl_cxt);
	memset(&ig_acl, 0, sizeof(ig_acl));
	ig_acl.valid = true;		/* an invalidation from here on counts */
	ig_acl.roleid = roleid;
	ig_acl.relid = relid;

	ig_acl.extowner = ig_extension_owner();
	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		bool		isnull;
		Oid			grantee = DatumGetObjectId(heap_getattr(tup, 1, RelationGetDescr(rel), &isnull));
		Datum		pattern = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		if (!isnull && has_privs_of_role(roleid, grantee))
			patterns = lappend(patterns, MemoryContextStrdup(ig_acl_cxt,
															 TextDatumGetCString(pattern)));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	ig_acl.npatterns = list_length(patterns);
	ig_acl.patterns = MemoryContextAlloc(ig_acl_cxt,
										 sizeof(char *) * Max(ig_acl.npatterns, 1));
	foreach(lc, patterns)
		ig_acl.patterns[i++] = lfirst(lc);
	list_free(patterns);
}

/*
 * The next symbol of a pattern at *p: a literal byte (escape removed) or
 * -1 for the wildcard %.  Advances *p.
 */
static int
ig_pattern_symbol(const char **p)
{
	const char *c = *p;

	if (c[0] == '%')
	{
		*p = c + 1;
		return -1;
	}
	if (c[0] == '\\' && (c[1] == '%' || c[1] == '\\'))
	{
		*p = c + 2;
		return (unsigned char) c[1];
	}
	*p = c + 1;
	return (unsigned char) c[0];
}

/* A pattern as symbols (bytes, and -1 for %), ending with -2. */
static int *
ig_pattern_symbols(const char *pattern, int *n)
{
	int		   *sym = palloc(sizeof(int) * (strlen(pattern) + 1));
	const char *p = pattern;

	*n = 0;
	while (*p != '\0')
		sym[(*n)++] = ig_pattern_symbol(&p);
	sym[*n] = -2;
	return sym;
}

/*
 * Does pattern q match the string of symbols s?  q's % matches any run of
 * symbols; every other symbol of q matches only the same symbol.  With s
 * a workflow's bytes this is "does the pattern match the workflow"; with
 * s a pattern's own symbols (its % a symbol that only q's % can match) it
 * is "does q cover every workflow s matches".  Iterative, with the usual
 * single backtracking point of a %-only pattern.
 */
static bool
ig_symbols_match(const int *q, int nq, const int *s, int ns)
{
	int			i = 0;
	int			j = 0;
	int			star = -1;
	int			mark = 0;

	while (j < ns)
	{
		if (i < nq && q[i] == -1)
		{
			star = i++;
			mark = j;
		}
		else if (i < nq && q[i] == s[j])
		{
			i++;
			j++;
		}
		else if (star >= 0)
		{
			i = star + 1;
			j = ++mark;
		}
		else
			return false;
	}
	while (i < nq && q[i] == -1)
		i++;
	return i == nq;
}

/* Does a granted pattern match the workflow? */
static bool
ig_pattern_matches(const char *pattern, const char *workflow)
{
	int			nq;
	int		   *q = ig_pattern_symbols(pattern, &nq);
	int			ns = strlen(workflow);
	int		   *w = palloc(sizeof(int) * (ns + 1));
	bool		match;

	for (int i = 0; i < ns; i++)
		w[i] = (unsigned char) workflow[i];
	match = ig_symbols_match(q, nq, w, ns);
	pfree(q);
	pfree(w);
	return match;
}

/* Does pattern q cover every workflow that pattern p matches? */
static bool
ig_pattern_covers(const char *q, const char *p)
{
	int			nq;
	int			np;
	int		   *qs = ig_pattern_symbols(q, &nq);
	int		   *ps = ig_pattern_symbols(p, &np);

	return ig_symbols_match(qs, nq, ps, np);
}

/* Does a pattern granted to the cached role match the workflow? */
static bool
ig_acl_match(const char *workflow)
{
	for (int i = 0; i < ig_acl.npatterns; i++)
		if (ig_pattern_matches(ig_acl.patterns[i], workflow))
			return true;
	return false;
}

/* The owner of the idem_gate extension. */
static Oid
ig_extension_owner(void)
{
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("idem_gate"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &skey);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * The cache of role's grants, loaded if it is for another role or the
 * grants changed.  False where this database's idem_gate has no grants
 * table (a 1.0 catalog).
 */
static bool
ig_acl_for(Oid role)
{
	Oid			relid;

	if (ig_acl.valid && ig_acl.roleid == role)
		return true;
	relid = get_relname_relid("workflow_acl", get_namespace_oid("idem_gate", false));
	if (!OidIsValid(relid))
		return false;
	ig_acl_load(role, relid);
	return true;
}

/*
 * May role use the workflow?  Superusers and the extension's owner may
 * use every workflow; others the workflows a pattern granted to them (or a
 * role they have the privileges of) matches.  Cached per workflow.
 */
static bool
ig_acl_allows(Oid role, const char *workflow)
{
	bool		allowed;
	int			i;

	if (superuser_arg(role))
		return true;
	if (!ig_acl_for(role))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate.workflow_acl is on, but this database's idem_gate has no grants table"),
				 errhint("Run ALTER EXTENSION idem_gate UPDATE, or turn idem_gate.workflow_acl off.")));
	if (role == ig_acl.extowner)
		return true;

	for (i = 0; i < ig_acl.nanswers; i++)
		if (strcmp(ig_acl.answers[i].workflow, workflow) == 0)
			return ig_acl.answers[i].allowed;

	{
		IgAclAnswer *a;

		allowed = ig_acl_match(workflow);
		if (ig_acl.nanswers < IG_ACL_ANSWERS)
			a = &ig_acl.answers[ig_acl.nanswers++];
		else
		{
			a = &ig_acl.answers[ig_acl.next];
			ig_acl.next = (ig_acl.next + 1) % IG_ACL_ANSWERS;
			pfree(a->workflow);
		}
		a->workflow = MemoryContextStrdup(ig_acl_cxt, workflow);
		a->allowed = allowed;
	}
	return allowed;
}

/*
 * May the calling role (the one in effect before the gate became the
 * owner of the called function) act on the workflow?  Raises 42501 naming
 * both when not.  Superusers, the extension's owner and the owner of the
 * gate's functions always may.
 */
void
ig_acl_check(Oid caller, Oid owner, const char *workflow)
{
	if (!idem_workflow_acl || caller == owner)
		return;
	if (!ig_acl_allows(caller, workflow))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not use workflow \"%s\"",
						GetUserNameFromId(caller, false), idem_display(workflow)),
				 errdetail("idem_gate.workflow_acl is on, and no pattern granted to this role or a role it belongs to matches the workflow."),
				 errhint("An administrator can grant it with idem_gate.grant_workflow(role, pattern).")));
}

/*
 * idem_gate.workflow_visible(workflow): may the current role see the
 * workflow's claims and audit rows?  Always, with idem_gate.workflow_acl
 * off; otherwise as for calling the gate's functions.  The row security
 * policies of idem_gate.claims and idem_gate.audit, and the views, filter
 * by it; NULL is not visible.  The gate's own reads inside a call, whose
 * caller's grants are checked already, are not filtered again (row
 * security applies to them where a DBA made a role that is not the
 * table's owner own the gate's functions).
 */
PG_FUNCTION_INFO_V1(idem_gate_workflow_visible);

Datum
idem_gate_workflow_visible(PG_FUNCTION_ARGS)
{
	char	   *workflow;

	if (!idem_workflow_acl || ig_call_active())
		PG_RETURN_BOOL(true);
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	workflow = text_to_cstring(PG_GETARG_TEXT_PP(0));
	PG_RETURN_BOOL(ig_acl_allows(GetUserId(), workflow));
}

/*
 * idem_gate.workflow_acl_changed(): the trigger that makes every backend
 * decide again after the grants change.
 */
PG_FUNCTION_INFO_V1(idem_gate_workflow_acl_changed);

Datum
idem_gate_workflow_acl_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_gate.workflow_acl_changed() must be called as a trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * The arguments of grant_workflow() and revoke_workflow(): both given, the
 * pattern not empty and escaping only what can be escaped, the role
 * existing.  Returns the role.
 */
static Oid
ig_acl_args(FunctionCallInfo fcinfo, char **pattern)
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
							idem_display(*pattern)),
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
 * May caller grant or revoke pattern?  Superusers, the extension's owner
 * and the owner of the function may grant anything; any other role given
 * EXECUTE on grant_workflow() and revoke_workflow() administers the
 * workflows its own grants cover: a pattern it holds (or a role it has
 * the privileges of holds) must match every workflow the pattern does.
 */
static void
ig_acl_may_administer(Oid caller, Oid owner, const char *pattern,
					  const char *verb)
{
	if (caller == owner || superuser_arg(caller))
		return;
	if (ig_acl_for(caller))
	{
		if (caller == ig_acl.extowner)
			return;
		for (int i = 0; i < ig_acl.npatterns; i++)
			if (ig_pattern_covers(ig_acl.patterns[i], pattern))
				return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not %s pattern \"%s\"",
					GetUserNameFromId(caller, false), verb, idem_display(pattern)),
			 errdetail("A role that administers per-workflow access grants and revokes only patterns that its own grants cover."),
			 errhint("Ask a superuser to %s it, or grant the administering role a pattern that covers it.",
					 verb)));
}

/*
 * Grant or revoke (grant false) pattern to role, acting as the owner of
 * the function called, guarded against code attached to the grants table.
 * Returns whether a row was added or removed.
 */
static bool
ig_acl_write(FunctionCallInfo fcinfo, bool grant)
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
	Oid			role = ig_acl_args(fcinfo, &pattern);
	Oid			caller = GetUserId();
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level = 0;
	const IgTableShape *shape;
	bool		done;

	PreventCommandIfReadOnly(grant ? "idem_gate.grant_workflow()" : "idem_gate.revoke_workflow()");
	ig_call_act_as_owner(fcinfo, &save_userid, &save_sec_context);
	ig_acl_may_administer(caller, GetUserId(), pattern, grant ? "grant" : "revoke");
	shape = ig_table_shape(IG_TABLE_WORKFLOW_ACL);
	ig_refuse_rules(IG_TABLE_WORKFLOW_ACL);
	if (shape->write_code != NULL ||
		(shape->policy_code != NULL && ig_rls_applies(IG_TABLE_WORKFLOW_ACL)))
	{
		ig_call_guard_user_code(NULL, IG_TABLE_WORKFLOW_ACL,
								shape->write_code ? shape->write_code : shape->policy_code);
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
	PG_RETURN_BOOL(ig_acl_write(fcinfo, true));
}

/*
 * idem_gate.revoke_workflow(role, pattern): take back a grant; false if
 * there was no such grant.
 */
PG_FUNCTION_INFO_V1(idem_gate_revoke_workflow);

Datum
idem_gate_revoke_workflow(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ig_acl_write(fcinfo, false));
}

/* Define idem_gate.workflow_acl. */
void
idem_acl_define_settings(void)
{
	DefineCustomBoolVariable("idem_gate.workflow_acl",
							 "Allow each role only the workflows granted to it in idem_gate.workflow_acl.",
							 "Grant with idem_gate.grant_workflow(role, pattern); superusers and the extension's owner are not restricted.",
							 &idem_workflow_acl,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}
