/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The claim store: everything that knows the shape of idem_gate.claims.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_H
#define IDEM_GATE_STORE_H

#include "access/htup.h"
#include "storage/itemptr.h"

#include "call.h"

/* One row of idem_gate.claims, as read by ig_store_probe() or written. */
typedef struct IgRow
{
	bool		found;
	IgState		state;
	int64		token;
	int32		attempt;
	TimestampTz claimed_at;
	TimestampTz updated_at;
	char	   *execution_id;	/* NULL if null */
	char	   *fingerprint;	/* likewise */
	bool		token_issued;	/* the grant handed the token to its owner */
	bool		result_isnull;
	Datum		result;			/* a detoasted copy, in the caller's context */
	ItemPointerData tid;		/* where ig_store_probe() found it */
	HeapTuple	tuple;			/* a copy of it, if the probe was asked */
} IgRow;

/* What a grant (a first claim, a retry, a takeover) writes. */
typedef struct IgGrant
{
	Datum		execution_id;
	bool		has_exec;
	Datum		fingerprint;
	bool		has_fp;
	bool		token_issued;	/* the caller hands the token to the owner */
	bool		has_payload;	/* the delivery's payload was given (1.2) */
	Datum		payload;		/* it, if kept */
	int32		payload_dropped;	/* its size, if too large to keep; else 0 */
} IgGrant;

/* The result of a write. */
typedef enum IgWrite
{
	IG_WRITE_DONE,				/* written; the row holds what was written */
	IG_WRITE_RETRY				/* the row changed first: read it again */
} IgWrite;

/* idem_gate.direct_writes */
extern bool idem_direct_writes;

extern void ig_store_define_settings(void);
extern void ig_store_probe(IgCall *call, IgRow *row, bool keep_tuple);
extern IgWrite ig_store_insert(IgCall *call, const IgGrant *grant,
							   bool precheck, IgRow *row);
extern IgWrite ig_store_regrant(IgCall *call, const IgGrant *grant,
								IgRow *row, bool takeover, TimestampTz cutoff);
extern IgWrite ig_store_finish(IgCall *call, IgRow *row, IgState new_state,
							   Datum value, bool isnull);
extern IgWrite ig_store_heartbeat(IgCall *call, IgRow *row);
extern IgWrite ig_store_resolve(IgCall *call, IgRow *row, bool complete,
								Datum result, bool isnull);
extern IgWrite ig_store_release(IgCall *call, IgRow *row);
extern HeapTuple ig_store_status(IgCall *call);
extern void ig_store_close(IgCall *call);
extern void ig_store_refuse(void);

#endif							/* IDEM_GATE_STORE_H */
