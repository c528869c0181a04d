/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  The claim layer: the state machine of one claim (claim.c), which
 *	  idem_claim, idem_claim_ex and each key of idem_claim_many
 *	  (claim_many.c) run, and the limits it checks.  The owner's and the
 *	  operators' calls (claim_owner.c, claim_operator.c) need no more than
 *	  the store.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CLAIM_H
#define IDEM_GATE_CLAIM_H

#include "access/xlogdefs.h"

#include "store.h"

/* The arguments of one claim, checked. */
typedef struct IgClaimArgs
{
	bool		has_stale;
	TimestampTz cutoff;			/* processing rows updated up to here are stale */
	IgGrant		grant;
	const char *execution_str;
	const char *fingerprint_str;
} IgClaimArgs;

/* The result of one claim. */
typedef struct IgClaimResult
{
	IgOutcome	outcome;
	IgRow		row;
	bool		granted;		/* the caller owns the token */
	bool		wrote;			/* the claim wrote the row (not a re-entry) */
	XLogRecPtr	durable;		/* an answer read from the row: what the
								 * synchronous standbys must confirm first */
} IgClaimResult;

/* idem_gate.max_attempts */
extern int	ig_claim_max_attempts;

extern void ig_claim_init(void);
extern void ig_claim_args(FunctionCallInfo fcinfo, int stale_arg, int fp_arg,
						  int exec_arg, int payload_arg, bool token_issued,
						  IgClaimArgs *a);
extern void ig_claim_payload(Datum d, const char *what, IgGrant *grant);
extern void ig_claim_probe(IgStore *st, IgRow *row, bool keep_tuple);
extern void ig_claim_key(IgStore *st, const IgClaimArgs *a, IgClaimResult *res);
extern void ig_claim_values(TupleDesc desc, int first, IgClaimResult *res,
							Datum *values, bool *nulls);
extern void ig_claim_error_fingerprint(IgCall *call, const char *given);

#endif							/* IDEM_GATE_CLAIM_H */
