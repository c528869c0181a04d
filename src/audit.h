/*-------------------------------------------------------------------------
 *
 * audit.h
 *	  idem_gate.audit: the trail of operators' and the janitor's decisions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_AUDIT_H
#define IDEM_GATE_AUDIT_H

#include "datatype/timestamp.h"

#include "call.h"

extern void ig_audit_record(IgCall *call, const char *action,
							IgState before, bool has_after, IgState after,
							int64 token, text *reason, text *actor);
extern char *ig_audit_last_decision(IgCall *call, TimestampTz changed_at);
extern void ig_audit_allow_pruning(bool allow);

#endif							/* IDEM_GATE_AUDIT_H */
