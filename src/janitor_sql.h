/*-------------------------------------------------------------------------
 *
 * janitor_sql.h
 *	  The janitor's statements, as the pass (janitor.c) uses them: units of
 *	  work, and typed results in place of rows (janitor_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JANITOR_SQL_H
#define IDEM_GATE_JANITOR_SQL_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "citus.h"

/* The steps of a pass, each over the rows of one state. */
typedef enum IgStep
{
	IG_STEP_DELETE_COMPLETED,
	IG_STEP_DELETE_FAILED,
	IG_STEP_CLEAR_RECEIPTS,
	IG_STEP_STUCK,
	/* 1.2: payloads of the open states, cleared by the receipt retention */
	IG_STEP_CLEAR_PAYLOADS_PROCESSING,
	IG_STEP_CLEAR_PAYLOADS_FAILED,
	IG_STEP_CLEAR_PAYLOADS_REVIEW,
	IG_NUM_STEPS
} IgStep;

/* Where and how a pass runs its statements. */
typedef struct IgJanitorDb
{
	bool		own_transactions;	/* the worker: one transaction per unit */
	bool		v11;			/* the catalog has 1.1's objects */
	bool		v12;			/* ... and 1.2's (the claims' payload) */
	MemoryContext cxt;			/* survives the units' transactions */
	const IgCitusShard *shard;	/* on Citus: the local shard being cleaned */
} IgJanitorDb;

/* A policy row: each interval in seconds, or < 0 for "use the setting". */
typedef struct IgPolicy
{
	char	   *workflow;
	double		secs[IG_NUM_STEPS];
} IgPolicy;

/* Where the receipts of a workflow were cleared up to. */
typedef struct IgWatermark
{
	char	   *workflow;
	TimestampTz upto;
} IgWatermark;

/* Where a step's next batch resumes: after this (updated_at, token). */
typedef struct IgCursor
{
	TimestampTz at;
	int64		token;
} IgCursor;

/* What one batch is asked to do. */
typedef struct IgBatchArgs
{
	const char *workflow;
	IgCursor	after;			/* the rows after this one */
	TimestampTz cutoff;			/* ... and updated before this */
	int			limit;			/* at most this many */
	TimestampTz now;
	bool		review;			/* stuck claims move to needs_review */
	int			setting;		/* the step's setting, in seconds, for a
								 * workflow without a policy */
} IgBatchArgs;

/* A claim a stuck batch alerted, valid until the unit ends. */
typedef struct IgStuckClaim
{
	char	   *workflow;
	char	   *key;
	char	   *age;			/* how long it has been processing */
} IgStuckClaim;

/* What one batch did. */
typedef struct IgBatchResult
{
	uint64		count;			/* rows deleted, cleared or alerted */
	uint64		examined;		/* rows the batch chose, at most its limit:
								 * fewer, and the step is done */
	IgCursor	last;			/* the last of those, where the next resumes */
	IgStuckClaim *stuck;		/* the stuck step: its claims, in order */
	TimestampTz skipped;		/* receipts: the first row another transaction
								 * locked, which the batch skipped, or DT_NOEND */
} IgBatchResult;

extern void ig_janitor_sql_act_as(Oid owner);
extern void ig_janitor_sql_enter(void);
extern void ig_janitor_sql_leave(void);
extern void ig_janitor_sql_begin(IgJanitorDb *db);
extern void ig_janitor_sql_end(IgJanitorDb *db);
extern int	ig_janitor_sql_policies(IgJanitorDb *db, IgPolicy **policies);
extern List *ig_janitor_sql_watermarks(IgJanitorDb *db);
extern char *ig_janitor_sql_next_workflow(IgJanitorDb *db, IgStep step,
										  const char *prev);
extern void ig_janitor_sql_batch(IgJanitorDb *db, IgStep step,
								 const IgBatchArgs *args, IgBatchResult *res);
extern void ig_janitor_sql_save_watermark(IgJanitorDb *db, const char *workflow,
										  TimestampTz upto);
extern bool ig_janitor_sql_prepared_xacts(IgJanitorDb *db);
extern uint64 ig_janitor_sql_prune_audit(IgJanitorDb *db, TimestampTz before,
										 int limit);
extern uint64 ig_janitor_sql_drop_orphan_grants(IgJanitorDb *db);

#endif							/* IDEM_GATE_JANITOR_SQL_H */
