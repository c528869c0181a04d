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
#include "store.h"
#include "store_int.h"

IgShape		ig_shape;
bool		idem_direct_writes = true;

static const char *const ig_col_names[IG_NUM_COLS] = {
	"workflow", "key", "state", "attempt", "token", "execution_id",
	"fingerprint", "result", "last_error", "created_at", "claimed_at",
	"updated_at", "completed_at", "alerted_token", "token_issued"
};

/* Each column's type as the extension makes it; InvalidOid: the state enum */
static const Oid ig_col_types[IG_NUM_COLS] = {
	TEXTOID, TEXTOID, InvalidOid, INT4OID, INT8OID, TEXTOID,
	TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BOOLOID
};

static const bool ig_col_not_null[IG_NUM_COLS] = {
	true, true, true, true, true, false,
	false, false, false, true, true,
	true, false, false, true
};

/* The CHECK constraints the install and upgrade scripts create. */
static const char *const ig_check_names[] = {
	"claims_workflow_not_empty", "claims_key_not_empty",
	"claims_attempt_positive", "claims_token_positive",
	"claims_completed_at_iff_completed", "claims_completed_at_is_last_change",
	"claims_result_only_when_completed", "claims_timestamps_ordered"
};

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

/* The shape was decided for this relation; the relcache changed since. */
static void
ig_store_relcache_cb(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == ig_shape.relid)
		ig_shape.valid = false;
}

/*
 * Is this CHECK constraint one the extension made?  By name, among those
 * of the table; a DBA who replaces one of ours by their own under another
 * name is seen.
 */
static bool
ig_own_check(const char *name)
{
	for (int i = 0; i < lengthof(ig_check_names); i++)
		if (strcmp(name, ig_check_names[i]) == 0)
			return true;
	return false;
}

/*
 * Decide the direct path: does the table hold anything the direct writes
 * would not enforce?  Sets ig_shape.direct, and ig_shape.user_code when
 * what was found runs code a DBA wrote (a trigger, a CHECK of their own, a
 * default, a domain, row security), with the first reason found.
 */
static void
ig_shape_decide(Relation rel, Oid state_type)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			known = 0;
	int			nchecks = 0;

	ig_shape.direct = true;
	ig_shape.user_code = false;
	ig_shape.why = NULL;

#define IG_NOT_DIRECT(reason, code) \
	do { \
		if (ig_shape.why == NULL) \
			ig_shape.why = (reason); \
		ig_shape.direct = false; \
		ig_shape.user_code |= (code); \
	} while (0)

	if (rel->trigdesc != NULL)
	{
		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *tg = &rel->trigdesc->triggers[i];

			if (tg->tgenabled == TRIGGER_DISABLED)
				continue;
			if (TRIGGER_FOR_INSERT(tg->tgtype) || TRIGGER_FOR_UPDATE(tg->tgtype))
				IG_NOT_DIRECT("a trigger fires on its inserts or updates", true);
			if (TRIGGER_FOR_DELETE(tg->tgtype))
				ig_shape.user_code = true;	/* the janitor's and release's deletes */
		}
	}
	if (rel->rd_rel->relrowsecurity)
		IG_NOT_DIRECT("row level security is enabled", true);
	if (rel->rd_rel->relispartition)
		IG_NOT_DIRECT("it is a partition", false);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			col;

		if (att->attisdropped)
			continue;
		for (col = 0; col < IG_NUM_COLS; col++)
			if (ig_shape.att[col] == att->attnum)
				break;
		if (col == IG_NUM_COLS)
		{
			IG_NOT_DIRECT("it has a column the extension did not make", att->atthasdef);
			continue;
		}
		known++;
		if (att->atttypid != (OidIsValid(ig_col_types[col]) ? ig_col_types[col] : state_type))
			IG_NOT_DIRECT("a column's type was changed", true);
		if (att->attnotnull != ig_col_not_null[col])
			IG_NOT_DIRECT("a column's NOT NULL was changed", false);
		if (att->attgenerated != '\0')
			IG_NOT_DIRECT("a column is generated", true);
		if (att->atthasdef && col != IG_COL_TOKEN_ISSUED)
			IG_NOT_DIRECT("a column has a default", true);
	}

	if (desc->constr != NULL)
	{
		for (int i = 0; i < desc->constr->num_check; i++)
		{
			ConstrCheck *check = &desc->constr->check[i];

			nchecks++;
			if (!ig_own_check(check->ccname))
				IG_NOT_DIRECT("it has a CHECK constraint the extension did not make", true);
		}
	}
	if (nchecks != lengthof(ig_check_names))
		IG_NOT_DIRECT("one of its CHECK constraints was dropped", false);
#undef IG_NOT_DIRECT
	(void) known;
}

/*
 * Learn the shape of idem_gate.claims: its OID, its columns' numbers, the
 * token sequence, and whether the direct path may write it.  Done again
 * after any relcache invalidation of the table (ALTER TABLE, CREATE
 * TRIGGER, ALTER EXTENSION UPDATE, DROP and CREATE EXTENSION).
 */
