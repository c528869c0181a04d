/*-------------------------------------------------------------------------
 *
 * store_direct.c
 *	  The claim store's direct backend: the probe of the primary key, which
 *	  is the whole of a duplicate claim, and the writes of a new claim and
 *	  of the owner's completion or failure, straight to the heap and its
 *	  indexes.
 *
 * The probe reads the primary key index directly rather than through SPI
 * and the executor: a duplicate writes nothing, not even WAL.
 *
 * They use the building blocks of INSERT ... ON CONFLICT and UPDATE
 * themselves: the pre-check of the primary key that waits for a concurrent
 * inserter, speculative insertion, the executor's index maintenance, and
 * table_tuple_update(), which waits for a concurrent writer and reports
 * what it did.  Concurrency therefore behaves as the SQL does.  What they
 * skip is executor start-up and the evaluation of the extension's own
 * CHECK constraints, which the rows written here satisfy by construction
 * (the regression tests check every row they write against them).  The
 * store (store.c) uses them only while the table holds nothing else that
 * the SQL path would enforce; the replica identity a publication needs is
 * checked here, as the executor checks it.  The index scan and the
 * insert's executor state stay open for the call, so a batch sets them up
 * once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "shape.h"
#include "store_direct.h"

/* An open executor state for writes to idem_gate.claims. */
typedef struct Writer
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* virtual: the row to write */
	List	   *arbiter;		/* the primary key, for an insert */
} Writer;

/* What the direct path keeps open for a call. */
struct IgDirectState
{
	Relation	idx;			/* the primary key */
	Snapshot	snap;			/* the probe's snapshot, while scan is open */
	IndexScanDesc scan;
	TupleTableSlot *slot;
	Writer	   *inserter;		/* the insert's writer, once opened */
};

/* The call's direct state, made on first use. */
static IgDirectState *
direct_state(IgStore *st)
{
	if (st->direct == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(st->call->callcxt);

		st->direct = palloc0(sizeof(IgDirectState));
		MemoryContextSwitchTo(old);
	}
	return st->direct;
}

/* The primary key and a slot for its rows, opened once per call. */
static void
open_index(IgStore *st, IgDirectState *d)
{
	if (d->idx != NULL)
		return;
	d->idx = index_open(ig_shape.pk_index, AccessShareLock);
	d->slot = table_slot_create(st->rel, NULL);
}

/* Scan keys of the call's (workflow, key) on the primary key. */
static void
key_scankeys(IgStore *st, IgDirectState *d, ScanKeyData *skey)
{
	ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_TEXTEQ, st->call->workflow);
	skey[0].sk_collation = d->idx->rd_indcollation[0];
	ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_TEXTEQ, st->call->key);
	skey[1].sk_collation = d->idx->rd_indcollation[1];
}

/*
 * Does a row of (workflow, key) exist, committed or being written by
 * another transaction, whatever the call's snapshot sees?  A scan of the
 * primary key with a dirty snapshot, as INSERT ... ON CONFLICT checks its
 * arbiter: a row being inserted or deleted by a transaction in progress is
 * waited for, and looked for again.
 */
bool
ig_store_direct_claimed_elsewhere(IgStore *st)
{
	IgDirectState *d = direct_state(st);
	MemoryContext old = MemoryContextSwitchTo(st->call->callcxt);

	open_index(st, d);
	MemoryContextSwitchTo(old);
	for (;;)
	{
		SnapshotData dirty;
		IndexScanDesc scan;
		ScanKeyData skey[2];
		bool		found;
		TransactionId xwait;
		ItemPointerData tid;

		InitDirtySnapshot(dirty);
		scan = ig_compat_index_beginscan(st->rel, d->idx, &dirty, 2, 0);
		key_scankeys(st, d, skey);
		index_rescan(scan, skey, 2, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, d->slot);
		tid = d->slot->tts_tid;
		ExecClearTuple(d->slot);
		index_endscan(scan);
		if (!found)
			return false;
		xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			return true;
		XactLockTableWait(xwait, st->rel, &tid, XLTW_InsertIndex);
	}
}

/*
 * Read the row of (workflow, key) as it is now; found = false if none.
 *
 * Like an SPI query it takes a new snapshot (under READ COMMITTED) for the
 * first read of a call and after every write that found the row changed,
 * so after waiting for a concurrent claim it sees that claim's committed
 * row; the other keys of a batch are read in the call's snapshot, as one
 * statement would read them.  Values are copied into the caller's memory
 * context.
 */
