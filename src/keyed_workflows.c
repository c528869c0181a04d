/*-------------------------------------------------------------------------
 *
 * keyed_workflows.c
 *	  Which workflows are keyed: the workflows whose row in
 *	  idem_gate.policies says keyed, read once per change of the table in
 *	  each backend, and on Citus once per transaction.
 *
 * Every call of the gate asks whether its workflow is keyed (keyed.c
 * then gives the key's stored forms), so the answer is kept per backend.
 * The policies' trigger invalidates the table's relcache entry in every
 * backend when a row changes, and the next call reads them again.  On
 * Citus the table is a reference table whose rows are in a shard, which
 * no relcache invalidation reaches: there the list lasts one transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "citus.h"
#include "keyed_workflows.h"

/* The workflows whose policy says keyed, per backend (on Citus, per transaction). */
static bool policies_valid = false;		/* no invalidation since the last read began */
static bool policies_complete = false;	/* ... and that read ran to its end */
static bool policies_citus = false;
static Oid	policies_relid = InvalidOid;
static List *keyed_workflows = NIL;
static MemoryContext policies_cxt = NULL;

/* On Citus the keyed workflows are read again in every transaction. */
static void
policies_xact_cb(XactEvent event, void *arg)
{
	if (policies_citus &&
		(event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		 event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		 event == XACT_EVENT_PREPARE))
		policies_valid = false;
}

/*
 * On Citus the policies are a reference table, whose rows are in a shard:
 * read them through SQL, which Citus routes, as the extension's owner in a
 * security-restricted operation with search_path pinned, whoever calls.
 */
static void
load_policies_citus(void)
{
	Oid			owner = get_extension_oid("idem_gate", false);
	Oid			save_userid;
	int			save_sec_context;
	int			level;
	HeapTuple	tup;
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	MemoryContext old;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(owner));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &skey);
	tup = systable_getnext(scan);
	owner = HeapTupleIsValid(tup) ? ((Form_pg_extension) GETSTRUCT(tup))->extowner :
		BOOTSTRAP_SUPERUSERID;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT p.workflow FROM ONLY idem_gate.policies p WHERE p.keyed",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read idem_gate.policies");
	old = MemoryContextSwitchTo(policies_cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
		keyed_workflows = lappend(keyed_workflows,
								  SPI_getvalue(SPI_tuptable->vals[i],
											   SPI_tuptable->tupdesc, 1));
	MemoryContextSwitchTo(old);
	SPI_finish();
	AtEOXact_GUC(true, level);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/* idem_gate.policies changed: read the keyed workflows again. */
static void
policies_relcache_cb(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == policies_relid)
		policies_valid = false;
}

/*
 * Read the workflows whose policy says keyed, once per change of
 * idem_gate.policies (its trigger invalidates the table's relcache entry
 * in every backend).  A catalog without the keyed column (1.0, 1.1) has
 * none.  A plain heap scan: no code anybody attached runs.  On Citus,
 * through SQL, once per transaction.
 */
static void
load_policies(void)
{
	static bool registered = false;
	Oid			nsp;
	AttrNumber	wf_att;
	AttrNumber	keyed_att;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	MemoryContext old;
	int32		group;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(policies_relcache_cb, (Datum) 0);
		RegisterXactCallback(policies_xact_cb, NULL);
		policies_cxt = AllocSetContextCreate(TopMemoryContext,
											 "idem_gate keyed workflows",
											 ALLOCSET_SMALL_SIZES);
		registered = true;
	}
	MemoryContextReset(policies_cxt);
	keyed_workflows = NIL;
	policies_valid = true;		/* an invalidation from here on counts */

	nsp = get_namespace_oid("idem_gate", true);
	policies_relid = OidIsValid(nsp) ? get_relname_relid("policies", nsp) : InvalidOid;
	if (!OidIsValid(policies_relid))
		return;
	wf_att = get_attnum(policies_relid, "workflow");
	keyed_att = get_attnum(policies_relid, "keyed");
	if (wf_att == InvalidAttrNumber || keyed_att == InvalidAttrNumber)
		return;
	policies_citus = ig_citus_table(policies_relid, &group);
	if (policies_citus)
	{
		load_policies_citus();
		return;
	}

	rel = table_open(policies_relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	old = MemoryContextSwitchTo(policies_cxt);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		bool		isnull;
		Datum		keyed = heap_getattr(tup, keyed_att, RelationGetDescr(rel), &isnull);
		Datum		wf;

		if (isnull || !DatumGetBool(keyed))
			continue;
		wf = heap_getattr(tup, wf_att, RelationGetDescr(rel), &isnull);
		if (!isnull)
			keyed_workflows = lappend(keyed_workflows, TextDatumGetCString(wf));
	}
	MemoryContextSwitchTo(old);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * The keyed workflows' names: the cache, which the next invalidation
 * frees, read again where an invalidation came or where the last read was
 * cut short by an error (a lock timeout, a cancel).  A list left half
 * read would answer a keyed workflow as plain: its next claim of a key
 * would store the key itself, and not find the claim made under its
 * keyed form.
 */
const List *
ig_keyed_workflows_list(void)
{
	if (!policies_valid || !policies_complete)
	{
		policies_complete = false;
		load_policies();
		policies_complete = true;
	}
	return keyed_workflows;
}

/* Is the workflow keyed?  A cached lookup on every call of the gate. */
bool
ig_keyed_workflows_has(const char *workflow)
{
	ListCell   *lc;

	foreach(lc, ig_keyed_workflows_list())
		if (strcmp((const char *) lfirst(lc), workflow) == 0)
			return true;
	return false;
}
