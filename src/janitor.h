/*-------------------------------------------------------------------------
 *
 * janitor.h
 *	  The janitor pass and the background worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JANITOR_H
#define IDEM_GATE_JANITOR_H

/* idem_gate.stuck_action */
typedef enum IdemStuckAction
{
	IDEM_STUCK_ALERT,
	IDEM_STUCK_REVIEW
} IdemStuckAction;

typedef struct IgJanitorCounts
{
	int64		deleted_completed;
	int64		deleted_failed;
	int64		alerts;
	int64		escalated;
} IgJanitorCounts;

/* settings, in seconds where they are times */
extern int	idem_retention;
extern int	idem_receipt_retention;
extern int	idem_audit_retention;
extern int	idem_failed_retention;
extern int	idem_stuck_after;
extern int	idem_stuck_action;
extern int	idem_batch_size;
extern int	idem_batch_delay;

extern void idem_janitor_define_settings(void);
extern void ig_alert_announce(const char *workflow, const char *reason);
extern void idem_janitor_pass(IgJanitorCounts *counts, bool own_transactions);

#endif							/* IDEM_GATE_JANITOR_H */
