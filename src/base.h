/*-------------------------------------------------------------------------
 *
 * base.h
 *	  The vocabulary every layer of idem_gate shares: a claim's states and a
 *	  claim's outcomes with their enum labels, the checks of a key or
 *	  workflow name, the display of one in a message, and idem_gate's own
 *	  SQLSTATE (base.c).
 *
 * Nothing here knows a table, a call or a backend: every other file may
 * include it, and it includes none of theirs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_BASE_H
#define IDEM_GATE_BASE_H

#include "fmgr.h"

/*
 * Fingerprint mismatch: a key reused for another payload.  No standard
 * SQLSTATE means this (23505 would tell clients "duplicate, all is well"),
 * so idem_gate uses its own class "IG".
 */
#define ERRCODE_IDEM_FINGERPRINT_MISMATCH	MAKE_SQLSTATE('I','G','0','0','1')

/* Longest key or workflow shown in an error message, in characters. */
#define IG_DISPLAY_CHARS	64

/*
 * Longest key or workflow in bytes.  Two of them must fit in one btree
 * entry of the primary key (about 2,700 bytes on 8 kB pages) whatever
 * idem_gate.max_key_length says, or a long key of 4-byte characters would
 * fail with an index error instead of ours.
 */
#define IG_MAX_NAME_BYTES	1300

/* A claim's states, in the order of the idem_gate.state labels. */
typedef enum IgState
{
	IG_PROCESSING,
	IG_COMPLETED,
	IG_FAILED_RETRYABLE,
	IG_NEEDS_REVIEW,
	IG_NUM_STATES
} IgState;

/* A claim's outcomes, in the order of the idem_gate.outcome labels. */
typedef enum IgOutcome
{
	IG_OUTCOME_NEW,
	IG_OUTCOME_IN_FLIGHT,
	IG_OUTCOME_COMPLETED,
	IG_OUTCOME_STALE_TAKEN,
	IG_OUTCOME_NEEDS_REVIEW,
	IG_NUM_OUTCOMES
} IgOutcome;

extern const char *const ig_state_names[IG_NUM_STATES];

/* true when the library was loaded through shared_preload_libraries */
extern bool ig_preloaded;

extern void ig_base_init(void);
extern char *ig_display(const char *s);
extern const char *ig_check_name(text *t, const char *what, bool is_key,
								 bool secret);

extern Datum ig_state_datum(Oid typoid, IgState state);
extern Datum ig_outcome_datum(Oid typoid, IgOutcome outcome);
extern IgState ig_state_from_datum(Oid typoid, Datum d);
extern Oid	ig_rettype(FunctionCallInfo fcinfo, const char *name);

#endif							/* IDEM_GATE_BASE_H */