void
ig_store_direct_probe(IgStore *st, IgRow *row, bool keep_tuple)
{
	IgCall	   *call = st->call;
	IgDirectState *d = direct_state(st);
	MemoryContext old;
	ScanKeyData skey[2];

	old = MemoryContextSwitchTo(call->callcxt);
	open_index(st, d);
	if (st->fresh_snapshot || d->scan == NULL)
	{
		if (d->scan != NULL)
		{
			index_endscan(d->scan);
			UnregisterSnapshot(d->snap);
		}
		CommandCounterIncrement();
		d->snap = RegisterSnapshot(GetTransactionSnapshot());
		d->scan = ig_compat_index_beginscan(st->rel, d->idx, d->snap, 2, 0);
		st->fresh_snapshot = false;
	}
	key_scankeys(st, d, skey);
	index_rescan(d->scan, skey, 2, NULL, 0);

	if (index_getnext_slot(d->scan, ForwardScanDirection, d->slot))
	{
		TupleTableSlot *slot = d->slot;
		bool		isnull;
		Datum		v;

		row->found = true;
		v = slot_getattr(slot, ig_shape.att[IG_COL_STATE], &isnull);
		row->state = ig_state_from_datum(ig_shape.state_type, v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_TOKEN], &isnull);
		row->token = DatumGetInt64(v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_ATTEMPT], &isnull);
		row->attempt = DatumGetInt32(v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_CLAIMED_AT], &isnull);
		row->claimed_at = DatumGetTimestampTz(v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_UPDATED_AT], &isnull);
		row->updated_at = DatumGetTimestampTz(v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_EXECUTION_ID], &isnull);
		row->execution_id = isnull ? NULL : TextDatumGetCString(v);
		v = slot_getattr(slot, ig_shape.att[IG_COL_FINGERPRINT], &isnull);
		row->fingerprint = isnull ? NULL : TextDatumGetCString(v);
		if (ig_shape.has_token_issued)
		{
			v = slot_getattr(slot, ig_shape.att[IG_COL_TOKEN_ISSUED], &isnull);
			row->token_issued = !isnull && DatumGetBool(v);
		}
		v = slot_getattr(slot, ig_shape.att[IG_COL_RESULT], &row->result_isnull);
		if (!row->result_isnull)
			row->result = PointerGetDatum(DatumGetJsonbPCopy(v));
		row->tid = slot->tts_tid;
		if (keep_tuple)
			row->tuple = ExecCopySlotHeapTuple(slot);
		ExecClearTuple(slot);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Open idem_gate.claims and its indexes for one write.  updated lists the
 * columns an update changes (none for an insert): the executor's index
 * maintenance uses it to hint "key unchanged" to the primary key, which
 * lets btree remove old versions bottom-up instead of splitting pages.
 * precheck prepares the primary key for ExecCheckIndexConstraints(); the
 * insert's own conflict detection does not need that.
 */
static void
writer_begin(Writer *w, IgStore *st, const IgCol *updated, int nupdated,
			 bool precheck)
{
	Relation	rel = st->rel;
	Bitmapset  *cols = NULL;
	MemoryContext old;

	w->rel = rel;
	w->estate = CreateExecutorState();
	old = MemoryContextSwitchTo(w->estate->es_query_cxt);

	for (int i = 0; i < nupdated; i++)
		if (ig_shape.att[updated[i]] != InvalidAttrNumber)
			cols = bms_add_member(cols, ig_shape.att[updated[i]] -
								  FirstLowInvalidHeapAttributeNumber);
	ig_compat_init_range_table(w->estate, rel, cols);

	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);
	ExecOpenIndices(w->rri, precheck);
	w->estate->es_output_cid = GetCurrentCommandId(true);
	w->slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(rel),
									 &TTSOpsVirtual);
	ExecClearTuple(w->slot);

	MemoryContextSwitchTo(old);
}

/* Close what writer_begin() opened; the locks stay until commit. */
static void
writer_end(Writer *w)
{
	ExecCloseIndices(w->rri);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
}

/* Set one column of the row being written, if the table has it. */
static inline void
writer_set(Writer *w, IgCol col, Datum value, bool isnull)
{
	AttrNumber	attnum = ig_shape.att[col];

	if (attnum == InvalidAttrNumber)
		return;
	w->slot->tts_values[attnum - 1] = value;
	w->slot->tts_isnull[attnum - 1] = isnull;
}

