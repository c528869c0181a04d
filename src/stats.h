/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Shared-memory counters behind the idem_gate.stats view.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STATS_H
#define IDEM_GATE_STATS_H

#include "datatype/timestamp.h"

#include "base.h"

/* The counters; the first IG_NUM_OUTCOMES count claims by outcome. */
typedef enum IgStat
{
	IG_STAT_COMPLETIONS = IG_NUM_OUTCOMES,
	IG_STAT_FAILS_RETRYABLE,
	IG_STAT_FAILS_REVIEW,
	IG_STAT_RESOLVES,
	IG_STAT_DELETED_COMPLETED,
	IG_STAT_DELETED_FAILED,
	IG_STAT_ALERTS,
	IG_STAT_ESCALATIONS,
	IG_STAT_PASSES,
	/* 1.1 */
	IG_STAT_RELEASES,
	IG_STAT_RECEIPTS_CLEARED,
	IG_STAT_MISMATCHES,
	IG_STAT_SQL_FALLBACKS,
	IG_NUM_STATS
} IgStat;

/* The counters idem_gate.stats_counters() shows in version 1.0 */
#define IG_NUM_STATS_1_0	(IG_STAT_PASSES + 1)

extern void ig_stats_request_shmem(void);
extern void ig_stats_count(IgStat stat);
extern void ig_stats_add(IgStat stat, uint64 n);
extern uint64 ig_stats_gate_calls(void);
extern void ig_stats_pass_done(TimestampTz start, TimestampTz end);

static inline void
ig_stats_count_outcome(IgOutcome outcome)
{
	ig_stats_count((IgStat) outcome);
}

#endif							/* IDEM_GATE_STATS_H */
