/*-------------------------------------------------------------------------
 *
 * janitor_int.h
 *	  Internals of a janitor pass, shared by janitor.c (the pass),
 *	  janitor_sql.c (its statements) and janitor_alert.c (its alerts).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JANITOR_INT_H
#define IDEM_GATE_JANITOR_INT_H

#include "executor/spi.h"
#include "nodes/pg_list.h"

#include "citus.h"
#include "janitor.h"

/* Examples named in the pass's WARNING line. */
#define IG_ALERT_EXAMPLES	3

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

/* A pass in progress. */
typedef struct IgPass
{
	bool		own_transactions;	/* the worker: one transaction per batch */
	bool		v11;			/* the catalog has 1.1's objects */
	bool		v12;			/* ... and 1.2's (the claims' payload) */
	MemoryContext cxt;			/* survives the batches' transactions */
	IgJanitorCounts *counts;
	int64		receipts_cleared;
	IgPolicy   *policies;
	int			npolicies;
	List	   *watermarks;		/* receipts cleared, per workflow */
	char	   *examples[IG_ALERT_EXAMPLES];
	uint64		calls;			/* gate calls seen at the last batch */
	int			limit;			/* rows per batch now */
	const IgCitusShard *shard;	/* on Citus: the local shard being cleaned */
	bool		forward_alerts; /* a Citus worker: alerts go to the coordinator */
	List	   *forward;		/* this batch's alert payloads to send there */
} IgPass;

/* The prepared statements, per catalog version. */
typedef enum IgJPlan
{
	IG_JPLAN_NEXT_WF,			/* + IgStep: one per step */
	IG_JPLAN_BATCH = IG_NUM_STEPS,	/* + IgStep */
	IG_JPLAN_POLICIES = 2 * IG_NUM_STEPS,
	IG_JPLAN_WATERMARK,
	IG_JPLAN_PRUNE_AUDIT,
	IG_NUM_JPLANS
} IgJPlan;

extern const char *const ig_step_states[IG_NUM_STEPS];

/* janitor_sql.c */
extern void ig_unit_begin(IgPass *pass);
extern void ig_unit_end(IgPass *pass);
extern void ig_jexec(IgPass *pass, IgJPlan id, Datum *values, const char *nulls);
extern double ig_jfloat(HeapTuple tup, int col);

/* janitor_alert.c */
extern void ig_alert_rows(IgPass *pass, bool review);
extern void ig_alert_forward(IgPass *pass);
extern char *ig_alert_payload(const char *workflow, const char *reason,
							  TimestampTz at);

#endif							/* IDEM_GATE_JANITOR_INT_H */
