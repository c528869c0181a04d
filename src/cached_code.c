/*-------------------------------------------------------------------------
 *
 * cached_code.c
 *	  Find the code attached to one of the extension's tables that a
 *	  per-backend cache keeps parsed under a search_path the caller chose.
 *
 * The gate pins search_path before code attached to its tables runs with
 * the owner's rights (call.c), but a pin cannot reach what the backend
 * parsed before the call.  PostgreSQL inlines a LANGUAGE sql function
 * whose body is a string when it simplifies an expression, parsing that
 * body under the search_path of the moment, and keeps the result in caches
 * that live as long as the backend:
 *
 *	- an index's expressions and predicate, in the index's relcache entry
 *	  (RelationGetIndexExpressions(), RelationGetIndexPredicate()), which
 *	  the planner fills for any query on the table, even one refused at
 *	  execution;
 *	- a domain's CHECK constraints, in the type cache
 *	  (load_domaintype_info()), filled by any cast to the domain;
 *	- the partition key expressions of a partitioned table, in its relcache
 *	  entry (RelationBuildPartitionKey()), from which the partition
 *	  constraint of a partition is derived.
 *
 * A caller who plans a query first under a search_path that puts its own
 * split_part() before pg_catalog's would have its function run as the
 * owner at the next write.  The other places where attached code is
 * parsed do so per statement, under the pinned path: CHECK constraints and
 * generated columns (ExecRelCheck(), ExecComputeStoredGenerated()),
 * trigger WHEN conditions (TriggerEnabled()), and defaults and row
 * security policies, which the gate's own plans carry and the plan cache
 * plans again whenever the search_path differs from the one they were
 * planned under.  PL/pgSQL and every other language resolve names when the
 * statement runs, and a LANGUAGE sql function with its own SET search_path
 * or a BEGIN ATOMIC body is never parsed under the caller's path.
 *
 * So the gate refuses to write a table whose cached code calls such a
 * function (or reaches one through BEGIN ATOMIC bodies, however deep),
 * naming the object and the function, rather than run it: a DBA fixes it
 * with ALTER FUNCTION ... SET search_path, or by writing the body as BEGIN
 * ATOMIC.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_language.h"
#include "catalog/pg_partitioned_table.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "cached_code.h"

/*
 * What the walk carries: the BEGIN ATOMIC functions whose bodies it has
 * entered, and the offending function once found.  A body is entered once:
 * a function that many others call costs one walk, and a cycle (a body
 * replaced later to call its caller) ends.  There is no depth past which
 * the walk gives up, since a function it did not reach would be let
 * through; a chain deep enough to exhaust the stack is refused by
 * check_stack_depth(), and so is never run either.
 */
typedef struct Walk
{
	List	   *entered;
	Oid			found;
} Walk;

static bool walk_node(Node *node, Walk *w);

/*
 * Is fn parsed under the search_path of whoever inlines it?  A LANGUAGE
 * sql function whose body is a string, with no setting of its own (a SET
 * clause keeps PostgreSQL from inlining it) and not SECURITY DEFINER, is.
 * A BEGIN ATOMIC body was parsed when the function was made: the
 * functions it calls are checked in turn.
 */
static bool
function_depends_on_path(Oid fn, Walk *w)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		depends = false;
	bool		isnull;
	Datum		body;

	check_stack_depth();
	if (list_member_oid(w->entered, fn))
		return false;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prolang != SQLlanguageId || proc->prosecdef)
	{
		ReleaseSysCache(tup);
		return false;
	}
	(void) SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proconfig, &isnull);
	if (!isnull)
	{
		ReleaseSysCache(tup);
		return false;
	}
	body = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosqlbody, &isnull);
	if (isnull)
	{
		/* a string body: this is the function to name */
		w->found = fn;
		depends = true;
	}
	else
	{
		/* a BEGIN ATOMIC body: the walk names what it calls, if anything */
		w->entered = lappend_oid(w->entered, fn);
		depends = walk_node(stringToNode(TextDatumGetCString(body)), w);
	}
	ReleaseSysCache(tup);
	return depends;
}

/* check_functions_in_node() callback: true at a function parsed late. */
static bool
check_function(Oid fn, void *context)
{
	return function_depends_on_path(fn, (Walk *) context);
}

/* Walk an expression, a query or a list of either for such a function. */
static bool
walk_node(Node *node, Walk *w)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, walk_node, w, 0);
	if (check_functions_in_node(node, check_function, w))
		return true;
	return expression_tree_walker(node, walk_node, w);
}

