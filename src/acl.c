/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Per-workflow access: a role to which it applies may call the gate's
 *	  functions, and see claims, only for the workflows granted to it (or
 *	  to a role it is a member of) in idem_gate.workflow_acl.
 *
 * Whether per-workflow access applies to a role is decided from what a
 * session cannot change (1.3): the setting idem_gate.workflow_acl as the
 * session got it (superuser-only, so a restricted session cannot turn it
 * off), or the same setting attached with ALTER ROLE ... SET to the role
 * or to any role whose privileges it has (pg_db_role_setting), so that a
 * member that logs in as itself is restricted exactly like the role it
 * belongs to.  Superusers, the extension's owner and the owners of the
 * gate's functions are never restricted: the gate's own reads run as the
 * owner of the function called, and are therefore never filtered, with
 * no counter of running calls that an aborted call could leave behind.
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
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "acl.h"
#include "base.h"

/* idem_gate.workflow_acl */
static bool workflow_acl = false;

/* Answers remembered for this many workflows. */
#define IG_ACL_ANSWERS	8

typedef struct IgAclAnswer
{
	char	   *workflow;
	bool		allowed;
} IgAclAnswer;

typedef struct IgAclCache
{
	bool		valid;			/* no invalidation since the last load began */
	bool		complete;		/* ... and that load ran to its end */
	Oid			roleid;			/* the calling role the cache is for */
	Oid			sessionid;		/* ... in a session of this login */
	Oid			relid;			/* idem_gate.workflow_acl */
	Oid			extowner;		/* the extension's owner */
	bool		like;			/* the catalog is 1.1's: patterns are LIKE's */
	bool		role_setting;	/* a role setting turns per-workflow access on */
	bool		gate_owner;		/* roleid owns one of the gate's functions */
	int			npatterns;
	char	  **patterns;		/* patterns granted to roleid */
	int			nanswers;
	int			next;			/* the answer slot to replace next */
	IgAclAnswer answers[IG_ACL_ANSWERS];
} IgAclCache;

static IgAclCache cache;

static Oid	extension_owner(bool *like);
static bool role_setting_on(Oid roleid);
static bool session_restricted(Oid roleid);
static bool owns_gate_function(Oid roleid);
static MemoryContext acl_cxt = NULL;

/* The grants or the role memberships changed: decide again. */
static void
acl_relcache_cb(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == cache.relid)
		cache.valid = false;
}

static void
acl_syscache_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	cache.valid = false;
}

/*
 * Load the patterns granted to roleid or to any role it has the
 * privileges of; where the session's restricted login became roleid (SET
 * ROLE), those of the login too, so that it keeps what its team may use.
 */
static void
acl_load(Oid roleid, Oid relid)
{
	static bool registered = false;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *patterns = NIL;
	ListCell   *lc;
	int			i = 0;
	bool		via_session;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(acl_relcache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, acl_syscache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, acl_syscache_cb, (Datum) 0);
		/* ALTER EXTENSION UPDATE changes the rule the patterns are read by */
		CacheRegisterSyscacheCallback(EXTENSIONOID, acl_syscache_cb, (Datum) 0);
		/* a function of the gate may change hands (ALTER FUNCTION OWNER) */
		CacheRegisterSyscacheCallback(PROCOID, acl_syscache_cb, (Datum) 0);
		acl_cxt = AllocSetContextCreate(TopMemoryContext,
										"idem_gate workflow acl",
										ALLOCSET_SMALL_SIZES);
		registered = true;
	}
	MemoryContextReset(acl_cxt);
	memset(&cache, 0, sizeof(cache));
	cache.valid = true;		/* an invalidation from here on counts */
	cache.roleid = roleid;
	cache.sessionid = GetSessionUserId();
	cache.relid = relid;

	cache.extowner = extension_owner(&cache.like);
	via_session = session_restricted(roleid);
	cache.role_setting = role_setting_on(roleid) || via_session;
	cache.gate_owner = owns_gate_function(roleid);
	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		bool		isnull;
		Oid			grantee = DatumGetObjectId(heap_getattr(tup, 1, RelationGetDescr(rel), &isnull));
		Datum		pattern = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		if (!isnull && (has_privs_of_role(roleid, grantee) ||
						(via_session && has_privs_of_role(GetSessionUserId(), grantee))))
			patterns = lappend(patterns, MemoryContextStrdup(acl_cxt,
															 TextDatumGetCString(pattern)));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	cache.npatterns = list_length(patterns);
	cache.patterns = MemoryContextAlloc(acl_cxt,
										sizeof(char *) * Max(cache.npatterns, 1));
	foreach(lc, patterns)
		cache.patterns[i++] = lfirst(lc);
	list_free(patterns);
	cache.complete = true;
}

/*
 * The next symbol of a pattern at *p: a literal byte (escape removed) or
 * -1 for the wildcard %.  Advances *p.
 */
