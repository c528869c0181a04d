/*-------------------------------------------------------------------------
 *
 * janitor.h
 *	  One janitor pass: retention, receipt and payload clearing, stuck-claim
 *	  alerts and the pruning of the audit trail (janitor.c), run by the
 *	  background worker and by idem_gate.janitor_run().
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JANITOR_H
#define IDEM_GATE_JANITOR_H

/* What a pass did. */
typedef struct IgJanitorCounts
{
	int64		deleted_completed;
	int64		deleted_failed;
	int64		alerts;
	int64		escalated;
} IgJanitorCounts;

extern void ig_janitor_init(void);
extern void ig_janitor_pass(IgJanitorCounts *counts, bool own_transactions,
							Oid role);

#endif							/* IDEM_GATE_JANITOR_H */