/*
 * The function a stored expression (its nodeToString form) reaches that
 * is parsed under the caller's path, or InvalidOid.
 */
static Oid
stored_expr_function(Datum stored)
{
	Walk		w = {NIL, InvalidOid};
	bool		depends;

	depends = walk_node(stringToNode(TextDatumGetCString(stored)), &w);
	list_free(w.entered);
	return depends ? w.found : InvalidOid;
}

/* Describe what was found: the object, and the function it calls. */
static char *
describe(const char *object, Oid fn)
{
	return psprintf("%s calls %s", object,
					format_procedure_qualified(fn));
}

/* An index's expressions and predicate. */
static char *
index_code(Oid indexoid)
{
	HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	char	   *found = NULL;
	Oid			fn = InvalidOid;
	bool		isnull;
	Datum		d;

	if (!HeapTupleIsValid(tup))
		return NULL;
	d = SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indexprs, &isnull);
	if (!isnull)
		fn = stored_expr_function(d);
	if (!OidIsValid(fn))
	{
		d = SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indpred, &isnull);
		if (!isnull)
			fn = stored_expr_function(d);
	}
	if (OidIsValid(fn))
		found = describe(psprintf("index \"%s\"", get_rel_name(indexoid)), fn);
	ReleaseSysCache(tup);
	return found;
}

/* The type a domain is made from, or InvalidOid for any other type. */
static Oid
domain_base(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	Oid			base = InvalidOid;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	if (((Form_pg_type) GETSTRUCT(tup))->typtype == TYPTYPE_DOMAIN)
		base = ((Form_pg_type) GETSTRUCT(tup))->typbasetype;
	ReleaseSysCache(tup);
	return base;
}

/*
 * A domain's CHECK constraints, and those of the domains it is made
 * from.
 */
static char *
domain_code(Oid typid)
{
	char	   *found = NULL;
	Oid			base;

	for (; found == NULL && OidIsValid(base = domain_base(typid)); typid = base)
	{
		Relation	rel = table_open(ConstraintRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(typid));
		scan = systable_beginscan(rel, ConstraintTypidIndexId, true, NULL, 1, &key);
		while (found == NULL && (tup = systable_getnext(scan)) != NULL)
		{
			bool		isnull;
			Datum		bin = heap_getattr(tup, Anum_pg_constraint_conbin,
										   RelationGetDescr(rel), &isnull);
			Oid			fn;

			if (isnull)
				continue;
			fn = stored_expr_function(bin);
			if (OidIsValid(fn))
				found = describe(psprintf("CHECK constraint \"%s\" of domain %s",
										  NameStr(((Form_pg_constraint) GETSTRUCT(tup))->conname),
										  format_type_be_qualified(typid)), fn);
		}
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	return found;
}

/* The partition key expressions of the tables a partition belongs to. */
static char *
partition_code(Relation rel)
{
	List	   *ancestors;
	ListCell   *lc;

	if (!rel->rd_rel->relispartition)
		return NULL;
	ancestors = get_partition_ancestors(RelationGetRelid(rel));
	foreach(lc, ancestors)
	{
		HeapTuple	tup = SearchSysCache1(PARTRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		isnull;
		Datum		d;
		Oid			fn = InvalidOid;

		if (!HeapTupleIsValid(tup))
			continue;
		d = SysCacheGetAttr(PARTRELID, tup, Anum_pg_partitioned_table_partexprs, &isnull);
		if (!isnull)
			fn = stored_expr_function(d);
		ReleaseSysCache(tup);
		if (OidIsValid(fn))
			return describe(psprintf("the partition key of %s",
									 get_rel_name(lfirst_oid(lc))), fn);
	}
	return NULL;
}

/*
 * The first code attached to rel that a per-backend cache holds parsed
 * under a search_path the caller may have chosen, described ("index
 * \"claims_by_prefix\" calls public.key_prefix(text)"), or NULL.
 */
char *
ig_cached_code_find(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	char	   *found = NULL;

	foreach(lc, indexes)
	{
		found = index_code(lfirst_oid(lc));
		if (found != NULL)
			break;
	}
	list_free(indexes);
	for (int i = 0; found == NULL && i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped)
			found = domain_code(att->atttypid);
	}
	if (found == NULL)
		found = partition_code(rel);
	return found;
}
