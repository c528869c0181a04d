/*-------------------------------------------------------------------------
 *
 * shape.c
 *	  What idem_gate knows of each table it reads or writes, decided once
 *	  per relcache change of the table: what code somebody attached to it
 *	  runs when the gate touches it, and, for idem_gate.claims, whether it
 *	  is exactly as the extension made it, so that the direct writes apply.
 *
 * The gate's functions and its janitor act with the rights of the
 * extension's owner.  Whatever a DBA attached to one of the extension's
 * tables then runs with those rights too, and must not resolve a name the
 * caller controls.  This file is the one place that looks at a table and
 * says what is attached to it; call.c guards a call accordingly (search_path
 * pinned, sessions with temporary objects refused) and the store uses the
 * direct writes only on a table that holds nothing it would not enforce.
 *
 * "Code" is, on any of the tables: a trigger whose function is not
 * idem_gate's; a rule; a row security policy whose expressions call code;
 * a CHECK, column default or generated column that calls code; a column
 * whose type is not PostgreSQL's own or idem_gate's (a domain's CHECKs and
 * a type's functions run on every write); an index whose expressions or
 * predicate call code, or whose operator class is not PostgreSQL's own.
 * An expression calls code when it calls a function that is neither in
 * pg_catalog nor idem_gate's, a pg_catalog function that runs a query it
 * is given as text, or holds a subquery.  A child table is not code: the
 * gate's statements name ONLY the extension's table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_sequence.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "rewrite/prs2lock.h"
#include "rewrite/rewriteDefine.h"
#include "rewrite/rowsecurity.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "cached_code.h"
#include "citus.h"
#include "compat.h"
#include "shape.h"

IgShape		ig_shape;

static IgTableShape table_shapes[IG_NUM_TABLES];
static MemoryContext table_cxt[IG_NUM_TABLES];

static const char *const table_names[IG_NUM_TABLES] = {
	"claims", "audit", "janitor_watermarks", "policies", "workflow_acl"
};

/* ig_shape_refresh_domains() is calling the constraint callbacks. */
static bool refreshing_domains = false;

/* Whether row security applies to the user last asked about, per table. */
static Oid	rls_user[IG_NUM_TABLES];
static bool rls_known[IG_NUM_TABLES];
static bool rls_answer[IG_NUM_TABLES];

static const char *const col_names[IG_NUM_COLS] = {
	"workflow", "key", "state", "attempt", "token", "execution_id",
	"fingerprint", "result", "last_error", "created_at", "claimed_at",
	"updated_at", "completed_at", "alerted_token", "token_issued",
	"payload", "payload_dropped_bytes"
};

/* Each column's type as the extension makes it; InvalidOid: the state enum */
static const Oid col_types[IG_NUM_COLS] = {
	TEXTOID, TEXTOID, InvalidOid, INT4OID, INT8OID, TEXTOID,
	TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BOOLOID,
	JSONBOID, INT4OID
};

static const bool col_not_null[IG_NUM_COLS] = {
	true, true, true, true, true, false, false, false, false, true, true,
	true, false, false, true, false, false
};

/*
 * The CHECK constraints of idem_gate.claims as the install script writes
 * them.  A constraint is the extension's when its expression is this one,
 * whatever its name: one a DBA redefined under the same name is not.
 */
static const char *const claims_checks[] = {
	"workflow OPERATOR(pg_catalog.<>) ''",
	"key OPERATOR(pg_catalog.<>) ''",
	"attempt OPERATOR(pg_catalog.>=) 1",
	"token OPERATOR(pg_catalog.>) 0",
	"(state OPERATOR(pg_catalog.=) 'completed'::idem_gate.state)"
	" OPERATOR(pg_catalog.=) (completed_at IS NOT NULL)",
	"completed_at IS NULL OR completed_at OPERATOR(pg_catalog.=) updated_at",
	"result IS NULL OR state OPERATOR(pg_catalog.=) 'completed'::idem_gate.state",
	"created_at OPERATOR(pg_catalog.<=) claimed_at"
	" AND claimed_at OPERATOR(pg_catalog.<=) updated_at",
	/* 1.2, with the payload column */
	"payload IS NULL OR state OPERATOR(pg_catalog.<>) 'completed'::idem_gate.state"
};

/* The CHECKs of a table without the payload column (1.0, 1.1). */
#define IG_CLAIMS_CHECKS_1_1	8

/*
 * pg_catalog functions that run a query given to them as text: they
 * resolve its names at run time, so they count as code.
 */
