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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "store_int.h"

/* Node group ids share the token's low bits with no other node. */
#define IG_CITUS_GROUP_BITS 10
#define IG_CITUS_MAX_GROUPS (1 << IG_CITUS_GROUP_BITS)

/*
 * The first column of a one-row or keyed Citus catalog, by a scan of
 * pg_catalog.relname; found = false if the catalog or the row is absent.
 */
static Datum
ig_citus_catalog_first(const char *relname, Oid key, bool *found)
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

/*
 * Is relid a Citus table on this node (distributed, reference or local to
 * the coordinator: in every case the rows are in shards)?  Sets *group to
 * this node's group id.  False where Citus is not installed.
 */
bool
ig_citus_table(Oid relid, int32 *group)
{
	bool		found;
	Datum		d;

	*group = 0;
	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	(void) ig_citus_catalog_first("pg_dist_partition", relid, &found);
	if (!found)
		return false;
	d = ig_citus_catalog_first("pg_dist_local_group", InvalidOid, &found);
	if (found)
		*group = DatumGetInt32(d);
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
 * A new fencing token on this Citus node, larger than above (the token of
 * the row it replaces, or 0): seq * 1024 + group.  If another node's
 * sequence ran ahead of this one's for this key, this node's sequence is
 * advanced past it first, so tokens only grow per key.
 */
int64
ig_citus_next_token(int64 above)
{
	int64		seq = nextval_internal(ig_shape.token_seq, true);
	int64		token;

	if (seq > (PG_INT64_MAX >> IG_CITUS_GROUP_BITS) - 1)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("idem_gate.token_seq reached the largest token a Citus node can grant")));
	token = (seq << IG_CITUS_GROUP_BITS) | ig_shape.citus_group;
	if (token <= above)
	{
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(ig_shape.token_seq),
							Int64GetDatum(above >> IG_CITUS_GROUP_BITS));
		seq = nextval_internal(ig_shape.token_seq, true);
		token = (seq << IG_CITUS_GROUP_BITS) | ig_shape.citus_group;
	}
	Assert(token > above);
	return token;
}
