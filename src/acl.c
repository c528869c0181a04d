/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Per-workflow access: with idem_gate.workflow_acl on, a role may call
 *	  the gate's functions only for the workflows granted to it (or to a
 *	  role it is a member of) in idem_gate.workflow_acl.
 *
 * The gate's functions are on every delivery's path, so the decision is
 * cached per backend: the patterns that apply to the calling role, and the
 * answers for the last few workflows.  The cache is dropped when the grants
 * change (a trigger on the table invalidates its relcache entry in every
 * backend) and when role memberships change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
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
	int			npatterns;
	char	  **patterns;		/* LIKE patterns granted to roleid */
	int			nanswers;
	int			next;			/* the answer slot to replace next */
	IgAclAnswer answers[IG_ACL_ANSWERS];
} IgAclCache;

static IgAclCache ig_acl;
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

/* Does a granted pattern match the workflow? */
static bool
ig_acl_match(const char *workflow)
{
	Datum		wf = CStringGetTextDatum(workflow);

	for (int i = 0; i < ig_acl.npatterns; i++)
		if (DatumGetBool(DirectFunctionCall2Coll(textlike, C_COLLATION_OID, wf,
												 CStringGetTextDatum(ig_acl.patterns[i]))))
			return true;
	return false;
}

/*
 * May the calling role (the one in effect before the gate became the
 * extension's owner) act on the workflow?  Raises 42501 naming both when
 * not.  Superusers and the owner of the gate's functions always may.
 */
void
ig_acl_check(Oid caller, Oid owner, const char *workflow)
{
	Oid			nsp;
	Oid			relid;
	bool		allowed = false;
	int			i;

	if (!idem_workflow_acl || caller == owner || superuser_arg(caller))
		return;

	if (!ig_acl.valid || ig_acl.roleid != caller)
	{
		nsp = get_namespace_oid("idem_gate", false);
		relid = get_relname_relid("workflow_acl", nsp);
		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("idem_gate.workflow_acl is on, but this database's idem_gate has no grants table"),
					 errhint("Run ALTER EXTENSION idem_gate UPDATE, or turn idem_gate.workflow_acl off.")));
		ig_acl_load(caller, relid);
	}

	for (i = 0; i < ig_acl.nanswers; i++)
		if (strcmp(ig_acl.answers[i].workflow, workflow) == 0)
			break;
	if (i < ig_acl.nanswers)
		allowed = ig_acl.answers[i].allowed;
	else
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

	if (!allowed)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not use workflow \"%s\"",
						GetUserNameFromId(caller, false), idem_display(workflow)),
				 errdetail("idem_gate.workflow_acl is on, and no pattern granted to this role or a role it belongs to matches the workflow."),
				 errhint("An administrator can grant it with idem_gate.grant_workflow(role, pattern).")));
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
