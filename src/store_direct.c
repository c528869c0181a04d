/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  The claim store's direct writes: a new claim, and the owner's
 *	  completion or failure, straight to the heap and its indexes.
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
 * checked here, as the executor checks it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "idem_gate.h"
#include "compat.h"
#include "store_int.h"

typedef struct IgWriter
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* virtual: the row to write */
	List	   *arbiter;		/* the primary key, for an insert */
} IgWriter;

/*
 * Open idem_gate.claims and its indexes for one write.  updated lists the
 * columns an update changes (none for an insert): the executor's index
 * maintenance uses it to hint "key unchanged" to the primary key, which
 * lets btree remove old versions bottom-up instead of splitting pages.
 * precheck prepares the primary key for ExecCheckIndexConstraints(); the
 * insert's own conflict detection does not need that.
 */
static void
ig_writer_begin(IgWriter *w, IgCall *call, const IgCol *updated, int nupdated,
				bool precheck)
{
	Relation	rel = ig_store_rel(call);
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

/* Close what ig_writer_begin() opened; the locks stay until commit. */
static void
ig_writer_end(IgWriter *w)
{
	ExecCloseIndices(w->rri);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
}

/* Set one column of the row being written, if the table has it. */
static inline void
ig_writer_set(IgWriter *w, IgCol col, Datum value, bool isnull)
{
	AttrNumber	attnum = ig_shape.att[col];

	if (attnum == InvalidAttrNumber)
		return;
	w->slot->tts_values[attnum - 1] = value;
	w->slot->tts_isnull[attnum - 1] = isnull;
}

/* A text or jsonb argument as stored: not toasted, short header kept. */
static inline Datum
ig_untoasted(Datum d)
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
ig_direct_insert(IgCall *call, const IgGrant *grant, bool precheck,
				 TimestampTz now, IgRow *row)
{
	IgWriter   *w = call->inserter;
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

		w = palloc0(sizeof(IgWriter));
		ig_writer_begin(w, call, NULL, 0, true);
		w->arbiter = list_make1_oid(ig_shape.pk_index);
		call->inserter = w;
		MemoryContextSwitchTo(old);
	}
	w->estate->es_output_cid = GetCurrentCommandId(true);

	ExecClearTuple(w->slot);
	memset(w->slot->tts_isnull, true,
		   sizeof(bool) * RelationGetDescr(w->rel)->natts);
	ig_writer_set(w, IG_COL_WORKFLOW, call->workflow, false);
	ig_writer_set(w, IG_COL_KEY, call->key, false);
	ig_writer_set(w, IG_COL_STATE,
				  ig_state_datum(ig_shape.state_type, IG_PROCESSING), false);
	ig_writer_set(w, IG_COL_ATTEMPT, Int32GetDatum(1), false);
	ig_writer_set(w, IG_COL_TOKEN, Int64GetDatum(0), false);	/* drawn below */
	ig_writer_set(w, IG_COL_EXECUTION_ID,
				  grant->has_exec ? ig_untoasted(grant->execution_id) : (Datum) 0,
				  !grant->has_exec);
	ig_writer_set(w, IG_COL_FINGERPRINT,
				  grant->has_fp ? ig_untoasted(grant->fingerprint) : (Datum) 0,
				  !grant->has_fp);
	ig_writer_set(w, IG_COL_CREATED_AT, TimestampTzGetDatum(now), false);
	ig_writer_set(w, IG_COL_CLAIMED_AT, TimestampTzGetDatum(now), false);
	ig_writer_set(w, IG_COL_UPDATED_AT, TimestampTzGetDatum(now), false);
	ig_writer_set(w, IG_COL_TOKEN_ISSUED, BoolGetDatum(grant->token_issued), false);
	ig_writer_set(w, IG_COL_PAYLOAD,
				  grant->has_payload && grant->payload_dropped == 0 ?
				  ig_untoasted(grant->payload) : (Datum) 0,
				  !grant->has_payload || grant->payload_dropped != 0);
	ig_writer_set(w, IG_COL_PAYLOAD_DROPPED, Int32GetDatum(grant->payload_dropped),
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
		ig_writer_set(w, IG_COL_TOKEN, Int64GetDatum(token), false);
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
			ig_error_serialization(call, "update");
		return IG_WRITE_RETRY;
	}
	if (conflict)
		return IG_WRITE_RETRY;

	ig_row_new(row, token, now, grant);
	return IG_WRITE_DONE;
}

/* Close the call's insert writer, if it opened one. */
void
ig_direct_close(IgCall *call)
{
	IgWriter   *w = call->inserter;

	if (w == NULL)
		return;
	ig_writer_end(w);
	call->inserter = NULL;
}

/*
 * The owner's transition of a processing row read by the probe (with its
 * tuple) to new_state, storing value in the receipt or the error column.
 * updated_at becomes stamp; completed_at is set with it when the row
 * completes.  IG_WRITE_RETRY if the row was changed concurrently (after
 * waiting for that writer).
 */
IgWrite
ig_direct_finish(IgCall *call, IgRow *row, IgState new_state, Datum value,
				 bool isnull, TimestampTz stamp)
{
	static const IgCol updated[] = {
		IG_COL_STATE, IG_COL_UPDATED_AT, IG_COL_COMPLETED_AT, IG_COL_RESULT,
		IG_COL_LAST_ERROR, IG_COL_PAYLOAD, IG_COL_PAYLOAD_DROPPED
	};
	IgWriter	w;
	TM_Result	result;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	IgIndexUpdate update_indexes;

	CheckCmdReplicaIdentity(ig_store_rel(call), CMD_UPDATE);
	ig_writer_begin(&w, call, updated, lengthof(updated), false);

	heap_deform_tuple(row->tuple, RelationGetDescr(w.rel),
					  w.slot->tts_values, w.slot->tts_isnull);
	ig_writer_set(&w, IG_COL_STATE,
				  ig_state_datum(ig_shape.state_type, new_state), false);
	ig_writer_set(&w, IG_COL_UPDATED_AT, TimestampTzGetDatum(stamp), false);
	if (new_state == IG_COMPLETED)
	{
		/* the evidence is kept while a person may need it, not after */
		ig_writer_set(&w, IG_COL_COMPLETED_AT, TimestampTzGetDatum(stamp), false);
		ig_writer_set(&w, IG_COL_PAYLOAD, (Datum) 0, true);
		ig_writer_set(&w, IG_COL_PAYLOAD_DROPPED, (Datum) 0, true);
	}
	ig_writer_set(&w, new_state == IG_COMPLETED ? IG_COL_RESULT : IG_COL_LAST_ERROR,
				  isnull ? (Datum) 0 : ig_untoasted(value), isnull);
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
				ig_error_serialization(call, result == TM_Updated ? "update" : "delete");
			break;
		default:
			elog(ERROR, "unexpected table_tuple_update status: %u", result);
	}
	ig_writer_end(&w);

	if (result != TM_Ok)
		return IG_WRITE_RETRY;
	row->state = new_state;
	row->updated_at = stamp;
	return IG_WRITE_DONE;
}
