/*-------------------------------------------------------------------------
 *
 * citus_guard.c
 *	  Keep Citus from delegating a gate call whose key is NULL.
 *
 * distribute() registers each single-key API function as a Citus
 * distributed function on its key.  For a statement of the form
 * SELECT f(...) or SELECT ... FROM f(...), Citus's planner
 * (TryToDelegateFunctionCall, after standard_planner has folded the
 * arguments) hashes the key argument's Const to find the shard without
 * looking at constisnull (ShardPlacementForFunctionColocatedWithDistTable
 * in function_call_delegation.c, Citus 12.1 and 14.0): a NULL key -- a
 * literal, a bound parameter of a custom plan, an inlined SQL function's
 * argument, anything that folds to NULL -- makes hashtext() read through a
 * NULL pointer, and the backend dies with SIGSEGV.  The function itself is
 * never called, so its own checks cannot help.
 *
 * The guard runs inside standard_planner, at the final upper-relation
 * stage of the statement's top query, where the tree is the folded one
 * Citus reads next.  When that tree is a call Citus would delegate, to
 * one of the gate's distributed functions, with a NULL constant as the
 * distribution argument, it gives the tree a WHERE true: Citus does not
 * delegate a query with a WHERE clause, so the call runs on the node that
 * received it, where the function raises exactly what it raises on one
 * server (its own checks, in its own order).  The plan, made from the
 * paths already, is unchanged.  Nothing happens where the gate is not
 * distributed.  Per planned statement: a few pointer tests; a catalog
 * lookup only for a single-call statement with a NULL first or sixth
 * argument.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "citus_guard.h"
#include "shape.h"

static create_upper_paths_hook_type prev_upper_paths_hook = NULL;

/*
 * The one function call of a statement Citus may delegate (see Citus's
 * TryToDelegateFunctionCall): a SELECT without WHERE, whose FROM is empty
 * or that one function, and whose target list is that one call; or NULL.
 */
static Node *
guard_candidate(Query *parse)
{
	FromExpr   *jt = parse->jointree;
	Node	   *from = NULL;
	Node	   *target = NULL;

	if (parse->commandType != CMD_SELECT || jt == NULL || jt->quals != NULL)
		return NULL;
	if (list_length(jt->fromlist) > 1)
		return NULL;
	if (list_length(jt->fromlist) == 1)
	{
		RangeTblRef *ref = (RangeTblRef *) linitial(jt->fromlist);
		RangeTblEntry *rte;

		if (!IsA(ref, RangeTblRef))
			return NULL;
		rte = rt_fetch(ref->rtindex, parse->rtable);
		if (rte->rtekind == RTE_FUNCTION)
		{
			if (list_length(rte->functions) != 1)
				return NULL;
			from = ((RangeTblFunction *) linitial(rte->functions))->funcexpr;
		}
		else if (rte->rtekind != RTE_RESULT)
			return NULL;
	}
	if (list_length(parse->targetList) == 1)
		target = (Node *) ((TargetEntry *) linitial(parse->targetList))->expr;

	if (from != NULL && target != NULL && IsA(target, FuncExpr))
		return NULL;			/* SELECT f() FROM g(): Citus does not delegate */
	return from != NULL ? from : target;
}

/*
 * Which argument of funcid distribute() registered as its distribution
 * argument, if funcid is one of the gate's functions; -1 if not.
 */
static int
guard_dist_arg(Oid funcid)
{
	static const char *const keyed[] = {
		"idem_claim", "idem_claim_ex", "idem_heartbeat", "idem_complete",
		"idem_fail", "idem_resolve", "idem_resolve_1_1", "idem_release",
		"idem_status"
	};
	HeapTuple	tup;
	Datum		d;
	bool		isnull;
	int			result = -1;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return -1;
	d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId && !isnull &&
		strcmp(TextDatumGetCString(d), "$libdir/idem_gate") == 0)
	{
		char	   *src;

		d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		src = isnull ? "" : TextDatumGetCString(d);
		for (int i = 0; i < (int) lengthof(keyed); i++)
			if (strcmp(src, keyed[i]) == 0)
				result = 0;
		if (strcmp(src, "idem_claim_many_group") == 0)
			result = 5;			/* anchor */
	}
	ReleaseSysCache(tup);
	return result;
}

/* Is argument argno of args a NULL constant, as Citus would read it? */
static bool
guard_null_const(List *args, int argno)
{
	Node	   *arg;

	if (argno >= list_length(args))
		return false;
	arg = strip_implicit_coercions((Node *) list_nth(args, argno));
	return IsA(arg, Const) && ((Const *) arg)->constisnull;
}

/* Would Citus hash a NULL distribution argument of this folded call? */
static bool
guard_null_dist_arg(Node *expr)
{
	FuncExpr   *f;
	int			argno;

	if (expr == NULL || !IsA(expr, FuncExpr))
		return false;
	f = (FuncExpr *) expr;
	/* cheap first: only a call with a NULL first or sixth argument goes on */
	if (!guard_null_const(f->args, 0) && !guard_null_const(f->args, 5))
		return false;
	argno = guard_dist_arg(f->funcid);
	return argno >= 0 && guard_null_const(f->args, argno) &&
		ig_shape_is_citus();
}

static void
guard_upper_paths(PlannerInfo *root, UpperRelationKind stage,
				  RelOptInfo *input_rel, RelOptInfo *output_rel, void *extra)
{
	if (prev_upper_paths_hook)
		prev_upper_paths_hook(root, stage, input_rel, output_rel, extra);

	/* the statement's top query: the tree Citus reads after standard_planner */
	if (stage == UPPERREL_FINAL && root->parent_root == NULL &&
		guard_null_dist_arg(guard_candidate(root->parse)))
		root->parse->jointree->quals = (Node *) makeBoolConst(true, false);
}

/* Called from _PG_init(), preloaded or not, before or after Citus. */
void
ig_citus_guard_install(void)
{
	prev_upper_paths_hook = create_upper_paths_hook;
	create_upper_paths_hook = guard_upper_paths;
}
