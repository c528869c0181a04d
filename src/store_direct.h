/*-------------------------------------------------------------------------
 *
 * store_direct.h
 *	  The claim store's direct backend: the primary-key probe, a first
 *	  claim's insert and the owner's completion or failure, straight to the
 *	  heap and its indexes (store_direct.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_DIRECT_H
#define IDEM_GATE_STORE_DIRECT_H

#include "store_row.h"

extern void ig_store_direct_probe(IgStore *st, IgRow *row, bool keep_tuple);
extern bool ig_store_direct_claimed_elsewhere(IgStore *st);
extern IgWrite ig_store_direct_insert(IgStore *st, const IgGrant *grant,
									  bool precheck, TimestampTz now, IgRow *row);
extern IgWrite ig_store_direct_finish(IgStore *st, IgRow *row, IgState new_state,
									  Datum value, bool isnull, TimestampTz stamp);
extern void ig_store_direct_close(IgStore *st);

#endif							/* IDEM_GATE_STORE_DIRECT_H */
