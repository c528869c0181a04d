/*-------------------------------------------------------------------------
 *
 * citus_batch.c
 *	  idem_claim_many on Citus: one round trip per shard group.
 *
 * The keys of a batch live on several shards.  Claimed key by key through
 * the distributed table, each costs the node running the batch about two
 * round trips to the key's node.  Instead, outside a transaction block,
 * that node groups the keys by shard (Citus's own hashing, read from its
 * metadata, no round trip) and sends each group as one call of
 * idem_gate.claim_many_group, which distribute() registered as a
 * distributed function on its anchor argument, a key of the group: Citus
 * delegates the call to the node holding the shard, which claims the
 * group's keys as idem_claim_many does on one server (claim.c, sorted by
 * key, so no deadlock) and answers with their positions in the caller's
 * array.  The rows are returned in that order.
 *
 * Citus delegates a call only when it is a whole statement outside any
 * transaction block, and counts the statements of a function as one unless
 * citus.function_opens_transaction_block is off; it is turned off for the
 * groups' statements only, and claim_many_group turns it back on for its
 * own SQL.  Each group therefore commits on its node as the delegated
 * idem_claim_ex of each of its keys would: a batch whose later group fails
 * (a node down, a fingerprint that does not match) keeps the claims of the
 * groups before it, whose keys are then in_flight until stale_interval, as
 * after a run that died once it had claimed them.  Inside BEGIN ... COMMIT
 * nothing is delegated and the batch is claimed key by key within the
 * caller's transaction (claim.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

#include "acl.h"
#include "citus_batch.h"
#include "shape.h"

#define IG_CITUS_XACT_GUC "citus.function_opens_transaction_block"

/* An element of the batch and the shard its key hashes to. */
typedef struct IgShardElem
{
	int64		shard;
	int			idx;			/* 0-based position in the caller's array */
} IgShardElem;

/* Group order: by shard, then by position in the caller's array. */
static int
shard_cmp(const void *a, const void *b)
{
	const IgShardElem *x = a;
	const IgShardElem *y = b;

	if (x->shard != y->shard)
		return (x->shard > y->shard) - (x->shard < y->shard);
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/*
 * Does an idem_claim_many here go by shard group?  Where the claims are in
 * Citus shards, Citus is loaded, and no transaction block holds the batch
 * together.
 */
bool
ig_citus_batch_applies(void)
{
	return ig_shape_is_citus() && !IsTransactionBlock() &&
		GetConfigOption(IG_CITUS_XACT_GUC, true, false) != NULL;
}

/* One-dimensional array of the chosen elements of a datum list. */
static Datum
sub_array(Datum *elems, const IgShardElem *order, int from, int count,
		  Oid type)
{
	Datum	   *d = palloc(sizeof(Datum) * count);

	for (int i = 0; i < count; i++)
		d[i] = elems[order[from + i].idx];
	if (type == TEXTOID)
		return PointerGetDatum(construct_array(d, count, TEXTOID, -1, false,
											   TYPALIGN_INT));
	return PointerGetDatum(construct_array(d, count, INT4OID, sizeof(int32),
										   true, TYPALIGN_INT));
}

/*
 * Claim idem_claim_many's n keys (and fingerprints, or NULL: its
 * arguments, checked and taken apart by claim.c) by shard group and put
 * the rows, in input order, in its result.  Runs with the owner's rights
 * (claim_many_group is not public); caller is the role whose per-workflow
 * grants each group's node checks.
 */
void
ig_citus_batch_claim(FunctionCallInfo fcinfo, Datum *keys, Datum *fps, int n,
					 Oid caller)
{
	static const char *const group_sql =
		"SELECT * FROM idem_gate.claim_many_group($1, $2, $3, $4, $5, $6, $7, $8)";
	static const Oid group_types[8] = {TEXTARRAYOID, TEXTOID, INTERVALOID,
	TEXTARRAYOID, TEXTOID, TEXTOID, INT4ARRAYOID, NAMEOID};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum	   *ords = palloc(sizeof(Datum) * n);
	IgShardElem *order = palloc(sizeof(IgShardElem) * n);
	HeapTuple  *rows = palloc0(sizeof(HeapTuple) * n);
	Datum		args[8];
	char		nulls[8];
	NameData	caller_name;
	Datum		shard_arg = PG_GETARG_DATUM(0);
	int			level;
	int			ret;

	for (int i = 0; i < n; i++)
		ords[i] = Int32GetDatum(i + 1);
	namestrcpy(&caller_name, GetUserNameFromId(caller, false));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option(IG_CITUS_XACT_GUC, "off",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/* the shard of each key, by Citus's hash of the distribution column */
	ret = SPI_execute_with_args("SELECT pg_catalog.get_shard_id_for_distribution_column("
								"'idem_gate.claims'::pg_catalog.regclass, u.k) "
								"FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(k, o) "
								"ORDER BY u.o",
								1, (Oid[]) {TEXTARRAYOID}, &shard_arg, NULL,
								true, 0);
	if (ret != SPI_OK_SELECT || SPI_processed != (uint64) n)
		elog(ERROR, "idem_gate could not read the shards of %d keys", n);
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		order[i].idx = i;
		order[i].shard = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc,
													 1, &isnull));
	}
	qsort(order, n, sizeof(IgShardElem), shard_cmp);

	/* the arguments every group shares */
	for (int i = 1; i <= 4; i++)
	{
		args[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	args[7] = NameGetDatum(&caller_name);
	nulls[0] = nulls[5] = nulls[6] = nulls[7] = ' ';

	for (int from = 0, to; from < n; from = to)
	{
		for (to = from + 1; to < n && order[to].shard == order[from].shard; to++)
			;
		CHECK_FOR_INTERRUPTS();
		args[0] = sub_array(keys, order, from, to - from, TEXTOID);
		if (fps != NULL)
			args[3] = sub_array(fps, order, from, to - from, TEXTOID);
		args[5] = keys[order[from].idx];
		args[6] = sub_array(ords, order, from, to - from, INT4OID);
		ret = SPI_execute_with_args(group_sql, 8, (Oid *) group_types, args,
									nulls, false, 0);
		if (ret != SPI_OK_SELECT || SPI_processed != (uint64) (to - from))
			elog(ERROR, "idem_gate's shard group of %d keys answered %d rows",
				 to - from, (int) SPI_processed);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			bool		isnull;
			int			ord = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc,
														  1, &isnull));

			if (isnull || ord < 1 || ord > n || rows[ord - 1] != NULL)
				elog(ERROR, "idem_gate's shard group answered an unknown position");
			rows[ord - 1] = SPI_copytuple(tup);
		}
	}

	AtEOXact_GUC(true, level);
	SPI_finish();
	for (int i = 0; i < n; i++)
		tuplestore_puttuple(rsinfo->setResult, rows[i]);
}