static const char *const query_functions[] = {
	"query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
	"cursor_to_xml", "cursor_to_xmlschema", "table_to_xml",
	"table_to_xmlschema", "table_to_xml_and_xmlschema", "schema_to_xml",
	"schema_to_xmlschema", "schema_to_xml_and_xmlschema", "database_to_xml",
	"database_to_xmlschema", "database_to_xml_and_xmlschema"
};

/*
 * A table's relcache entry changed (ALTER TABLE, CREATE TRIGGER, CREATE
 * POLICY, CREATE INDEX, a child table, ALTER EXTENSION UPDATE, DROP and
 * CREATE EXTENSION): decide its shape again.  The token sequence counts as
 * part of idem_gate.claims.
 */
static void
shape_relcache_cb(Datum arg, Oid relid)
{
	for (int i = 0; i < IG_NUM_TABLES; i++)
	{
		if (relid == InvalidOid || relid == table_shapes[i].relid)
		{
			table_shapes[i].valid = false;
			rls_known[i] = false;
		}
	}
	if (relid == InvalidOid || relid == ig_shape.relid ||
		relid == ig_shape.token_seq)
		ig_shape.valid = false;
}

/*
 * A function or a constraint changed (CREATE OR REPLACE FUNCTION, ALTER
 * FUNCTION, ALTER DOMAIN ... ADD CONSTRAINT): code attached to a table
 * may now call it differently, and PostgreSQL does not invalidate the
 * tables that use it.  Decide every table's shape again.
 */
static void
shape_code_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	if (refreshing_domains)
		return;
	for (int i = 0; i < IG_NUM_TABLES; i++)
		table_shapes[i].valid = false;
	ig_shape.valid = false;
}

/*
 * Make this backend plan every domain's CHECK constraints again at their
 * next use.  The type cache keeps them planned as the first use in the
 * session left them, and planning inlines LANGUAGE sql functions under the
 * search_path of that moment: a caller could have cast a value to a
 * domain under its own path before its call.  Called once the gate has
 * pinned search_path, before code attached to its tables runs; the type
 * cache's own invalidation callback does the work (PostgreSQL sends the
 * same when a constraint changes), and the shapes, which did not change,
 * are kept.
 */
void
ig_shape_refresh_domains(void)
{
	refreshing_domains = true;
	PG_TRY();
	{
		CallSyscacheCallbacks(CONSTROID, 0);
	}
	PG_FINALLY();
	{
		refreshing_domains = false;
	}
	PG_END_TRY();
}

/* A role's attributes or memberships changed: ask row security again. */
static void
shape_role_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	for (int i = 0; i < IG_NUM_TABLES; i++)
		rls_known[i] = false;
}

/* Register the invalidation callbacks, once per backend. */
static void
shape_register(void)
{
	static bool registered = false;

	if (registered)
		return;
	CacheRegisterRelcacheCallback(shape_relcache_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, shape_role_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, shape_role_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, shape_code_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(CONSTROID, shape_code_cb, (Datum) 0);
	for (int i = 0; i < IG_NUM_TABLES; i++)
		table_cxt[i] = AllocSetContextCreate(TopMemoryContext,
											 "idem_gate table shape",
											 ALLOCSET_SMALL_SIZES);
	registered = true;
}

/* The name of a table, for messages: idem_gate.<name>. */
const char *
ig_shape_table_name(IgTable table)
{
	return psprintf("idem_gate.%s", table_names[table]);
}

/*
 * Is a function one whose execution resolves nothing a caller controls?
 * PostgreSQL's own functions (but those that run a query given as text)
 * and idem_gate's are; anything else a DBA may have written is not.
 */
static bool type_is_ours(Oid typid);

static bool
function_is_ours(Oid fn)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		ours = false;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->pronamespace == PG_CATALOG_NAMESPACE)
	{
		ours = true;
		for (int i = 0; i < lengthof(query_functions); i++)
			if (strcmp(NameStr(proc->proname), query_functions[i]) == 0)
				ours = false;
	}
	ReleaseSysCache(tup);
	if (!ours)
	{
		Oid			ext = get_extension_oid("idem_gate", true);

		ours = OidIsValid(ext) &&
			getExtensionOfObject(ProcedureRelationId, fn) == ext;
	}
	return ours;
}

/* check_functions_in_node() callback: true stops at a function of others. */
static bool
function_is_others(Oid fn, void *context)
{
	return !function_is_ours(fn);
}