/* A text or jsonb argument as stored: not toasted, short header kept. */
static inline Datum
untoasted(Datum d)
{
	return PointerGetDatum(PG_DETOAST_DATUM_PACKED(d));
}

/*
 * Insert the first claim of (workflow, key), as INSERT ... ON CONFLICT DO
 * NOTHING would: IG_WRITE_RETRY if a concurrent claim inserted it first.
 *
 * The caller has just read the key and found nothing, so a first attempt
 * inserts at once: the speculative insertion meets any row of the key that
 * is live or being written, never waits, and removes its row again.  After
 * such a conflict (precheck) the primary key is checked first, as the
 * executor does, waiting for the transaction that is inserting or deleting
 * the key, and only then is the token drawn: a token drawn before that wait
 * could be older than one a concurrent takeover was granted while a release
 * of the key was deleting its row, and tokens of a key must only grow.
 */
IgWrite
ig_store_direct_insert(IgStore *st, const IgGrant *grant, bool precheck,
					   TimestampTz now, IgRow *row)
{
	IgCall	   *call = st->call;
	IgDirectState *d = direct_state(st);
	Writer	   *w = d->inserter;
	int64		token = 0;
	ItemPointerData conflict_tid;
	bool		committed = false;	/* the pre-check found a committed row */
	bool		conflict = false;	/* the insert met a concurrent one */

	/*
	 * One writer serves every insert of the call (a batch claims many keys),
	 * opened with what the pre-check needs.
	 */
	if (w == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(call->callcxt);

		w = palloc0(sizeof(Writer));
		writer_begin(w, st, NULL, 0, true);
		w->arbiter = list_make1_oid(ig_shape.pk_index);
		d->inserter = w;
		MemoryContextSwitchTo(old);
	}
	w->estate->es_output_cid = GetCurrentCommandId(true);

	ExecClearTuple(w->slot);
	memset(w->slot->tts_isnull, true,
		   sizeof(bool) * RelationGetDescr(w->rel)->natts);
	writer_set(w, IG_COL_WORKFLOW, call->workflow, false);
	writer_set(w, IG_COL_KEY, call->key, false);
	writer_set(w, IG_COL_STATE,
			   ig_state_datum(ig_shape.state_type, IG_PROCESSING), false);
	writer_set(w, IG_COL_ATTEMPT, Int32GetDatum(1), false);
	writer_set(w, IG_COL_TOKEN, Int64GetDatum(0), false);	/* drawn below */
	writer_set(w, IG_COL_EXECUTION_ID,
			   grant->has_exec ? untoasted(grant->execution_id) : (Datum) 0,
			   !grant->has_exec);
	writer_set(w, IG_COL_FINGERPRINT,
			   grant->has_fp ? untoasted(grant->fingerprint) : (Datum) 0,
			   !grant->has_fp);
	writer_set(w, IG_COL_CREATED_AT, TimestampTzGetDatum(now), false);
	writer_set(w, IG_COL_CLAIMED_AT, TimestampTzGetDatum(now), false);
	writer_set(w, IG_COL_UPDATED_AT, TimestampTzGetDatum(now), false);
	writer_set(w, IG_COL_TOKEN_ISSUED, BoolGetDatum(grant->token_issued), false);
	writer_set(w, IG_COL_PAYLOAD,
			   grant->has_payload && grant->payload_dropped == 0 ?
			   untoasted(grant->payload) : (Datum) 0,
			   !grant->has_payload || grant->payload_dropped != 0);
	writer_set(w, IG_COL_PAYLOAD_DROPPED, Int32GetDatum(grant->payload_dropped),
			   grant->payload_dropped == 0);
	ExecStoreVirtualTuple(w->slot);

	if (precheck &&
		!ig_compat_check_index_constraints(w->rri, w->slot, w->estate,
										   &conflict_tid, w->arbiter))
		committed = true;
	else
	{
		TransactionId xid = GetCurrentTransactionId();
		uint32		spec_token;

		token = nextval_internal(ig_shape.token_seq, true);
		writer_set(w, IG_COL_TOKEN, Int64GetDatum(token), false);
		spec_token = SpeculativeInsertionLockAcquire(xid);

		table_tuple_insert_speculative(w->rel, w->slot, w->estate->es_output_cid,
									   0, NULL, spec_token);
		ig_compat_insert_index_tuples(w->rri, w->slot, w->estate, &conflict,
									  w->arbiter);
		table_tuple_complete_speculative(w->rel, w->slot, spec_token, !conflict);
		SpeculativeInsertionLockRelease(xid);
	}
	ResetPerTupleExprContext(w->estate);

	if (committed)
	{
		/*
		 * Committed by a claim our snapshot does not see.  Under REPEATABLE
		 * READ no later read could see it either: fail as the SQL would.
		 */
		if (IsolationUsesXactSnapshot())
			ig_call_error_serialization(call, "update");
		return IG_WRITE_RETRY;
	}
	if (conflict)
		return IG_WRITE_RETRY;

	ig_store_row_new(row, token, now, grant);
	return IG_WRITE_DONE;
}


