/*-------------------------------------------------------------------------
 *
 * call.h
 *	  The frame of one API call: arguments, the owner switch, the enum
 *	  caches and the errors every gate function can raise.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CALL_H
#define IDEM_GATE_CALL_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "utils/relcache.h"

#include "shape.h"
#include "stats.h"

/* States, in the order of the idem_gate.state labels. */
typedef enum IgState
{
	IG_PROCESSING,
	IG_COMPLETED,
	IG_FAILED_RETRYABLE,
	IG_NEEDS_REVIEW,
	IG_NUM_STATES
} IgState;

extern const char *const ig_state_names[IG_NUM_STATES];

/* What each API function sets up and tears down. */
typedef struct IgCall
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level;		/* search_path pinned at this level, or 0 */
	MemoryContext callcxt;		/* the caller's context, for results */
	Datum		workflow;
	Datum		key;
	const char *workflow_str;	/* for messages */
	const char *key_str;
	bool		writes;			/* the call may write idem_gate.claims */
	Relation	rel;			/* idem_gate.claims, opened on first use */
	bool		spi_connected;	/* only the SQL path needs SPI */
	/* kept for the call, so that a batch sets them up once (store.c) */
	void	   *probe;			/* the primary key's open scan */
	void	   *inserter;		/* the direct insert's executor state */
	bool		fresh_snapshot; /* the next probe takes a new snapshot */
	uint32		acl_checked;	/* privileges checked in this call (AclMode) */
} IgCall;

/* idem_gate.max_key_length */
extern int	idem_max_key_length;
extern int	idem_max_payload_bytes;
extern int	idem_max_attempts;

extern void ig_call_define_settings(void);
extern char *idem_display(const char *s);
extern void ig_call_begin(FunctionCallInfo fcinfo, IgCall *call,
						  const char *fname, bool writes);
extern void ig_call_open(FunctionCallInfo fcinfo, IgCall *call,
						 const char *fname, bool writes);
extern void ig_call_end(IgCall *call);
extern bool ig_call_active(void);
extern void ig_call_act_as_owner(FunctionCallInfo fcinfo, Oid *save_userid,
								 int *save_sec_context);
extern void ig_call_guard_user_code(IgCall *call, IgTable table,
									const char *what);
extern void ig_call_guard_table(IgCall *call, IgTable table, bool write);
extern void ig_refuse_rules(IgTable table);
extern int	ig_call_pin_search_path(void);

extern const char *ig_text_arg(FunctionCallInfo fcinfo, int argno,
							   const char *what, Datum *value);
extern const char *ig_key_element(Datum d, int ord, Datum *value);
extern int64 ig_required_token(FunctionCallInfo fcinfo, int argno);
extern int64 ig_duration_usecs(FunctionCallInfo fcinfo, int argno,
							   const char *what);

/* enum values */
extern Datum ig_state_datum(Oid typoid, IgState state);
extern Datum ig_outcome_datum(Oid typoid, IgOutcome outcome);
extern IgState ig_state_from_datum(Oid typoid, Datum d);
extern Oid	ig_rettype(FunctionCallInfo fcinfo, const char *name);

/* per-workflow access (acl.c) */
extern bool idem_workflow_acl;
extern void ig_acl_check(Oid caller, Oid owner, const char *workflow);
extern void idem_acl_define_settings(void);

/* errors */
extern void ig_error_no_claim(IgCall *call, const char *verb);
extern void ig_error_state(IgCall *call, const char *verb, IgState state);
extern void ig_error_stale_token(IgCall *call, int64 token, IgState state,
								 int attempt);
extern void ig_error_token_required(IgCall *call, const char *fname);
extern void ig_error_serialization(IgCall *call, const char *what);

#endif							/* IDEM_GATE_CALL_H */
