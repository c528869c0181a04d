/*-------------------------------------------------------------------------
 *
 * store_row.h
 *	  What the claim store's dispatcher (store.c) and its two backends, the
 *	  direct path (store_direct.c) and SQL (store_sql.c), share: one row of
 *	  idem_gate.claims, what a grant writes, a write's result, and the
 *	  store's state for one call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_ROW_H
#define IDEM_GATE_STORE_ROW_H

#include "access/htup.h"
#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"

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
	ItemPointerData tid;		/* where the direct probe found it */
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

/* The direct path's scan and writer, kept for a call (store_direct.c). */
typedef struct IgDirectState IgDirectState;

/*
 * The store's state for one call, so that a batch sets things up once:
 * the table, the privileges already checked, the direct path's state.
 */
typedef struct IgStore
{
	IgCall	   *call;			/* the call served: key, workflow, memory */
	Relation	rel;			/* idem_gate.claims, opened on first use */
	uint32		acl_checked;	/* the owner's privileges checked (AclMode) */
	bool		fresh_snapshot; /* the next direct read takes a new snapshot */
	IgDirectState *direct;		/* NULL until the direct path is used */
} IgStore;

/*
 * The row a first claim wrote, as either backend wrote it: processing,
 * attempt 1, the token drawn, claimed and updated now.
 */
static inline void
ig_store_row_new(IgRow *row, int64 token, TimestampTz now, const IgGrant *grant)
{
	memset(row, 0, sizeof(*row));
	row->found = true;
	row->state = IG_PROCESSING;
	row->token = token;
	row->attempt = 1;
	row->claimed_at = now;
	row->updated_at = now;
	row->token_issued = grant->token_issued;
	row->result_isnull = true;
}

#endif							/* IDEM_GATE_STORE_ROW_H */
