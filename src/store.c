/*-------------------------------------------------------------------------
 *
 * store.c
 *	  The claim store: the shape of idem_gate.claims, the primary-key probe,
 *	  and the choice between the direct writes (direct.c) and SQL.
 *
 * Every write is guarded by what the caller read: an update names the
 * token and state it read, an insert conflicts with a concurrent one, and
 * a write that finds the row changed answers IG_WRITE_RETRY, after which
 * the state machine reads the row again.  Atomicity comes from PostgreSQL
 * itself: of any number of concurrent first claims exactly one inserts and
 * the others wait for it and then see its row; every other grant re-checks
 * the token it read, so under READ COMMITTED exactly one caller wins.
 *
 * Duplicates are answered from ig_store_probe(), a direct read of the
 * primary key: they write nothing, not even WAL.  New claims, completions
 * and failures are written straight to the heap and its indexes while the
 * table is as the extension made it (decided once per relcache change, by
 * the identity of its columns, types and constraints); anything a DBA
 * added that the direct path does not enforce sends the writes through
 * SQL, which honours it, and says so once per backend in the log.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_type.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "citus.h"
#include "compat.h"
#include "durable.h"
#include "store.h"
#include "store_int.h"

bool		idem_direct_writes = true;

/*
 * Define idem_gate.direct_writes: on (the default), new claims, completions
 * and failures are written straight to the heap while the table is as the
 * extension made it; off sends them through SQL, to compare the two or to
 * rule the direct path out when looking for a problem.
 */
void
ig_store_define_settings(void)
{
	DefineCustomBoolVariable("idem_gate.direct_writes",
							 "Write new claims, completions and failures directly to the table when it is as the extension made it.",
							 "Off sends every write through SQL, as when the table was changed by a DBA; the results are the same, only slower.",
							 &idem_direct_writes,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}

/* Is idem_gate.claims a Citus table here (rows in shards)? */
bool
ig_store_is_citus(void)
{
	ig_shape_ensure();
	return ig_shape.citus;
}

/*
 * idem_gate.claims, opened once per call: with the lock of a write if the
 * call may write, so that reading the row and writing it take one lock.
 */
Relation
ig_store_rel(IgCall *call)
{
	if (call->rel == NULL)
	{
		ig_shape_ensure();
		call->rel = table_open(ig_shape.relid,
							   call->writes ? RowExclusiveLock : AccessShareLock);
		/* the lock may have waited for a DDL that changed the shape */
		ig_shape_ensure();
	}
	return call->rel;
}

/*
 * Refuse a write to a table the gate cannot write as the contract says:
 * one with a rule, which rewrites the gate's statements, or whose token
 * sequence could hand out a token twice.  Nothing is changed.
 */
void
ig_store_refuse(void)
{
	ig_shape_ensure();
	switch (ig_shape.refuse)
	{
		case IG_REFUSE_NONE:
			break;
		case IG_REFUSE_RULE:
			ig_refuse_rules(IG_TABLE_CLAIMS);
			break;
		case IG_REFUSE_SEQUENCE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("idem_gate cannot write idem_gate.claims: its token sequence idem_gate.token_seq cycles or does not count up"),
					 errdetail("A fencing token could then be granted to two runs."),
					 errhint("Run ALTER SEQUENCE idem_gate.token_seq NO CYCLE INCREMENT BY 1.")));
			break;
	}
}

/*
 * May this call write directly?  False sends it to SQL: the table holds
 * something the direct path does not enforce, row security applies to the
 * function's owner, or the owner lacks a privilege on the table (SQL then
 * raises PostgreSQL's own error).  Through SQL the call is guarded against
 * code attached to the table.  The first fallback of a backend is logged
 * with its reason and counted.
 */
bool
ig_store_direct(IgCall *call, AclMode mode)
{
	const char *why = NULL;

	ig_store_rel(call);
	ig_store_refuse();
	if (ig_shape.citus)
	{
		/* the rows are in shards, where SQL routes the writes */
		ig_call_guard_table(call, IG_TABLE_CLAIMS, true);
		return false;
	}
	if (!idem_direct_writes)
		why = "idem_gate.direct_writes is off";
	else if (!ig_shape.direct)
		why = ig_shape.why;
	else if (ig_rls_applies(IG_TABLE_CLAIMS))
		why = "row level security applies to the owner of the gate's functions";
	else if ((call->acl_checked & mode) != mode)
	{
		if (pg_class_aclcheck(ig_shape.relid, GetUserId(), mode) == ACLCHECK_OK)
			call->acl_checked |= mode;
		else
			why = "the owner of the gate's functions lacks a privilege on it";
	}

	if (why == NULL)
		return true;
	ig_call_guard_table(call, IG_TABLE_CLAIMS, true);
	idem_stats_count(IG_STAT_SQL_FALLBACKS);
	if (!ig_shape.logged)
	{
		ereport(LOG,
				(errmsg("idem_gate writes idem_gate.claims through SQL: %s", why),
				 errdetail("The gate's direct writes apply only while the table is as the extension made it; through SQL every write honours what was changed, at some cost in speed."),
				 errhint("Count the fallbacks in idem_gate.stats (sql_fallbacks).")));
		ig_shape.logged = true;
	}
	return false;
}