/*
 * Walk an expression for code: a function of others, a subquery, or a
 * cast to a domain of somebody else's (its CHECKs run).
 */
static bool
expr_code_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, Query))
		return true;
	if (IsA(node, CoerceToDomain) &&
		!type_is_ours(((CoerceToDomain *) node)->resulttype))
		return true;
	if (check_functions_in_node(node, function_is_others, context))
		return true;
	return expression_tree_walker(node, expr_code_walker, context);
}

/* Does a stored expression (nodeToString form, or a tree) call code? */
static bool
expr_runs_code(Node *expr)
{
	return expr_code_walker(expr, NULL);
}

/* Is a type PostgreSQL's own or idem_gate's (not a domain of somebody's)? */
static bool
type_is_ours(Oid typid)
{
	Oid			ext = get_extension_oid("idem_gate", true);
	HeapTuple	tup;
	bool		ours;

	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		return false;
	ours = (((Form_pg_type) GETSTRUCT(tup))->typnamespace == PG_CATALOG_NAMESPACE);
	ReleaseSysCache(tup);
	return ours || (OidIsValid(ext) &&
					getExtensionOfObject(TypeRelationId, typid) == ext);
}

/*
 * Does an index run code when a row is written: expressions or a
 * predicate that call code, or an operator class that is not
 * PostgreSQL's own?  *plain is set when it has no expressions, checks no
 * exclusion and is not deferred, so that the direct writes maintain it
 * exactly as an INSERT or UPDATE would.  A predicate keeps it plain: the
 * executor's index maintenance, which the direct writes call, evaluates
 * it for each row as an INSERT or UPDATE does, and one that calls code of
 * others is refused here as code (the inbox's own index, claims_inbox_since,
 * is partial on the claim's state).
 */
static bool
index_runs_code(Oid indexoid, bool *plain)
{
	HeapTuple	tup;
	Form_pg_index index;
	bool		isnull;
	bool		code = false;
	Datum		d;

	*plain = false;
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(tup))
		return true;
	index = (Form_pg_index) GETSTRUCT(tup);
	*plain = index->indimmediate && !index->indisexclusion &&
		heap_attisnull(tup, Anum_pg_index_indexprs, NULL);

	d = SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indexprs, &isnull);
	if (!isnull && expr_runs_code(stringToNode(TextDatumGetCString(d))))
		code = true;
	d = SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indpred, &isnull);
	if (!isnull && expr_runs_code(stringToNode(TextDatumGetCString(d))))
		code = true;
	d = SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indclass, &isnull);
	if (!isnull)
	{
		oidvector  *classes = (oidvector *) DatumGetPointer(d);

		for (int i = 0; i < classes->dim1 && !code; i++)
		{
			HeapTuple	ctup = SearchSysCache1(CLAOID,
											   ObjectIdGetDatum(classes->values[i]));

			if (!HeapTupleIsValid(ctup))
				continue;
			if (((Form_pg_opclass) GETSTRUCT(ctup))->opcnamespace != PG_CATALOG_NAMESPACE)
				code = true;
			ReleaseSysCache(ctup);
		}
	}
	ReleaseSysCache(tup);
	return code;
}

/* The name of a rule, by a lookup of pg_rewrite. */
static char *
rule_name(Oid ruleid)
{
	Relation	rel = table_open(RewriteRelationId, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *name = pstrdup("?");

	ScanKeyInit(&skey, Anum_pg_rewrite_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ruleid));
	scan = systable_beginscan(rel, RewriteOidIndexId, true, NULL, 1, &skey);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		name = pstrdup(NameStr(((Form_pg_rewrite) GETSTRUCT(tup))->rulename));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return name;
}

/* Record the first code found on a table, described for messages. */
#define IG_FOUND(field, ...) \
	do { \
		if (s->field == NULL) \
			s->field = psprintf(__VA_ARGS__); \
	} while (0)

/*
 * Find what code a table runs: on its writes (triggers, rules, CHECKs,
 * defaults, column types, indexes) and, where row security applies, in
 * its policies.  The triggers are walked in a copy: an invalidation taken
 * in by a catalog read below rebuilds rel's list and frees the old one.
 */
