/*-------------------------------------------------------------------------
 *
 * store.c
 *	  The claim store's dispatcher: for each read and write of
 *	  idem_gate.claims, the choice between the direct backend
 *	  (store_direct.c) and SQL (store_sql.c), the privileges and guards that
 *	  choice needs, and what every write's result means for the next read.
 *
 * Every write is guarded by what the caller read: an update names the
 * token and state it read, an insert conflicts with a concurrent one, and
 * a write that finds the row changed answers IG_WRITE_RETRY, after which
 * the state machine reads the row again.  Atomicity comes from PostgreSQL
 * itself: of any number of concurrent first claims exactly one inserts and
 * the others wait for it and then see its row; every other grant re-checks
 * the token it read, so under READ COMMITTED exactly one caller wins.
 *
 * Duplicates are answered from a direct read of the primary key: they
 * write nothing, not even WAL.  New claims, completions and failures are
 * written straight to the heap and its indexes while the table is as the
 * extension made it (shape.c decides that once per relcache change);
 * anything a DBA added that the direct path does not enforce sends the
 * writes through SQL, which honours it, and says so once per backend in
 * the log.  Retries, takeovers, heartbeats and operators' actions are rare
 * and always go through SQL.  Where the rows are not in the local heap
 * (Citus) or row security applies to the owner, reads go through SQL too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "durable.h"
#include "shape.h"
#include "stats.h"
#include "store.h"
#include "store_direct.h"
#include "store_sql.h"

/* idem_gate.direct_writes */
static bool direct_writes = true;

/*
 * Define idem_gate.direct_writes: on (the default), new claims, completions
 * and failures are written straight to the heap while the table is as the
 * extension made it; off sends them through SQL, to compare the two or to
 * rule the direct path out when looking for a problem.
 */
