/*-------------------------------------------------------------------------
 *
 * shape.h
 *	  What idem_gate knows of each table it reads or writes: whether it is
 *	  exactly as the extension made it, and whether touching it runs code
 *	  that somebody else attached (shape.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_SHAPE_H
#define IDEM_GATE_SHAPE_H

#include "access/attnum.h"
#include "utils/relcache.h"

/* The extension's tables that the gate or its janitor reads or writes. */
typedef enum IgTable
{
	IG_TABLE_CLAIMS,
	IG_TABLE_AUDIT,
	IG_TABLE_WATERMARKS,
	IG_TABLE_POLICIES,
	IG_TABLE_WORKFLOW_ACL,
	IG_NUM_TABLES
} IgTable;

/*
 * One table as the gate found it, decided again after every relcache
 * invalidation of it, and after a load that an error (a lock timeout, a
 * cancel) cut short: what such a load left is never used.  "Code" is
 * anything that runs a function that is neither PostgreSQL's own
 * (pg_catalog) nor idem_gate's: a trigger, a rule, a CHECK, default or
 * generated column, a column of a domain or other type of somebody
 * else's, an index expression, partial-index predicate or operator class,
 * a row security policy.
 */
typedef struct IgTableShape
{
	bool		valid;			/* no invalidation since the last load began */
	bool		complete;		/* ... and that load ran to its end */
	Oid			relid;			/* InvalidOid: not in this catalog's version */
	Oid			owner;
	bool		rls;			/* row level security is enabled */
	bool		force_rls;		/* ... and forced on the owner */
	const char *write_code;		/* code a write runs (a description), or NULL */
	const char *policy_code;	/* code a policy runs where it applies, or NULL */
	char	   *rule;			/* the name of a rule on the table, or NULL */
	char	   *cached_code;	/* code a per-backend cache keeps parsed under
								 * the caller's search_path, or NULL */
} IgTableShape;

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
	IG_COL_PAYLOAD,				/* 1.2; absent from older tables */
	IG_COL_PAYLOAD_DROPPED,		/* 1.2 */
	IG_NUM_COLS
} IgCol;

/* Why the gate refuses every write to idem_gate.claims. */
typedef enum IgRefusal
{
	IG_REFUSE_NONE,
	IG_REFUSE_RULE,				/* a rule would rewrite the gate's statements */
	IG_REFUSE_SEQUENCE			/* the token sequence could repeat a token */
} IgRefusal;

/*
 * What the claim store knows of idem_gate.claims on top of the common
 * shape: its columns, its indexes and sequence, and whether the direct
 * writes may be used.
 */
typedef struct IgShape
{
	bool		valid;			/* no invalidation since the last load began */
	bool		complete;		/* ... and that load ran to its end */
	Oid			relid;
	Oid			token_seq;
	Oid			pk_index;
	Oid			state_type;
	AttrNumber	att[IG_NUM_COLS];	/* InvalidAttrNumber: column absent */
	bool		has_token_issued;
	bool		has_payload;	/* the payload columns (1.2) */
	bool		direct;			/* the direct writes may be used */
	const char *why;			/* why not direct (a constant string) */
	IgRefusal	refuse;			/* why no write is possible */
	bool		logged;			/* the fallback was logged */
	bool		citus;			/* a Citus table: rows in shards, all SQL */
	int32		citus_group;	/* this node's Citus group id */
	uint32		epoch;			/* moves when the SQL path must prepare anew */
} IgShape;

extern IgShape ig_shape;

extern const IgTableShape *ig_shape_table(IgTable table);
extern const char *ig_shape_table_name(IgTable table);
extern bool ig_shape_rls_applies(IgTable table);
extern void ig_shape_ensure(void);
extern bool ig_shape_is_citus(void);
extern void ig_shape_refresh_domains(void);

#endif							/* IDEM_GATE_SHAPE_H */
