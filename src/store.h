/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The claim store, as the claim layer sees it: read the row of a key,
 *	  write the one transition its state allows; which backend does it is
 *	  the store's choice (store.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_H
#define IDEM_GATE_STORE_H

#include "store_row.h"

extern void ig_store_init(void);
extern void ig_store_begin(IgStore *st, IgCall *call);
extern void ig_store_close(IgStore *st);
extern void ig_store_refuse(void);

extern void ig_store_probe(IgStore *st, IgRow *row, bool keep_tuple);
extern bool ig_store_claimed_elsewhere(IgStore *st);
extern void ig_store_refresh(IgStore *st);
extern IgWrite ig_store_insert(IgStore *st, const IgGrant *grant,
							   bool precheck, IgRow *row);
extern IgWrite ig_store_regrant(IgStore *st, const IgGrant *grant,
								IgRow *row, bool takeover, TimestampTz cutoff);
extern IgWrite ig_store_finish(IgStore *st, IgRow *row, IgState new_state,
							   Datum value, bool isnull);
extern IgWrite ig_store_heartbeat(IgStore *st, IgRow *row);
extern IgWrite ig_store_resolve(IgStore *st, IgRow *row, bool complete,
								Datum result, bool isnull);
extern IgWrite ig_store_release(IgStore *st, IgRow *row);
extern HeapTuple ig_store_status(IgStore *st);

#endif							/* IDEM_GATE_STORE_H */
