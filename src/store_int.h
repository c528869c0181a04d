/*-------------------------------------------------------------------------
 *
 * store_int.h
 *	  Internals of the claim store, shared by store.c (the shape and the
 *	  choice), direct.c (the direct writes) and store_sql.c (the SQL path).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_INT_H
#define IDEM_GATE_STORE_INT_H

#include "executor/spi.h"
#include "utils/acl.h"

#include "shape.h"
#include "store.h"

/* store.c */
extern Relation ig_store_rel(IgCall *call);
extern bool ig_store_direct(IgCall *call, AclMode mode);
extern void ig_row_new(IgRow *row, int64 token, TimestampTz now,
					   const IgGrant *grant);

/* direct.c */
extern IgWrite ig_direct_insert(IgCall *call, const IgGrant *grant,
								bool precheck, TimestampTz now, IgRow *row);
extern void ig_direct_close(IgCall *call);
extern IgWrite ig_direct_finish(IgCall *call, IgRow *row, IgState new_state,
								Datum value, bool isnull, TimestampTz stamp);

/* store_sql.c */
extern void ig_sql_probe(IgCall *call, IgRow *row);
extern IgWrite ig_sql_insert(IgCall *call, const IgGrant *grant,
							 TimestampTz now, IgRow *row);
extern IgWrite ig_sql_regrant(IgCall *call, const IgGrant *grant, IgRow *row,
							  bool takeover, TimestampTz cutoff, TimestampTz now);
extern IgWrite ig_sql_finish(IgCall *call, IgRow *row, IgState new_state,
							 Datum value, bool isnull, TimestampTz stamp);
extern IgWrite ig_sql_heartbeat(IgCall *call, IgRow *row, TimestampTz stamp);
extern IgWrite ig_sql_resolve(IgCall *call, IgRow *row, bool complete,
							  Datum result, bool isnull, TimestampTz stamp);
extern IgWrite ig_sql_release(IgCall *call, IgRow *row);

#endif							/* IDEM_GATE_STORE_INT_H */
