/*-------------------------------------------------------------------------
 *
 * call.h
 *	  The frame of one API call: its arguments checked, the switch to the
 *	  owner of the function called, the search_path pinned while code that
 *	  somebody attached runs, a connection to SPI for whoever needs one,
 *	  and the errors every gate function can raise (call.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CALL_H
#define IDEM_GATE_CALL_H

#include "fmgr.h"

#include "base.h"
#include "keyed.h"
#include "shape.h"

/* What each API function sets up and tears down. */
typedef struct IgCall
{
	Oid			save_userid;	/* the caller */
	int			save_sec_context;
	int			guc_level;		/* search_path pinned at this level, or 0 */
	bool		spi_connected;	/* connected by ig_call_spi() */
	MemoryContext callcxt;		/* the caller's context, for results */
	bool		writes;			/* the call may write idem_gate.claims */
	Datum		workflow;
	Datum		key;
	const char *workflow_str;	/* for messages */
	const char *key_str;		/* the stored form, in a keyed workflow */
	bool		workflow_keyed; /* the workflow's policy says keyed */
	IgKeyForms *keyed;			/* its key's stored forms, or NULL */
} IgCall;

extern void ig_call_begin(FunctionCallInfo fcinfo, IgCall *call,
						  const char *fname, bool writes);
extern void ig_call_open(FunctionCallInfo fcinfo, IgCall *call,
						 const char *fname, bool writes);
extern void ig_call_spi(IgCall *call);
extern void ig_call_end(IgCall *call);
extern void ig_call_act_as_owner(FunctionCallInfo fcinfo, Oid *save_userid,
								 int *save_sec_context);
extern int	ig_call_pin_search_path(void);

/* code attached to the extension's tables */
extern void ig_call_guard_user_code(IgCall *call, IgTable table,
									const char *what);
extern void ig_call_guard_table(IgCall *call, IgTable table, bool write);
extern char *ig_call_attached_code(IgTable table, bool write);
extern void ig_call_refuse_rules(IgTable table);

/* arguments */
extern const char *ig_call_text_arg(FunctionCallInfo fcinfo, int argno,
									const char *what, Datum *value, bool secret);
extern const char *ig_call_key_element(IgCall *call, Datum d, int ord,
									   Datum *value, IgKeyForms **forms);
extern int64 ig_call_token_arg(FunctionCallInfo fcinfo, int argno);
extern int64 ig_call_duration_arg(FunctionCallInfo fcinfo, int argno,
								  const char *what);

/* errors */
extern void ig_call_error_no_claim(IgCall *call, const char *verb,
								   const char *detail);
extern void ig_call_error_state(IgCall *call, const char *verb, IgState state,
								const char *detail);
extern void ig_call_error_stale_token(IgCall *call, int64 token, IgState state,
									  int attempt);
extern void ig_call_error_token_required(IgCall *call, const char *fname);
extern void ig_call_error_serialization(IgCall *call, const char *what);

#endif							/* IDEM_GATE_CALL_H */
