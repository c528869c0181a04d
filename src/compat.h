/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place that knows how PostgreSQL's internal APIs differ between
 *	  the majors idem_gate supports (15, 17 and 18).
 *
 * idem_gate's claim store writes through the executor's building blocks
 * (the primary-key probe, speculative insertion, index maintenance and
 * table_tuple_update()), which change between majors.  Each wrapper here
 * keeps the shape the callers use and translates it for the major being
 * built, keyed on PG_VERSION_NUM; the callers stay free of #if.  A new
 * major is ported by reading its release notes against this file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "utils/backend_status.h"
#include "utils/guc.h"

#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif

/*
 * The library's magic block.  From 18 it also names the module and its
 * version (IG_VERSION, the control file's default_version, passed by the
 * Makefile), which pg_get_loaded_modules() shows to a DBA.
 */
#if PG_VERSION_NUM >= 180000
#define IG_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "idem_gate", .version = IG_VERSION)
#else
#define IG_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* fmgr.h declares the module's entry point from 16 on */
#if PG_VERSION_NUM < 160000
extern void _PG_init(void);
#endif

/*
 * The OID of rel's primary key index, InvalidOid if it has none.  18 asks
 * whether a deferrable key will do; the claim store needs an immediate
 * one, as ON CONFLICT does, and the table it reads has one.
 */
static inline Oid
ig_compat_primary_key(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/* index_beginscan(); 18 added an instrumentation argument (none here). */
static inline IndexScanDesc
ig_compat_index_beginscan(Relation heap, Relation index, Snapshot snapshot,
						  int nkeys, int norderbys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys);
#else
	return index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

/*
 * Give estate a range table of one entry, rel as the result relation 1,
 * with updated_cols (attribute numbers offset by
 * FirstLowInvalidHeapAttributeNumber, as the executor keeps them) as the
 * columns an update changes.  16 moved updatedCols from the range table
 * entry to a separate RTEPermissionInfo; 18 added the set of unpruned
 * relations, which here is the one relation.  This is what PostgreSQL's
 * own logical replication apply worker builds for the same purpose.
 */
static inline void
ig_compat_init_range_table(EState *estate, Relation rel,
						   Bitmapset *updated_cols)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;
	RTEPermissionInfo *perminfo;
#endif

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	perminfo = addRTEPermissionInfo(&perminfos, rte);
	perminfo->updatedCols = updated_cols;
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos,
					   bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
#else
	rte->updatedCols = updated_cols;
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/*
 * The pre-check of INSERT ... ON CONFLICT: false if a row conflicting with
 * slot in one of arbiter_indexes exists (its TID in *conflict_tid), after
 * waiting for its inserter.  18 added the TID of a row being updated,
 * which an insert does not have.
 */
static inline bool
ig_compat_check_index_constraints(ResultRelInfo *rri, TupleTableSlot *slot,
								  EState *estate, ItemPointer conflict_tid,
								  List *arbiter_indexes)
{
#if PG_VERSION_NUM >= 180000
	return ExecCheckIndexConstraints(rri, slot, estate, conflict_tid, NULL,
									 arbiter_indexes);
#else
	return ExecCheckIndexConstraints(rri, slot, estate, conflict_tid,
									 arbiter_indexes);
#endif
}

/*
 * Index entries for a speculatively inserted row: *spec_conflict is set if
 * one of arbiter_indexes already holds the key.  16 added "only the
 * summarizing indexes", which an insert never is.
 */
static inline void
ig_compat_insert_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot,
							  EState *estate, bool *spec_conflict,
							  List *arbiter_indexes)
{
	List	   *recheck;

#if PG_VERSION_NUM >= 160000
	recheck = ExecInsertIndexTuples(rri, slot, estate, false, true,
									spec_conflict, arbiter_indexes, false);
#else
	recheck = ExecInsertIndexTuples(rri, slot, estate, false, true,
									spec_conflict, arbiter_indexes);
#endif
	list_free(recheck);
}

/*
 * What table_tuple_update() says the new row version needs in the indexes:
 * a yes or no in 15; from 16, none, all, or only the summarizing ones.
 * Pass its address to table_tuple_update() and the value to
 * ig_compat_update_index_tuples().
 */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes IgIndexUpdate;
#else
typedef bool IgIndexUpdate;
#endif

/* Index entries for an updated row, as table_tuple_update() asked. */
static inline void
ig_compat_update_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot,
							  EState *estate, IgIndexUpdate update)
{
	List	   *recheck;

#if PG_VERSION_NUM >= 160000
	if (update == TU_None)
		return;
	recheck = ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL,
									update == TU_Summarizing);
#else
	if (!update)
		return;
	recheck = ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
#endif
	list_free(recheck);
}

/*
 * The idx-th (1-based) entry of this transaction's copy of the backends'
 * status.  16 renamed the lookup by position, keeping the old name for a
 * lookup by backend id.
 */
static inline LocalPgBackendStatus *
ig_compat_local_beentry(int idx)
{
#if PG_VERSION_NUM >= 160000
	return pgstat_get_local_beentry_by_index(idx);
#else
	return pgstat_fetch_stat_local_beentry(idx);
#endif
}

/*
 * Memory for a setting's check-hook "extra".  From 16 the GUC machinery
 * keeps it in its own memory context and frees it with pfree(), so it must
 * come from guc_malloc(); before 16 it frees it with free().
 */
#if PG_VERSION_NUM >= 160000
#define ig_guc_extra_alloc(size) guc_malloc(LOG, (size))
#else
#define ig_guc_extra_alloc(size) malloc(size)
#endif

/*
 * Keyed keys' HMAC from SHA-256 states prepared once per secret
 * (keyed_hmac.c) needs OpenSSL's EVP_MD_CTX_new(), of 1.1.0 and later.
 * The Makefile defines IG_USE_OPENSSL where PostgreSQL was built with
 * OpenSSL; 15 still builds with 1.0.1 and 17 with 1.0.2 (18 needs 1.1.1),
 * and with those, as without OpenSSL, every HMAC goes through
 * common/hmac.h.
 */
#ifdef IG_USE_OPENSSL
#include <openssl/opensslv.h>
#if OPENSSL_VERSION_NUMBER >= 0x10100000L
#define IG_HMAC_EVP 1
#endif
#endif

#endif							/* IDEM_COMPAT_H */