static void
table_find_code(Relation rel, IgTableShape *s)
{
	TupleDesc	desc = RelationGetDescr(rel);
	TriggerDesc *trigdesc = CopyTriggerDesc(rel->trigdesc);
	Oid			ours = get_extension_oid("idem_gate", true);
	List	   *indexes;
	ListCell   *lc;

	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *tg = &trigdesc->triggers[i];

		if (tg->tgenabled == TRIGGER_DISABLED)
			continue;
		if (!(TRIGGER_FOR_INSERT(tg->tgtype) || TRIGGER_FOR_UPDATE(tg->tgtype) ||
			  TRIGGER_FOR_DELETE(tg->tgtype)))
			continue;			/* TRUNCATE only: the gate never truncates */
		if (getExtensionOfObject(ProcedureRelationId, tg->tgfoid) != ours)
			IG_FOUND(write_code, "trigger \"%s\"", tg->tgname);
	}
	if (rel->rd_rules != NULL)
	{
		for (int i = 0; i < rel->rd_rules->numLocks && s->rule == NULL; i++)
			if (rel->rd_rules->rules[i]->enabled != RULE_DISABLED)
				s->rule = rule_name(rel->rd_rules->rules[i]->ruleId);
		if (s->rule != NULL)
			IG_FOUND(write_code, "rule \"%s\"", s->rule);
	}

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (!type_is_ours(att->atttypid))
			IG_FOUND(write_code, "column \"%s\" of type %s", NameStr(att->attname),
					 format_type_be(att->atttypid));
	}
	if (desc->constr != NULL)
	{
		for (int i = 0; i < desc->constr->num_defval; i++)
			if (expr_runs_code(stringToNode(desc->constr->defval[i].adbin)))
				IG_FOUND(write_code, "the default of column \"%s\"",
						 NameStr(TupleDescAttr(desc, desc->constr->defval[i].adnum - 1)->attname));
		for (int i = 0; i < desc->constr->num_check; i++)
			if (expr_runs_code(stringToNode(desc->constr->check[i].ccbin)))
				IG_FOUND(write_code, "CHECK constraint \"%s\"",
						 desc->constr->check[i].ccname);
	}

	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		bool		plain;

		if (index_runs_code(lfirst_oid(lc), &plain))
			IG_FOUND(write_code, "index \"%s\"", get_rel_name(lfirst_oid(lc)));
	}
	list_free(indexes);

	if (rel->rd_rsdesc != NULL)
	{
		foreach(lc, rel->rd_rsdesc->policies)
		{
			RowSecurityPolicy *p = lfirst(lc);

			if (expr_runs_code((Node *) p->qual) ||
				expr_runs_code((Node *) p->with_check_qual))
				IG_FOUND(policy_code, "policy \"%s\"", p->policy_name);
		}
	}
}
#undef IG_FOUND

/* Decide one table's shape: where it is, who owns it, what it runs. */
static void
table_load(IgTable table)
{
	IgTableShape *s = &table_shapes[table];
	MemoryContext old;
	Oid			nsp;
	Relation	rel;

	shape_register();
	MemoryContextReset(table_cxt[table]);
	old = MemoryContextSwitchTo(table_cxt[table]);
	memset(s, 0, sizeof(*s));
	s->valid = true;			/* an invalidation from here on counts */
	rls_known[table] = false;
	nsp = get_namespace_oid("idem_gate", false);
	s->relid = get_relname_relid(table_names[table], nsp);
	if (OidIsValid(s->relid))
	{
		rel = table_open(s->relid, AccessShareLock);
		s->owner = rel->rd_rel->relowner;
		s->rls = rel->rd_rel->relrowsecurity;
		s->force_rls = rel->rd_rel->relforcerowsecurity;
		table_find_code(rel, s);
		s->cached_code = ig_cached_code_find(rel);
		table_close(rel, AccessShareLock);
	}
	s->complete = true;
	MemoryContextSwitchTo(old);
}

/* A table's shape, decided again if it changed since. */
const IgTableShape *
ig_shape_table(IgTable table)
{
	if (!table_shapes[table].valid || !table_shapes[table].complete)
		table_load(table);
	return &table_shapes[table];
}

/*
 * Does row security apply to the current user on the table, so that its
 * policies filter what the gate reads and writes there?  As
 * check_enable_rls() decides it (superusers, roles with BYPASSRLS and the
 * owner of a table without FORCE are exempt), remembered for the last user
 * asked about until a role or the table changes.
 */
bool
ig_shape_rls_applies(IgTable table)
{
	const IgTableShape *s = ig_shape_table(table);
	Oid			user = GetUserId();

	if (!s->rls)
		return false;
	if (!rls_known[table] || rls_user[table] != user)
	{
		rls_answer[table] = (check_enable_rls(s->relid, InvalidOid, true) == RLS_ENABLED);
		rls_user[table] = user;
		rls_known[table] = true;
	}
	return rls_answer[table];
}

