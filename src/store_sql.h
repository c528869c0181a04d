/*-------------------------------------------------------------------------
 *
 * store_sql.h
 *	  The claim store's SQL backend: every write the direct path does not
 *	  make, all of them when it cannot be used, the probe where the rows
 *	  are not in the local heap, and the whole row for idem_status()
 *	  (store_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_SQL_H
#define IDEM_GATE_STORE_SQL_H

#include "store_row.h"

extern void ig_store_sql_probe(IgStore *st, IgRow *row);
extern IgWrite ig_store_sql_insert(IgStore *st, const IgGrant *grant,
								   TimestampTz now, IgRow *row);
extern IgWrite ig_store_sql_regrant(IgStore *st, const IgGrant *grant, IgRow *row,
									bool takeover, TimestampTz cutoff, TimestampTz now);
extern IgWrite ig_store_sql_finish(IgStore *st, IgRow *row, IgState new_state,
								   Datum value, bool isnull, TimestampTz stamp);
extern IgWrite ig_store_sql_heartbeat(IgStore *st, IgRow *row, TimestampTz stamp);
extern IgWrite ig_store_sql_resolve(IgStore *st, IgRow *row, bool complete,
									Datum result, bool isnull, TimestampTz stamp);
extern IgWrite ig_store_sql_release(IgStore *st, IgRow *row);
extern HeapTuple ig_store_sql_status(IgStore *st);

#endif							/* IDEM_GATE_STORE_SQL_H */
