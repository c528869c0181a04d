/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  What the claim store needs to know of Citus, without linking to it:
 *	  whether idem_gate.claims is a Citus table on this node, and fencing
 *	  tokens that stay unique and growing across the nodes of a cluster.
 *
 * On a Citus node idem_gate.claims is an empty shell: its rows live in
 * shard tables on the worker nodes.  The store then reads and writes
 * through SQL, which Citus routes to the key's shard (executed locally
 * when the call was delegated to the node holding it).  Whether the table
 * is distributed is read from Citus's catalog pg_dist_partition when the
 * store learns the table's shape, which happens again after any relcache
 * invalidation of the table (Citus invalidates it when it distributes or
 * undistributes it), so calls pay nothing for the check.
 *
 * Tokens: every node has its own idem_gate.token_seq, and a claim is
 * granted on the node that holds its key, which changes when a shard
 * moves.  A token on a Citus node is therefore seq * 1024 + the node's
 * group id: unique across the cluster (each node draws from its own
 * residue), and kept growing per key by advancing the node's sequence past
 * the token a regrant replaces when a key arrives from a node whose
 * sequence ran ahead.
 *
 * The janitor: each node cleans the shards it holds, with its usual
 * statements aimed at the shard tables (Citus plans neither the ctid
 * batches nor SKIP LOCKED over a distributed table).  A worker's
 * stuck-claim alerts are raised on the coordinator too, where the
 * cluster's users listen.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/ruleutils.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "storage/lmgr.h"

#include "citus.h"

/* Node group ids share the token's low bits with no other node. */
#define IG_CITUS_GROUP_BITS 10
#define IG_CITUS_MAX_GROUPS (1 << IG_CITUS_GROUP_BITS)

/*
 * The first column of a one-row or keyed Citus catalog, by a scan of
 * pg_catalog.relname; found = false if the catalog or the row is absent.
 */
static Datum
citus_catalog_first(const char *relname, Oid key, bool *found)
{
	Oid			relid = get_relname_relid(relname, PG_CATALOG_NAMESPACE);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tup;
	Datum		result = (Datum) 0;

	*found = false;
	if (!OidIsValid(relid))
		return result;
	rel = table_open(relid, AccessShareLock);
	if (OidIsValid(key))
		ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(key));
	scan = systable_beginscan(rel, InvalidOid, false, NULL,
							  OidIsValid(key) ? 1 : 0, &skey);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;

		result = heap_getattr(tup, 1, RelationGetDescr(rel), &isnull);
		*found = !isnull;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/* This node's Citus group id: 0 on the coordinator (and without Citus). */
int32
ig_citus_local_group(void)
{
	bool		found;
	Datum		d = citus_catalog_first("pg_dist_local_group", InvalidOid, &found);

	return found ? DatumGetInt32(d) : 0;
}

/*
 * Is relid a Citus table on this node (distributed, reference or local to
 * the coordinator: in every case the rows are in shards)?  Sets *group to
 * this node's group id.  False where Citus is not installed.
 */
bool
ig_citus_table(Oid relid, int32 *group)
{
	bool		found;

	*group = 0;
	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	(void) citus_catalog_first("pg_dist_partition", relid, &found);
	if (!found)
		return false;
	*group = ig_citus_local_group();
	if (*group < 0 || *group >= IG_CITUS_MAX_GROUPS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("idem_gate supports Citus node groups 0 to %d, not %d",
						IG_CITUS_MAX_GROUPS - 1, *group),
				 errdetail("A fencing token holds the group id of the node that granted it in its low %d bits.",
						   IG_CITUS_GROUP_BITS),
				 errhint("Add nodes so that their group ids stay below %d.",
						 IG_CITUS_MAX_GROUPS)));
	return true;
}

/*
 * A new fencing token on this Citus node (group), from the token sequence
 * seq_relid, larger than above (the token of the row it replaces, or 0):
 * seq * 1024 + group.  If another node's
 * sequence ran ahead of this one's for this key, this node's sequence is
 * advanced past it first, so tokens only grow per key.
 */
int64
ig_citus_next_token(Oid seq_relid, int32 group, int64 above)
{
	int64		seq = nextval_internal(seq_relid, true);
	int64		token;

	if (seq > (PG_INT64_MAX >> IG_CITUS_GROUP_BITS) - 1)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("idem_gate.token_seq reached the largest token a Citus node can grant")));
	token = (seq << IG_CITUS_GROUP_BITS) | group;
	if (token <= above)
	{
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq_relid),
							Int64GetDatum(above >> IG_CITUS_GROUP_BITS));
		seq = nextval_internal(seq_relid, true);
		token = (seq << IG_CITUS_GROUP_BITS) | group;
	}
	Assert(token > above);
	return token;
}