/*
 * The expression of a CHECK constraint of idem_gate.claims as the
 * extension writes it, cooked against the table as PostgreSQL cooks a
 * constraint, to compare with a stored one (locations aside).
 */
static Node *
cook_check(Relation rel, const char *src)
{
	List	   *raw = raw_parser(psprintf("SELECT %s", src), RAW_PARSE_DEFAULT);
	SelectStmt *select = (SelectStmt *) ((RawStmt *) linitial(raw))->stmt;
	Node	   *expr = ((ResTarget *) linitial(select->targetList))->val;
	ParseState *pstate = make_parsestate(NULL);
	ParseNamespaceItem *nsitem;

	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
										   NULL, false, true);
	addNSItemToQuery(pstate, nsitem, true, true, true);
	expr = transformExpr(pstate, expr, EXPR_KIND_CHECK_CONSTRAINT);
	expr = coerce_to_boolean(pstate, expr, "CHECK");
	assign_expr_collations(pstate, expr);
	free_parsestate(pstate);
	return expr;
}

/*
 * Are the CHECK constraints of idem_gate.claims exactly the extension's,
 * each once, by definition?
 */
static bool
claims_checks_ours(Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	int			n = constr ? constr->num_check : 0;
	int			ours = ig_shape.has_payload ? lengthof(claims_checks) : IG_CLAIMS_CHECKS_1_1;
	bool		seen[lengthof(claims_checks)] = {false};

	if (n != ours)
		return false;
	for (int i = 0; i < n; i++)
	{
		Node	   *stored = stringToNode(constr->check[i].ccbin);
		bool		found = false;

		for (int j = 0; j < ours && !found; j++)
		{
			if (!seen[j] && equal(stored, cook_check(rel, claims_checks[j])))
				found = seen[j] = true;
		}
		if (!found)
			return false;
	}
	return true;
}

/*
 * Decide the direct path for idem_gate.claims: does the table hold
 * anything the direct writes would not do as an INSERT or UPDATE does?
 * The common shape (code, rules) is decided already.
 */
static void
claims_decide(Relation rel, Oid state_type)
{
	const IgTableShape *s = ig_shape_table(IG_TABLE_CLAIMS);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes;
	ListCell   *lc;

	ig_shape.direct = true;
	ig_shape.why = NULL;

#define IG_NOT_DIRECT(reason) \
	do { \
		if (ig_shape.why == NULL) \
			ig_shape.why = (reason); \
		ig_shape.direct = false; \
	} while (0)

	if (rel->trigdesc != NULL)
	{
		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *tg = &rel->trigdesc->triggers[i];

			if (tg->tgenabled != TRIGGER_DISABLED &&
				(TRIGGER_FOR_INSERT(tg->tgtype) || TRIGGER_FOR_UPDATE(tg->tgtype)))
				IG_NOT_DIRECT("a trigger fires on its inserts or updates");
		}
	}
	if (s->rule != NULL)
		IG_NOT_DIRECT("it has a rule");
	if (rel->rd_rel->relispartition)
		IG_NOT_DIRECT("it is a partition");
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		IG_NOT_DIRECT("its table access method is not heap");

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			col;

		if (att->attisdropped)
			continue;
		for (col = 0; col < IG_NUM_COLS; col++)
			if (ig_shape.att[col] == att->attnum)
				break;
		if (col == IG_NUM_COLS)
		{
			IG_NOT_DIRECT("it has a column the extension did not make");
			continue;
		}
		if (att->atttypid != (OidIsValid(col_types[col]) ? col_types[col] : state_type))
			IG_NOT_DIRECT("a column's type was changed");
		if (att->attnotnull != col_not_null[col])
			IG_NOT_DIRECT("a column's NOT NULL was changed");
		if (att->attgenerated != '\0')
			IG_NOT_DIRECT("a column is generated");
		if (att->atthasdef && col != IG_COL_TOKEN_ISSUED)
			IG_NOT_DIRECT("a column has a default");
	}
	if (!claims_checks_ours(rel))
		IG_NOT_DIRECT("its CHECK constraints are not the extension's");

	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		bool		plain;

		if (index_runs_code(lfirst_oid(lc), &plain) || !plain)
			IG_NOT_DIRECT("it has an index with expressions, a predicate calling code of others, an exclusion, a deferred check or an operator class of somebody else's");
	}
	list_free(indexes);
