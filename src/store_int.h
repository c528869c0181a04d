/*-------------------------------------------------------------------------
 *
 * store_int.h
 *	  Internals of the claim store, shared by store.c (the shape and the
 *	  choice), direct.c (the direct writes) and store_sql.c (the SQL path).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_STORE_INT_H
#define IDEM_GATE_STORE_INT_H

#include "executor/spi.h"
#include "utils/acl.h"

#include "store.h"

/* The columns of idem_gate.claims the store reads or writes. */
typedef enum IgCol
{
	IG_COL_WORKFLOW,
	IG_COL_KEY,
	IG_COL_STATE,
	IG_COL_ATTEMPT,
	IG_COL_TOKEN,
	IG_COL_EXECUTION_ID,
	IG_COL_FINGERPRINT,
	IG_COL_RESULT,
	IG_COL_LAST_ERROR,
	IG_COL_CREATED_AT,
	IG_COL_CLAIMED_AT,
	IG_COL_UPDATED_AT,
	IG_COL_COMPLETED_AT,
	IG_COL_ALERTED_TOKEN,
	IG_COL_TOKEN_ISSUED,		/* 1.1; absent from a 1.0 table */
	IG_NUM_COLS
} IgCol;

/*
 * What the store knows of idem_gate.claims, decided again after every
 * relcache invalidation of the table.
 */
typedef struct IgShape
{
	bool		valid;
	Oid			relid;
	Oid			token_seq;
	Oid			pk_index;
	Oid			state_type;
	AttrNumber	att[IG_NUM_COLS];	/* InvalidAttrNumber: column absent */
	bool		has_token_issued;
	bool		direct;			/* the direct writes may be used */
	bool		user_code;		/* writes run code a DBA attached */
	const char *why;			/* why not direct (a constant string) */
	bool		logged;			/* the fallback was logged */
	bool		citus;			/* a Citus table: rows in shards, all SQL */
	int32		citus_group;	/* this node's Citus group id */
} IgShape;

extern IgShape ig_shape;

/* store.c */
extern void ig_shape_load(void);
extern Relation ig_store_rel(IgCall *call);
extern bool ig_store_direct(IgCall *call, AclMode mode);
extern void ig_row_new(IgRow *row, int64 token, TimestampTz now,
					   const IgGrant *grant);

/* direct.c */
extern IgWrite ig_direct_insert(IgCall *call, const IgGrant *grant,
								bool precheck, TimestampTz now, IgRow *row);
extern void ig_direct_close(IgCall *call);
extern IgWrite ig_direct_finish(IgCall *call, IgRow *row, IgState new_state,
								Datum value, bool isnull, TimestampTz stamp);

/* citus.c */
extern bool ig_citus_table(Oid relid, int32 *group);
extern int64 ig_citus_next_token(int64 above);

/* store_sql.c */
extern void ig_sql_forget_plans(void);
extern void ig_sql_probe(IgCall *call, IgRow *row);
extern IgWrite ig_sql_insert(IgCall *call, const IgGrant *grant,
							 TimestampTz now, IgRow *row);
extern IgWrite ig_sql_regrant(IgCall *call, const IgGrant *grant, IgRow *row,
							  bool takeover, TimestampTz cutoff, TimestampTz now);
extern IgWrite ig_sql_finish(IgCall *call, IgRow *row, IgState new_state,
							 Datum value, bool isnull, TimestampTz stamp);
extern IgWrite ig_sql_heartbeat(IgCall *call, IgRow *row, TimestampTz stamp);
extern IgWrite ig_sql_resolve(IgCall *call, IgRow *row, bool complete,
							  Datum result, bool isnull, TimestampTz stamp);
extern IgWrite ig_sql_release(IgCall *call, IgRow *row);

#endif							/* IDEM_GATE_STORE_INT_H */
