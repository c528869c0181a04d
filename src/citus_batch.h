/*-------------------------------------------------------------------------
 *
 * citus_batch.h
 *	  idem_claim_many on Citus: one round trip per shard group
 *	  (citus_batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CITUS_BATCH_H
#define IDEM_GATE_CITUS_BATCH_H

#include "fmgr.h"

extern bool ig_citus_batch_applies(void);
extern void ig_citus_batch_claim(FunctionCallInfo fcinfo, Datum *keys, Datum *fps,
								 int n, Oid caller);
extern int *ig_citus_batch_ords(FunctionCallInfo fcinfo, int argno, int n);
extern int	ig_citus_batch_group_begin(FunctionCallInfo fcinfo, int argno,
									   const char *workflow);

#endif							/* IDEM_GATE_CITUS_BATCH_H */