/*
 * A write that always goes through SQL (a regrant, a heartbeat, an
 * operator's action): refused or guarded as the table requires.
 */
static void
ig_store_sql_write(IgCall *call)
{
	ig_store_rel(call);
	ig_store_refuse();
	ig_call_guard_table(call, IG_TABLE_CLAIMS, true);
}

/* The probe's scan of the primary key, kept open for the call. */
typedef struct IgProbe
{
	Relation	idx;
	Snapshot	snap;
	IndexScanDesc scan;
	TupleTableSlot *slot;
} IgProbe;

/*
 * Check a privilege of the function's owner on the table once per call,
 * as the statement this call stands for would.
 */
static void
ig_store_acl(IgCall *call, AclMode mode)
{
	AclResult	acl;

	if ((call->acl_checked & mode) == mode)
		return;
	acl = pg_class_aclcheck(ig_shape.relid, GetUserId(), mode);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(call->rel));
	call->acl_checked |= mode;
}

/*
 * Read the row of (workflow, key) as it is now; found = false if none.
 *
 * This is the whole of a duplicate claim, so it reads the primary key
 * index directly rather than through SPI and the executor.  Like an SPI
 * query it takes a new snapshot (under READ COMMITTED) for the first read
 * of a call and after every write that found the row changed, so after
 * waiting for a concurrent claim it sees that claim's committed row; the
 * other keys of a batch are read in the call's snapshot, as one statement
 * would read them.  The index scan stays open for the call.  Values are
 * copied into the caller's memory context.  The function's owner needs
 * SELECT on the table, as for the query this stands for.
 */
void
ig_store_probe(IgCall *call, IgRow *row, bool keep_tuple)
{
	MemoryContext old;
	Relation	rel;
	IgProbe    *p = call->probe;
	ScanKeyData skey[2];

	memset(row, 0, sizeof(*row));
	row->result_isnull = true;

	rel = ig_store_rel(call);
	ig_store_acl(call, ACL_SELECT);
	if (ig_shape.citus || ig_rls_applies(IG_TABLE_CLAIMS))
	{
		/* through SQL, which routes it to the shard or applies the policies */
		ig_call_guard_table(call, IG_TABLE_CLAIMS, false);
		ig_sql_probe(call, row);
		return;
	}

	old = MemoryContextSwitchTo(call->callcxt);
	if (p == NULL)
	{
		p = palloc0(sizeof(IgProbe));
		p->idx = index_open(ig_shape.pk_index, AccessShareLock);
		p->slot = table_slot_create(rel, NULL);
		call->probe = p;
	}
	if (call->fresh_snapshot || p->scan == NULL)
	{
		if (p->scan != NULL)
		{
			index_endscan(p->scan);
			UnregisterSnapshot(p->snap);
		}
		CommandCounterIncrement();
		p->snap = RegisterSnapshot(GetTransactionSnapshot());
		p->scan = ig_compat_index_beginscan(rel, p->idx, p->snap, 2, 0);
		call->fresh_snapshot = false;
	}
	ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_TEXTEQ, call->workflow);
	skey[0].sk_collation = p->idx->rd_indcollation[0];
	ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_TEXTEQ, call->key);
	skey[1].sk_collation = p->idx->rd_indcollation[1];
	index_rescan(p->scan, skey, 2, NULL, 0);

	if (index_getnext_slot(p->scan, ForwardScanDirection, p->slot))
	{
		TupleTableSlot *slot = p->slot;
		bool		isnull;
		Datum		d;

		row->found = true;
		d = slot_getattr(slot, ig_shape.att[IG_COL_STATE], &isnull);
		row->state = ig_state_from_datum(ig_shape.state_type, d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_TOKEN], &isnull);
		row->token = DatumGetInt64(d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_ATTEMPT], &isnull);
		row->attempt = DatumGetInt32(d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_CLAIMED_AT], &isnull);
		row->claimed_at = DatumGetTimestampTz(d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_UPDATED_AT], &isnull);
		row->updated_at = DatumGetTimestampTz(d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_EXECUTION_ID], &isnull);
		row->execution_id = isnull ? NULL : TextDatumGetCString(d);
		d = slot_getattr(slot, ig_shape.att[IG_COL_FINGERPRINT], &isnull);
		row->fingerprint = isnull ? NULL : TextDatumGetCString(d);
		if (ig_shape.has_token_issued)
		{
			d = slot_getattr(slot, ig_shape.att[IG_COL_TOKEN_ISSUED], &isnull);
			row->token_issued = !isnull && DatumGetBool(d);
		}
		d = slot_getattr(slot, ig_shape.att[IG_COL_RESULT], &row->result_isnull);
		if (!row->result_isnull)
			row->result = PointerGetDatum(DatumGetJsonbPCopy(d));
		row->tid = slot->tts_tid;
		if (keep_tuple)
			row->tuple = ExecCopySlotHeapTuple(slot);
		ExecClearTuple(slot);
	}
	MemoryContextSwitchTo(old);
}