/*
 * The positions in the caller's array of a shard group's keys (argument
 * argno of claim_many_group): one per key, each 1 or more.
 */
int *
ig_citus_batch_ords(FunctionCallInfo fcinfo, int argno, int n)
{
	ArrayType  *arr;
	Datum	   *d;
	bool	   *isnull;
	int			m;
	int		   *ords;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ords must not be null"),
				 errhint("Pass the position of each key in the caller's array.")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ords must be a one-dimensional array"),
				 errhint("Pass the position of each key in the caller's array.")));
	deconstruct_array(arr, INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &d, &isnull, &m);
	if (m != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ords must have as many elements as keys"),
				 errdetail("keys has %d elements, ords %d.", n, m),
				 errhint("Pass the position of each key in the caller's array.")));
	ords = palloc(sizeof(int) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (isnull[i] || DatumGetInt32(d[i]) < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ords[%d] must be a position of 1 or more", i + 1),
					 errhint("Pass the position of each key in the caller's array.")));
		ords[i] = DatumGetInt32(d[i]);
	}
	return ords;
}

/*
 * Start a shard group on the node holding it: the per-workflow grants of
 * the role that called idem_claim_many apply (argument argno names it),
 * and the group's own SQL runs in its transaction again, whatever the
 * batch's statement set.  Returns the GUC level to end with
 * AtEOXact_GUC(true, level).
 */
int
ig_citus_batch_group_begin(FunctionCallInfo fcinfo, int argno, const char *workflow)
{
	int			level;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("caller must not be null"),
				 errhint("Pass the role that called idem_claim_many().")));
	ig_acl_check(get_role_oid(NameStr(*PG_GETARG_NAME(argno)), false),
				 GetUserId(), workflow);
	level = NewGUCNestLevel();
	if (GetConfigOption(IG_CITUS_XACT_GUC, true, false) != NULL)
		(void) set_config_option(IG_CITUS_XACT_GUC, "on",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return level;
}
