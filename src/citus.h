/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  What idem_gate reads of Citus, without linking to it: whether a table
 *	  is a Citus table, the node's group, tokens unique across the nodes,
 *	  the shards this node holds and the coordinator's notifications
 *	  (citus.c).  src/README.md says what Citus changes, and where.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CITUS_H
#define IDEM_GATE_CITUS_H

#include "nodes/pg_list.h"

/* A shard of idem_gate.claims on this node, and its co-located audit shard. */
typedef struct IgCitusShard
{
	char	   *claims;			/* idem_gate.claims_<shardid> */
	char	   *audit;			/* idem_gate.audit_<shardid>, or NULL */
} IgCitusShard;

extern bool ig_citus_table(Oid relid, int32 *group);
extern int64 ig_citus_next_token(Oid seq_relid, int32 group, int64 above);
extern List *ig_citus_local_shards(void);
extern char *ig_citus_shard_sql(const char *sql, const IgCitusShard *shard);
extern int32 ig_citus_local_group(void);
extern void ig_citus_notify_coordinator(List *payloads);

#endif							/* IDEM_GATE_CITUS_H */