static int
pattern_symbol(const char **p)
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
pattern_symbols(const char *pattern, int *n)
{
	int		   *sym = palloc(sizeof(int) * (strlen(pattern) + 1));
	const char *p = pattern;

	*n = 0;
	while (*p != '\0')
		sym[(*n)++] = pattern_symbol(&p);
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
symbols_match(const int *q, int nq, const int *s, int ns)
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
pattern_matches(const char *pattern, const char *workflow)
{
	int			nq;
	int		   *q = pattern_symbols(pattern, &nq);
	int			ns = strlen(workflow);
	int		   *w = palloc(sizeof(int) * (ns + 1));
	bool		match;

	for (int i = 0; i < ns; i++)
		w[i] = (unsigned char) workflow[i];
	match = symbols_match(q, nq, w, ns);
	pfree(q);
	pfree(w);
	return match;
}

/* Does pattern q cover every workflow that pattern p matches? */
static bool
pattern_covers(const char *q, const char *p)
{
	int			nq;
	int			np;
	int		   *qs = pattern_symbols(q, &nq);
	int		   *ps = pattern_symbols(p, &np);

	return symbols_match(qs, nq, ps, np);
}

/*
 * Does a pattern granted to the cached role match the workflow?  By the
 * rule of 1.2, or, until ALTER EXTENSION UPDATE brings the catalog to 1.2,
 * by 1.1's (LIKE, where _ is any one character too): the update's NOTICE
 * lists the grants whose meaning it changes.
 */
static bool
acl_match(const char *workflow)
{
	for (int i = 0; i < cache.npatterns; i++)
	{
		if (cache.like ?
			DatumGetBool(DirectFunctionCall2Coll(textlike, C_COLLATION_OID,
												 CStringGetTextDatum(workflow),
												 CStringGetTextDatum(cache.patterns[i]))) :
			pattern_matches(cache.patterns[i], workflow))
			return true;
	}
	return false;
}

/*
 * The owner of the idem_gate extension; *like says whether its catalog is
 * still 1.1's.
 */
static Oid
extension_owner(bool *like)
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
	*like = false;
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		version = heap_getattr(tup, Anum_pg_extension_extversion,
										   RelationGetDescr(rel), &isnull);

		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		*like = !isnull && strcmp(TextDatumGetCString(version), "1.1") == 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * Does a setting of pg_db_role_setting, for every database or this one,
 * turn idem_gate.workflow_acl on for roleid or a role whose privileges it
 * has?  That is the catalog's word, which no session can change: a member
 * of the README's operator role that logs in as itself gets none of the
 * role's settings, but is restricted all the same.  A setting for every
 * role of a database (ALTER DATABASE ... SET) counts too.
 */
static bool
role_setting_on(Oid roleid)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		on = false;

	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (!on && (tup = systable_getnext(scan)) != NULL)
	{
		Form_pg_db_role_setting s = (Form_pg_db_role_setting) GETSTRUCT(tup);
		bool		isnull;
		Datum		d;
		ArrayType  *a;
		Datum	   *items;
		int			n;

		if (OidIsValid(s->setdatabase) && s->setdatabase != MyDatabaseId)
			continue;
		if (OidIsValid(s->setrole) && !has_privs_of_role(roleid, s->setrole))
			continue;
		d = heap_getattr(tup, Anum_pg_db_role_setting_setconfig,
						 RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		a = DatumGetArrayTypeP(d);
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &items, NULL, &n);
		for (int i = 0; i < n && !on; i++)
		{
			char	   *item = TextDatumGetCString(items[i]);
			char	   *eq = strchr(item, '=');
			bool		value;

			if (eq == NULL)
				continue;
			*eq = '\0';
			if (pg_strcasecmp(item, "idem_gate.workflow_acl") == 0 &&
				parse_bool(eq + 1, &value) && value)
				on = true;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return on;
}

/*
 * Is the session's own login restricted, where roleid is another role it
 * became (SET ROLE)?  A member of a restricted team role that may also SET
 * ROLE to a role nobody restricted stays restricted: what a session did
 * before a call never lifts per-workflow access (the grants of the role in
 * effect decide what it may use).
 */
static bool
session_restricted(Oid roleid)
{
	Oid			session = GetSessionUserId();

	return session != roleid && !superuser_arg(session) &&
		role_setting_on(session);
}

/*
 * Does roleid own one of the extension's functions?  The gate's functions
 * act as their owner, and what they read as that role is never filtered
 * again: the caller's grants were checked when the call began.
 */
static bool
owns_gate_function(Oid roleid)
{
	Oid			ext = get_extension_oid("idem_gate", true);
	Relation	rel;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	bool		owns = false;

	if (!OidIsValid(ext))
		return false;
	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ExtensionRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, DependReferenceIndexId, true, NULL, 2, key);
	while (!owns && (tup = systable_getnext(scan)) != NULL)
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);
		HeapTuple	proc;

		if (dep->classid != ProcedureRelationId || dep->deptype != DEPENDENCY_EXTENSION)
			continue;
		proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(dep->objid));
		if (!HeapTupleIsValid(proc))
			continue;
		owns = ((Form_pg_proc) GETSTRUCT(proc))->proowner == roleid;
		ReleaseSysCache(proc);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owns;
}