void
ig_shape_load(void)
{
	static bool registered = false;
	Oid			nsp;
	Oid			relid;
	Oid			state_type;
	Relation	rel;
	bool		had_token_issued = ig_shape.has_token_issued;
	bool		had_citus = ig_shape.citus;
	Oid			old_relid = ig_shape.relid;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(ig_store_relcache_cb, (Datum) 0);
		registered = true;
	}

	nsp = get_namespace_oid("idem_gate", false);
	relid = get_relname_relid("claims", nsp);
	if (!OidIsValid(relid))
		elog(ERROR, "relation idem_gate.claims does not exist");

	ig_shape.valid = true;		/* an invalidation from here on counts */
	ig_shape.relid = relid;
	for (int i = 0; i < IG_NUM_COLS; i++)
	{
		ig_shape.att[i] = get_attnum(relid, ig_col_names[i]);
		if (ig_shape.att[i] == InvalidAttrNumber && i != IG_COL_TOKEN_ISSUED)
			elog(ERROR, "idem_gate.claims has no column \"%s\"", ig_col_names[i]);
	}
	ig_shape.has_token_issued = (ig_shape.att[IG_COL_TOKEN_ISSUED] != InvalidAttrNumber);
	ig_shape.token_seq = get_relname_relid("token_seq", nsp);
	if (!OidIsValid(ig_shape.token_seq))
		elog(ERROR, "sequence idem_gate.token_seq does not exist");
	state_type = get_atttype(relid, ig_shape.att[IG_COL_STATE]);
	ig_shape.state_type = state_type;

	rel = table_open(relid, AccessShareLock);
	ig_shape.pk_index = ig_compat_primary_key(rel);
	ig_shape_decide(rel, state_type);
	table_close(rel, AccessShareLock);
	ig_shape.citus = ig_citus_table(relid, &ig_shape.citus_group);

	if (relid != old_relid || had_token_issued != ig_shape.has_token_issued ||
		had_citus != ig_shape.citus)
		ig_sql_forget_plans();
	ig_shape.logged = false;
}

/* The shape, loaded if the relcache changed since it was decided. */
static inline void
ig_shape_ensure(void)
{
	if (!ig_shape.valid)
		ig_shape_load();
}

/* Is idem_gate.claims a Citus table here (rows in shards)? */
bool
ig_store_is_citus(void)
{
	ig_shape_ensure();
	return ig_shape.citus;
}

/*
 * Does a write of idem_gate.claims run code a DBA attached to it?  The
 * janitor asks before its deletes run with the owner's rights.
 */
bool
ig_store_runs_user_code(void)
{
	ig_shape_ensure();
	return ig_shape.user_code;
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
 * May this call write directly?  False sends it to SQL: the table holds
 * something the direct path does not enforce, or the function's owner
 * lacks a privilege on it (SQL then raises PostgreSQL's own error).  The
 * first fallback of a backend is logged with its reason and counted.
 */
bool
ig_store_direct(IgCall *call, AclMode mode)
{
	const char *why = NULL;

	ig_store_rel(call);
	if (ig_shape.citus)
	{
		/* the rows are in shards, where SQL routes the writes */
		if (ig_shape.user_code)
			ig_call_guard_user_code(call, "code attached to idem_gate.claims");
		return false;
	}
	if (!idem_direct_writes)
		why = "idem_gate.direct_writes is off";
	else if (!ig_shape.direct)
		why = ig_shape.why;
	else if ((call->acl_checked & mode) != mode)
	{
		if (pg_class_aclcheck(ig_shape.relid, GetUserId(), mode) == ACLCHECK_OK)
			call->acl_checked |= mode;
		else
			why = "the owner of the gate's functions lacks a privilege on it";
	}

	if (why == NULL)
		return true;
	if (ig_shape.user_code)
		ig_call_guard_user_code(call, "code attached to idem_gate.claims");
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
	if (ig_shape.citus)
	{
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
 * takes a new snapshot, to see what changed it.
 */
static inline IgWrite
ig_store_result(IgCall *call, IgWrite result)
{
	if (result == IG_WRITE_RETRY)
		call->fresh_snapshot = true;
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
	ig_store_rel(call);
	if (ig_shape.user_code)
		ig_call_guard_user_code(call, "code attached to idem_gate.claims");
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
	ig_store_rel(call);
	if (ig_shape.user_code)
		ig_call_guard_user_code(call, "code attached to idem_gate.claims");
	return ig_store_result(call, ig_sql_heartbeat(call, row,
												  Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator's decision on the row as read. */
IgWrite
ig_store_resolve(IgCall *call, IgRow *row, bool complete, Datum result,
				 bool isnull)
{
	ig_store_rel(call);
	if (ig_shape.user_code)
		ig_call_guard_user_code(call, "code attached to idem_gate.claims");
	return ig_store_result(call, ig_sql_resolve(call, row, complete, result, isnull,
												Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator forgets the row as read. */
IgWrite
ig_store_release(IgCall *call, IgRow *row)
{
	ig_store_rel(call);
	if (ig_shape.user_code)
		ig_call_guard_user_code(call, "code attached to idem_gate.claims");
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
