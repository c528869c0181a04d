/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  idem_gate on Citus: what the janitor needs to clean the shards this
 *	  node holds and to raise its alerts on the coordinator (citus.c).
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

extern bool ig_store_is_citus(void);
extern bool ig_citus_table(Oid relid, int32 *group);
extern int64 ig_citus_next_token(int64 above);
extern List *ig_citus_local_shards(void);
extern char *ig_citus_shard_sql(const char *sql, const IgCitusShard *shard);
extern int32 ig_citus_local_group(void);
extern void ig_citus_notify_coordinator(List *payloads);

#endif							/* IDEM_GATE_CITUS_H */