#undef IG_NOT_DIRECT
}

/*
 * Refuse every write when the token sequence could hand out a token
 * twice: a cycling sequence, or one that counts down.
 */
static bool
token_seq_repeats(Oid seqid)
{
	HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqid));
	bool		repeats;

	if (!HeapTupleIsValid(tup))
		return false;
	repeats = ((Form_pg_sequence) GETSTRUCT(tup))->seqcycle ||
		((Form_pg_sequence) GETSTRUCT(tup))->seqincrement <= 0;
	ReleaseSysCache(tup);
	return repeats;
}

/*
 * Learn the shape of idem_gate.claims: its OID, its columns' numbers, the
 * token sequence, and whether the direct path may write it.  Done again
 * after any relcache invalidation of the table or the sequence, and after
 * a load that an error (a lock timeout, a cancel) cut short.  The epoch
 * moves when what the SQL path's statements depend on changes (the table
 * itself, its 1.1 column, Citus), so that it prepares them anew.
 */
static void
shape_load(void)
{
	Oid			nsp;
	Oid			relid;
	Relation	rel;
	const IgTableShape *s;
	Oid			old_relid;
	bool		had_token_issued;
	bool		had_payload;
	bool		had_citus;
	bool		was_complete;

	shape_register();
	nsp = get_namespace_oid("idem_gate", false);
	relid = get_relname_relid("claims", nsp);
	if (!OidIsValid(relid))
		elog(ERROR, "relation idem_gate.claims does not exist");

	was_complete = ig_shape.complete;
	ig_shape.complete = false;
	ig_shape.valid = true;		/* an invalidation from here on counts */
	old_relid = ig_shape.relid;
	had_token_issued = ig_shape.has_token_issued;
	had_payload = ig_shape.has_payload;
	had_citus = ig_shape.citus;
	ig_shape.relid = relid;
	for (int i = 0; i < IG_NUM_COLS; i++)
	{
		ig_shape.att[i] = get_attnum(relid, col_names[i]);
		if (ig_shape.att[i] == InvalidAttrNumber && i < IG_COL_TOKEN_ISSUED)
			elog(ERROR, "idem_gate.claims has no column \"%s\"", col_names[i]);
	}
	ig_shape.has_token_issued = (ig_shape.att[IG_COL_TOKEN_ISSUED] != InvalidAttrNumber);
	ig_shape.has_payload = (ig_shape.att[IG_COL_PAYLOAD] != InvalidAttrNumber &&
							ig_shape.att[IG_COL_PAYLOAD_DROPPED] != InvalidAttrNumber);
	ig_shape.token_seq = get_relname_relid("token_seq", nsp);
	if (!OidIsValid(ig_shape.token_seq))
		elog(ERROR, "sequence idem_gate.token_seq does not exist");
	ig_shape.state_type = get_atttype(relid, ig_shape.att[IG_COL_STATE]);

	s = ig_shape_table(IG_TABLE_CLAIMS);
	rel = table_open(relid, AccessShareLock);
	ig_shape.pk_index = ig_compat_primary_key(rel);
	claims_decide(rel, ig_shape.state_type);
	table_close(rel, AccessShareLock);
	ig_shape.refuse = IG_REFUSE_NONE;
	if (s->rule != NULL)
		ig_shape.refuse = IG_REFUSE_RULE;
	else if (token_seq_repeats(ig_shape.token_seq))
		ig_shape.refuse = IG_REFUSE_SEQUENCE;
	ig_shape.citus = ig_citus_table(relid, &ig_shape.citus_group);
	ig_shape.logged = false;
	if (!was_complete || relid != old_relid ||
		had_token_issued != ig_shape.has_token_issued ||
		had_payload != ig_shape.has_payload || had_citus != ig_shape.citus)
		ig_shape.epoch++;
	ig_shape.complete = true;
}

/* The shape of idem_gate.claims, decided again if it changed since. */
void
ig_shape_ensure(void)
{
	if (!ig_shape.valid || !ig_shape.complete ||
		!table_shapes[IG_TABLE_CLAIMS].valid || !table_shapes[IG_TABLE_CLAIMS].complete)
		shape_load();
}

/* Is idem_gate.claims a Citus table here (rows in shards)? */
bool
ig_shape_is_citus(void)
{
	ig_shape_ensure();
	return ig_shape.citus;
}