/*
 * The owner's transition of a processing row read by the probe (with its
 * tuple) to new_state, storing value in the receipt or the error column.
 * updated_at becomes stamp; completed_at is set with it when the row
 * completes.  IG_WRITE_RETRY if the row was changed concurrently (after
 * waiting for that writer).
 */
IgWrite
ig_store_direct_finish(IgStore *st, IgRow *row, IgState new_state, Datum value,
					   bool isnull, TimestampTz stamp)
{
	IgCall	   *call = st->call;
	static const IgCol updated[] = {
		IG_COL_STATE, IG_COL_UPDATED_AT, IG_COL_COMPLETED_AT, IG_COL_RESULT,
		IG_COL_LAST_ERROR, IG_COL_PAYLOAD, IG_COL_PAYLOAD_DROPPED
	};
	Writer		w;
	TM_Result	result;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	IgIndexUpdate update_indexes;

	CheckCmdReplicaIdentity(st->rel, CMD_UPDATE);
	writer_begin(&w, st, updated, lengthof(updated), false);

	heap_deform_tuple(row->tuple, RelationGetDescr(w.rel),
					  w.slot->tts_values, w.slot->tts_isnull);
	writer_set(&w, IG_COL_STATE,
			   ig_state_datum(ig_shape.state_type, new_state), false);
	writer_set(&w, IG_COL_UPDATED_AT, TimestampTzGetDatum(stamp), false);
	if (new_state == IG_COMPLETED)
	{
		/* the evidence is kept while a person may need it, not after */
		writer_set(&w, IG_COL_COMPLETED_AT, TimestampTzGetDatum(stamp), false);
		writer_set(&w, IG_COL_PAYLOAD, (Datum) 0, true);
		writer_set(&w, IG_COL_PAYLOAD_DROPPED, (Datum) 0, true);
	}
	writer_set(&w, new_state == IG_COMPLETED ? IG_COL_RESULT : IG_COL_LAST_ERROR,
			   isnull ? (Datum) 0 : untoasted(value), isnull);
	ExecStoreVirtualTuple(w.slot);

	result = table_tuple_update(w.rel, &row->tid, w.slot,
								w.estate->es_output_cid, GetActiveSnapshot(),
								InvalidSnapshot, true, &tmfd, &lockmode,
								&update_indexes);
	switch (result)
	{
		case TM_Ok:
			ig_compat_update_index_tuples(w.rri, w.slot, w.estate,
										  update_indexes);
			break;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ig_call_error_serialization(call, result == TM_Updated ? "update" : "delete");
			break;
		default:
			elog(ERROR, "unexpected table_tuple_update status: %u", result);
	}
	writer_end(&w);

	if (result != TM_Ok)
		return IG_WRITE_RETRY;
	row->state = new_state;
	row->updated_at = stamp;
	return IG_WRITE_DONE;
}

/* Close what the direct path opened for the call; the locks stay. */
void
ig_store_direct_close(IgStore *st)
{
	IgDirectState *d = st->direct;

	if (d == NULL)
		return;
	if (d->scan != NULL)
	{
		index_endscan(d->scan);
		UnregisterSnapshot(d->snap);
	}
	if (d->slot != NULL)
		ExecDropSingleTupleTableSlot(d->slot);
	if (d->idx != NULL)
		index_close(d->idx, NoLock);
	if (d->inserter != NULL)
		writer_end(d->inserter);
	st->direct = NULL;
}