/*
 * The cache of role's grants, loaded if it is for another role, the
 * grants changed or the last load was cut short by an error (a lock
 * timeout, a cancel), which could have left the patterns or the role
 * setting unread.  False where this database's idem_gate has no grants
 * table (a 1.0 catalog).
 */
static bool
acl_for(Oid role)
{
	Oid			relid;

	if (cache.valid && cache.complete && cache.roleid == role &&
		cache.sessionid == GetSessionUserId())
		return true;
	relid = get_relname_relid("workflow_acl", get_namespace_oid("idem_gate", false));
	if (!OidIsValid(relid))
		return false;
	acl_load(role, relid);
	return true;
}

/*
 * May role use the workflow?  Superusers and the extension's owner may
 * use every workflow; others the workflows a pattern granted to them (or a
 * role they have the privileges of) matches.  Cached per workflow.
 */
static bool
acl_allows(Oid role, const char *workflow)
{
	bool		allowed;
	int			i;

	if (superuser_arg(role))
		return true;
	if (!acl_for(role))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate.workflow_acl is on, but this database's idem_gate has no grants table"),
				 errhint("Run ALTER EXTENSION idem_gate UPDATE, or turn idem_gate.workflow_acl off.")));
	if (role == cache.extowner || cache.gate_owner)
		return true;

	for (i = 0; i < cache.nanswers; i++)
		if (strcmp(cache.answers[i].workflow, workflow) == 0)
			return cache.answers[i].allowed;

	{
		IgAclAnswer *a;

		allowed = acl_match(workflow);
		if (cache.nanswers < IG_ACL_ANSWERS)
			a = &cache.answers[cache.nanswers++];
		else
		{
			a = &cache.answers[cache.next];
			cache.next = (cache.next + 1) % IG_ACL_ANSWERS;
			pfree(a->workflow);
		}
		a->workflow = MemoryContextStrdup(acl_cxt, workflow);
		a->allowed = allowed;
	}
	return allowed;
}

/*
 * Does per-workflow access apply to role: the session's setting, or a
 * role setting of the role or of a role whose privileges it has?  Never
 * to a superuser, the extension's owner or an owner of the gate's
 * functions.  With the session's setting off this loads the role's cache
 * once, then costs a comparison per call.
 */
static bool
acl_applies(Oid role)
{
	if (superuser_arg(role))
		return false;
	if (!acl_for(role))
		return workflow_acl;	/* a 1.0 catalog: acl_allows() says so */
	if (role == cache.extowner || cache.gate_owner)
		return false;
	return workflow_acl || cache.role_setting;
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
	if (caller == owner || !acl_applies(caller))
		return;
	if (!acl_allows(caller, workflow))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not use workflow \"%s\"",
						GetUserNameFromId(caller, false), ig_display(workflow)),
				 errdetail("idem_gate.workflow_acl is on, and no pattern granted to this role or a role it belongs to matches the workflow."),
				 errhint("An administrator can grant it with idem_gate.grant_workflow(role, pattern).")));
}

/*
 * May role see the workflow's claims and audit rows?  Always, where
 * per-workflow access does not apply to it; otherwise as for calling the
 * gate's functions.  A NULL workflow is not visible.
 */
bool
ig_acl_visible(Oid role, const char *workflow)
{
	if (!acl_applies(role))
		return true;
	if (workflow == NULL)
		return false;
	return acl_allows(role, workflow);
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
 * May caller grant or revoke pattern?  Superusers, the extension's owner
 * and the owner of the function may grant anything; any other role given
 * EXECUTE on grant_workflow() and revoke_workflow() administers the
 * workflows its own grants cover: a pattern it holds (or a role it has
 * the privileges of holds) must match every workflow the pattern does.
 */
void
ig_acl_check_administer(Oid caller, Oid owner, const char *pattern,
						const char *verb)
{
	if (caller == owner || superuser_arg(caller))
		return;
	if (acl_for(caller))
	{
		if (caller == cache.extowner)
			return;
		for (int i = 0; i < cache.npatterns; i++)
			if (pattern_covers(cache.patterns[i], pattern))
				return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not %s pattern \"%s\"",
					GetUserNameFromId(caller, false), verb, ig_display(pattern)),
			 errdetail("A role that administers per-workflow access grants and revokes only patterns that its own grants cover."),
			 errhint("Ask a superuser to %s it, or grant the administering role a pattern that covers it.",
					 verb)));
}

/* Define idem_gate.workflow_acl. */
void
ig_acl_init(void)
{
	DefineCustomBoolVariable("idem_gate.workflow_acl",
							 "Allow each role only the workflows granted to it in idem_gate.workflow_acl.",
							 "Grant with idem_gate.grant_workflow(role, pattern); superusers and the extension's owner are not restricted.",
							 &workflow_acl,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}
