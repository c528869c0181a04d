/*-------------------------------------------------------------------------
 *
 * audit.h
 *	  idem_gate.audit: the trail of operators' and the janitor's decisions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_AUDIT_H
#define IDEM_GATE_AUDIT_H

#include "call.h"

extern void ig_audit_record(IgCall *call, const char *action,
							IgState before, bool has_after, IgState after,
							int64 token, text *reason, text *actor);
extern void ig_audit_allow_pruning(bool allow);

#endif							/* IDEM_GATE_AUDIT_H */
