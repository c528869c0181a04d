/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters in shared memory: claims by outcome, completions, failures,
 *	  resolves and the janitor's work since the last reset.
 *
 * The claim functions are the hot path, so a counter is one atomic add, no
 * lock.  Without shared_preload_libraries there is no shared memory; the
 * counting functions then do nothing and the stats view says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "stats.h"

typedef struct IgShared
{
	pg_atomic_uint64 counters[IG_NUM_STATS];
	pg_atomic_uint64 last_pass_end;		/* TimestampTz, 0 = never */
	pg_atomic_uint64 last_pass_usecs;
	pg_atomic_uint64 reset_at;	/* TimestampTz */
} IgShared;

static IgShared *shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void stats_shmem_request(void);
static void stats_shmem_startup(void);

/*
 * Called from _PG_init while preloading: ask for our shared memory.
 */
void
ig_stats_request_shmem(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(IgShared)));
}

/*
 * Attach to (or create and zero) the counters.
 */
static void
stats_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_gate", sizeof(IgShared), &found);
	if (!found)
	{
		for (int i = 0; i < IG_NUM_STATS; i++)
			pg_atomic_init_u64(&shared->counters[i], 0);
		pg_atomic_init_u64(&shared->last_pass_end, 0);
		pg_atomic_init_u64(&shared->last_pass_usecs, 0);
		pg_atomic_init_u64(&shared->reset_at, (uint64) GetCurrentTimestamp());
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Count one event. */
void
ig_stats_count(IgStat stat)
{
	if (shared)
		pg_atomic_fetch_add_u64(&shared->counters[stat], 1);
}

/*
 * Calls of the gate's functions so far (claims, completions, failures,
 * resolutions): the worker yields to the claims while this moves.
 */
uint64
ig_stats_gate_calls(void)
{
	uint64		n = 0;

	if (shared == NULL)
		return 0;
	for (int i = 0; i <= IG_STAT_RESOLVES; i++)
		n += pg_atomic_read_u64(&shared->counters[i]);
	return n;
}

/* Count n events. */
void
ig_stats_add(IgStat stat, uint64 n)
{
	if (shared && n > 0)
		pg_atomic_fetch_add_u64(&shared->counters[stat], n);
}

/* Record a finished janitor pass. */
void
ig_stats_pass_done(TimestampTz start, TimestampTz end)
{
	if (!shared)
		return;
	pg_atomic_fetch_add_u64(&shared->counters[IG_STAT_PASSES], 1);
	pg_atomic_write_u64(&shared->last_pass_end, (uint64) end);
	pg_atomic_write_u64(&shared->last_pass_usecs,
						(uint64) Max(end - start, 0));
}

/*
 * One row of counters for the stats view: available, the first ncounters
 * counters, then last_pass_at, last_pass_ms and reset_at; a row of NULLs
 * with available = false when not preloaded.  Each version of the view
 * has its own number of counters (its own C symbol below), so that a
 * database not yet updated keeps working with a newer library.
 */
static Datum
counters_result(FunctionCallInfo fcinfo, int ncounters)
{
	TupleDesc	tupdesc;
	Datum		values[IG_NUM_STATS + 4];
	bool		nulls[IG_NUM_STATS + 4];
	int			n = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != ncounters + 4)
		elog(ERROR, "idem_gate.stats_counters() has %d columns, expected %d",
			 tupdesc->natts, ncounters + 4);

	memset(nulls, shared == NULL, sizeof(nulls));
	values[n] = BoolGetDatum(shared != NULL);
	nulls[n++] = false;
	for (int i = 0; i < ncounters; i++)
		values[n++] = shared ?
			Int64GetDatum((int64) pg_atomic_read_u64(&shared->counters[i])) : 0;
	if (shared)
	{
		uint64		end = pg_atomic_read_u64(&shared->last_pass_end);

		values[n] = TimestampTzGetDatum((TimestampTz) end);
		nulls[n++] = (end == 0);
		values[n] = Float8GetDatum(pg_atomic_read_u64(&shared->last_pass_usecs) / 1000.0);
		nulls[n++] = (end == 0);
		values[n++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&shared->reset_at));
	}
	else
		n += 3;
	Assert(n == ncounters + 4);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* idem_gate.stats_counters() of version 1.0 */
PG_FUNCTION_INFO_V1(idem_gate_stats_counters);

Datum
idem_gate_stats_counters(PG_FUNCTION_ARGS)
{
	return counters_result(fcinfo, IG_NUM_STATS_1_0);
}

/* idem_gate.stats_counters() of version 1.1: releases and what follows */
PG_FUNCTION_INFO_V1(idem_gate_stats_counters_1_1);

Datum
idem_gate_stats_counters_1_1(PG_FUNCTION_ARGS)
{
	return counters_result(fcinfo, IG_NUM_STATS);
}

/*
 * idem_gate.stats_reset(): start counting from zero.
 */
PG_FUNCTION_INFO_V1(idem_gate_stats_reset);

Datum
idem_gate_stats_reset(PG_FUNCTION_ARGS)
{
	if (!shared)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_gate counters are unavailable"),
				 errdetail("The counters live in shared memory, which idem_gate gets only when it is preloaded."),
				 errhint("Add idem_gate to shared_preload_libraries and restart the server.")));

	for (int i = 0; i < IG_NUM_STATS; i++)
		pg_atomic_write_u64(&shared->counters[i], 0);
	pg_atomic_write_u64(&shared->last_pass_end, 0);
	pg_atomic_write_u64(&shared->last_pass_usecs, 0);
	pg_atomic_write_u64(&shared->reset_at, (uint64) GetCurrentTimestamp());
	PG_RETURN_VOID();
}