void
ig_store_init(void)
{
	DefineCustomBoolVariable("idem_gate.direct_writes",
							 "Write new claims, completions and failures directly to the table when it is as the extension made it.",
							 "Off sends every write through SQL, as when the table was changed by a DBA; the results are the same, only slower.",
							 &direct_writes,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}

/* Set up the store for a call; nothing is opened until it is used. */
void
ig_store_begin(IgStore *st, IgCall *call)
{
	memset(st, 0, sizeof(*st));
	st->call = call;
	st->fresh_snapshot = true;
}

/*
 * idem_gate.claims, opened once per call: with the lock of a write if the
 * call may write, so that reading the row and writing it take one lock.
 */
static Relation
store_rel(IgStore *st)
{
	if (st->rel == NULL)
	{
		ig_shape_ensure();
		st->rel = table_open(ig_shape.relid,
							 st->call->writes ? RowExclusiveLock : AccessShareLock);
		/* the lock may have waited for a DDL that changed the shape */
		ig_shape_ensure();
	}
	return st->rel;
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
			ig_call_refuse_rules(IG_TABLE_CLAIMS);
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
static bool
use_direct(IgStore *st, AclMode mode)
{
	const char *why = NULL;

	store_rel(st);
	ig_store_refuse();
	if (ig_shape.citus)
	{
		/* the rows are in shards, where SQL routes the writes */
		ig_call_guard_table(st->call, IG_TABLE_CLAIMS, true);
		return false;
	}
	if (!direct_writes)
		why = "idem_gate.direct_writes is off";
	else if (!ig_shape.direct)
		why = ig_shape.why;
	else if (ig_shape_rls_applies(IG_TABLE_CLAIMS))
		why = "row level security applies to the owner of the gate's functions";
	else if ((st->acl_checked & mode) != mode)
	{
		if (pg_class_aclcheck(ig_shape.relid, GetUserId(), mode) == ACLCHECK_OK)
			st->acl_checked |= mode;
		else
			why = "the owner of the gate's functions lacks a privilege on it";
	}

	if (why == NULL)
		return true;
	ig_call_guard_table(st->call, IG_TABLE_CLAIMS, true);
	ig_stats_count(IG_STAT_SQL_FALLBACKS);
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
sql_write(IgStore *st)
{
	store_rel(st);
	ig_store_refuse();
	ig_call_guard_table(st->call, IG_TABLE_CLAIMS, true);
}

/*
 * Check a privilege of the function's owner on the table once per call,
 * as the statement this call stands for would.
 */
static void
check_acl(IgStore *st, AclMode mode)
{
	AclResult	acl;

	if ((st->acl_checked & mode) == mode)
		return;
	acl = pg_class_aclcheck(ig_shape.relid, GetUserId(), mode);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(st->rel));
	st->acl_checked |= mode;
}

/*
 * Read the row of (workflow, key) as it is now; found = false if none.
 * This is the whole of a duplicate claim: read directly from the primary
 * key, or through SQL where the rows are in Citus's shards or row
 * security applies, guarded then against the policies' code.  The
 * function's owner needs SELECT on the table, as for the query this
 * stands for.
 */
void
ig_store_probe(IgStore *st, IgRow *row, bool keep_tuple)
{
	memset(row, 0, sizeof(*row));
	row->result_isnull = true;

	store_rel(st);
	check_acl(st, ACL_SELECT);
	if (ig_shape.citus || ig_shape_rls_applies(IG_TABLE_CLAIMS))
	{
		ig_call_guard_table(st->call, IG_TABLE_CLAIMS, false);
		ig_store_sql_probe(st, row);
		return;
	}
	ig_store_direct_probe(st, row, keep_tuple);
}

/*
 * Does a claim of the call's key exist, committed or still being written
 * by another transaction, whatever this call's snapshot sees?  One being
 * written is waited for.  For a keyed key under another secret, which the
 * primary key cannot see as a conflict.  On Citus the rows are in shards,
 * out of the direct read's reach: false.
 */
bool
ig_store_claimed_elsewhere(IgStore *st)
{
	store_rel(st);
	if (ig_shape.citus)
		return false;
	return ig_store_direct_claimed_elsewhere(st);
}

/* The next read of the call takes a new snapshot (READ COMMITTED). */
void
ig_store_refresh(IgStore *st)
{
	st->fresh_snapshot = true;
}

/*
 * A write's result: when the row changed first, the next read of the call
 * takes a new snapshot, to see what changed it; when it was written, the
 * commit records where, for the answers later read from it (durable.c).
 */
static inline IgWrite
write_result(IgStore *st, IgWrite result)
{
	if (result == IG_WRITE_RETRY)
		st->fresh_snapshot = true;
	else
		ig_durable_wrote(st->call->workflow_str, st->call->key_str);
	return result;
}

/*
 * The first claim of (workflow, key), as INSERT ... ON CONFLICT DO NOTHING
 * would: IG_WRITE_RETRY if a concurrent claim inserted it first.
 */
IgWrite
ig_store_insert(IgStore *st, const IgGrant *grant, bool precheck, IgRow *row)
{
	TimestampTz now = GetCurrentTimestamp();

	if (use_direct(st, ACL_INSERT))
		return write_result(st, ig_store_direct_insert(st, grant, precheck, now, row));
	return write_result(st, ig_store_sql_insert(st, grant, now, row));
}

/*
 * Grant a claim again: the retry of a failed_retryable row, or the
 * takeover of a processing row not updated since cutoff.
 */
IgWrite
ig_store_regrant(IgStore *st, const IgGrant *grant, IgRow *row,
				 bool takeover, TimestampTz cutoff)
{
	sql_write(st);
	return write_result(st, ig_store_sql_regrant(st, grant, row, takeover, cutoff,
												 GetCurrentTimestamp()));
}

/*
 * The owner's transition of a processing row, read by the probe with its
 * tuple, to completed or a failed state, storing value (the receipt or
 * the error).
 */
IgWrite
ig_store_finish(IgStore *st, IgRow *row, IgState new_state, Datum value,
				bool isnull)
{
	TimestampTz stamp = Max(GetCurrentTimestamp(), row->updated_at);

	if (use_direct(st, ACL_UPDATE))
		return write_result(st, ig_store_direct_finish(st, row, new_state, value,
													   isnull, stamp));
	return write_result(st, ig_store_sql_finish(st, row, new_state, value,
												isnull, stamp));
}

/* Move updated_at of the processing row the caller's token owns to now. */
IgWrite
ig_store_heartbeat(IgStore *st, IgRow *row)
{
	sql_write(st);
	return write_result(st, ig_store_sql_heartbeat(st, row,
												   Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator's decision on the row as read. */
IgWrite
ig_store_resolve(IgStore *st, IgRow *row, bool complete, Datum result,
				 bool isnull)
{
	sql_write(st);
	return write_result(st, ig_store_sql_resolve(st, row, complete, result, isnull,
												 Max(GetCurrentTimestamp(), row->updated_at)));
}

/* An operator forgets the row as read. */
IgWrite
ig_store_release(IgStore *st, IgRow *row)
{
	sql_write(st);
	return write_result(st, ig_store_sql_release(st, row));
}

/*
 * The whole row of (workflow, key), copied into the caller's context, or
 * NULL.  Through SQL, which checks the owner's SELECT privilege, guarded
 * against the code of a row security policy that applies to the owner.
 */
HeapTuple
ig_store_status(IgStore *st)
{
	store_rel(st);
	ig_call_guard_table(st->call, IG_TABLE_CLAIMS, false);
	return ig_store_sql_status(st);
}

/*
 * Close what the store opened for the call: the direct path's scan and
 * writer, and the table (its lock stays until the end of the transaction).
 */
void
ig_store_close(IgStore *st)
{
	ig_store_direct_close(st);
	if (st->rel != NULL)
		table_close(st->rel, NoLock);
	st->rel = NULL;
}