/*
 * The shards of idem_gate.claims whose placement is on this node, each
 * with its co-located shard of idem_gate.audit (same hash range, same
 * node), in the caller's memory context.  SPI must be connected.  Each
 * shard has one placement, so each claim is cleaned by exactly one node's
 * janitor; a shard being moved is cleaned by its source until Citus
 * switches the placement, and the logical replication of the move carries
 * those changes to the target.
 */
List *
ig_citus_local_shards(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *shards = NIL;

	if (SPI_execute("SELECT 'idem_gate.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident("
					"  'claims_' OPERATOR(pg_catalog.||) c.shardid),"
					" 'idem_gate.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident("
					"  'audit_' OPERATOR(pg_catalog.||) a.shardid)"
					" FROM pg_catalog.pg_dist_shard c"
					" JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) c.shardid"
					" LEFT JOIN pg_catalog.pg_dist_shard a"
					"  ON a.logicalrelid OPERATOR(pg_catalog.=) 'idem_gate.audit'::pg_catalog.regclass"
					"  AND a.shardminvalue OPERATOR(pg_catalog.=) c.shardminvalue"
					" WHERE c.logicalrelid OPERATOR(pg_catalog.=) 'idem_gate.claims'::pg_catalog.regclass"
					"  AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)"
					" ORDER BY c.shardid", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the local shards of idem_gate.claims");

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		MemoryContext old = MemoryContextSwitchTo(cxt);
		IgCitusShard *s = palloc0(sizeof(IgCitusShard));

		s->claims = SPI_getvalue(tup, SPI_tuptable->tupdesc, 1);
		s->audit = SPI_getvalue(tup, SPI_tuptable->tupdesc, 2);
		shards = lappend(shards, s);
		MemoryContextSwitchTo(old);
	}
	return shards;
}

/*
 * A janitor statement made to work on one shard: every "idem_gate.claims "
 * and "idem_gate.audit " of its text names the shard tables instead.
 */
char *
ig_citus_shard_sql(const char *sql, const IgCitusShard *shard)
{
	StringInfoData buf;
	const char *p = sql;

	initStringInfo(&buf);
	while (*p != '\0')
	{
		if (strncmp(p, "idem_gate.claims ", 17) == 0)
		{
			appendStringInfo(&buf, "%s ", shard->claims);
			p += 17;
		}
		else if (strncmp(p, "idem_gate.audit ", 16) == 0 && shard->audit != NULL)
		{
			appendStringInfo(&buf, "%s ", shard->audit);
			p += 16;
		}
		else
			appendStringInfoChar(&buf, *p++);
	}
	return buf.data;
}

/*
 * Raise the janitor's stuck-claim alerts of a worker node on the
 * coordinator too, where the cluster's users listen: one command through
 * Citus's run_command_on_coordinator() for the whole batch, sent before the
 * batch commits, so an alert reaches the coordinator at least once (a batch
 * that fails afterwards alerts its rows again at the next pass).  When the
 * coordinator cannot be reached the alerts stay on this node and a WARNING
 * says so.  SPI must be connected; its last result is replaced.
 */
void
ig_citus_notify_coordinator(List *payloads)
{
	StringInfoData cmd;
	ListCell   *lc;
	Datum		arg;
	bool		isnull;
	Datum		ok;

	initStringInfo(&cmd);
	appendStringInfoString(&cmd, "SELECT pg_catalog.count(pg_catalog.pg_notify('idem_gate_alert', p))"
						   " FROM pg_catalog.unnest(ARRAY[");
	foreach(lc, payloads)
	{
		if (lc != list_head(payloads))
			appendStringInfoChar(&cmd, ',');
		appendStringInfoString(&cmd, quote_literal_cstr(lfirst(lc)));
	}
	appendStringInfoString(&cmd, "]::pg_catalog.text[]) AS p");

	arg = CStringGetTextDatum(cmd.data);
	if (SPI_execute_with_args("SELECT r.success, r.result"
							  " FROM pg_catalog.run_command_on_coordinator($1) AS r",
							  1, (Oid[]) {TEXTOID}, &arg, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run a command on the Citus coordinator");
	ok = (SPI_processed == 1) ?
		SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) :
		BoolGetDatum(false);
	if (!DatumGetBool(ok))
		ereport(WARNING,
				(errmsg("idem_gate janitor could not raise %d stuck-claim alerts on the Citus coordinator",
						list_length(payloads)),
				 errdetail("%s", SPI_processed == 1 ?
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2) :
						   "The coordinator is not in Citus's metadata."),
				 errhint("The alerts were raised on this node; listeners on the coordinator missed them.")));
}