/*
 * The row a first claim wrote, as either path wrote it: processing,
 * attempt 1, the token drawn, claimed and updated now.
 */
void
ig_row_new(IgRow *row, int64 token, TimestampTz now, const IgGrant *grant)
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

/*
 * A write's result: when the row changed first, the next read of the call
 * takes a new snapshot, to see what changed it; when it was written, the
 * commit records where, for the answers later read from it (durable.c).
 */
static inline IgWrite
ig_store_result(IgCall *call, IgWrite result)
{
	if (result == IG_WRITE_RETRY)
		call->fresh_snapshot = true;
	else
		ig_durable_wrote(call->workflow_str, call->key_str);
	return result;
}

/*
 * The first claim of (workflow, key), as INSERT ... ON CONFLICT DO NOTHING
 * would: IG_WRITE_RETRY if a concurrent claim inserted it first.
 */
IgWrite
ig_store_insert(IgCall *call, const IgGrant *grant, bool precheck, IgRow *row)
{
	TimestampTz now = GetCurrentTimestamp();

	if (ig_store_direct(call, ACL_INSERT))
		return ig_store_result(call, ig_direct_insert(call, grant, precheck, now, row));
	return ig_store_result(call, ig_sql_insert(call, grant, now, row));
}

/*
 * Grant a claim again: the retry of a failed_retryable row, or the
 * takeover of a processing row not updated since cutoff.  Rare enough to
 * go through SQL always.
 */
IgWrite
ig_store_regrant(IgCall *call, const IgGrant *grant, IgRow *row,
				 bool takeover, TimestampTz cutoff)
{
	ig_store_sql_write(call);
	return ig_store_result(call, ig_sql_regrant(call, grant, row, takeover, cutoff,
												GetCurrentTimestamp()));
}

/*
 * The owner's transition of a processing row, read by the probe with its
 * tuple, to completed or a failed state, storing value (the receipt or
 * the error).
 */
IgWrite
ig_store_finish(IgCall *call, IgRow *row, IgState new_state, Datum value,
				bool isnull)
{
	TimestampTz stamp = Max(GetCurrentTimestamp(), row->updated_at);

	if (ig_store_direct(call, ACL_UPDATE))
		return ig_store_result(call, ig_direct_finish(call, row, new_state, value,
													  isnull, stamp));
	return ig_store_result(call, ig_sql_finish(call, row, new_state, value,
											   isnull, stamp));
}

/* Move updated_at of the processing row the caller's token owns to now. */
IgWrite
ig_store_heartbeat(IgCall *call, IgRow *row)
{
	ig_store_sql_write(call);
	return ig_store_result(call, ig_sql_heartbeat(call, row,
												  Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator's decision on the row as read. */
IgWrite
ig_store_resolve(IgCall *call, IgRow *row, bool complete, Datum result,
				 bool isnull)
{
	ig_store_sql_write(call);
	return ig_store_result(call, ig_sql_resolve(call, row, complete, result, isnull,
												Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator forgets the row as read. */
IgWrite
ig_store_release(IgCall *call, IgRow *row)
{
	ig_store_sql_write(call);
	return ig_store_result(call, ig_sql_release(call, row));
}

/*
 * Close what a call opened: the table (its lock stays until the end of the
 * transaction) and SPI.
 */
void
ig_store_close(IgCall *call)
{
	IgProbe    *p = call->probe;

	if (p != NULL)
	{
		if (p->scan != NULL)
		{
			index_endscan(p->scan);
			UnregisterSnapshot(p->snap);
		}
		ExecDropSingleTupleTableSlot(p->slot);
		index_close(p->idx, NoLock);
		call->probe = NULL;
	}
	ig_direct_close(call);
	if (call->rel != NULL)
		table_close(call->rel, NoLock);
	call->rel = NULL;
	if (call->spi_connected && SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	call->spi_connected = false;
}
