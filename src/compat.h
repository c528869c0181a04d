/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place that knows how PostgreSQL's internal APIs differ
 *	  between the majors idem_gate supports (15, 17, 18).
 *
 * Each wrapper keeps the shape the callers need; the version tests live
 * here and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_COMPAT_H
#define IDEM_GATE_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

/* The OID of a table's primary key index. */
static inline Oid
ig_compat_primary_key_index(Relation rel)
{
	return RelationGetPrimaryKeyIndex(rel);
}

/* Begin an index scan with nkeys scan keys and no order-by keys. */
static inline IndexScanDesc
ig_compat_index_beginscan(Relation rel, Relation idx, Snapshot snap, int nkeys)
{
	return index_beginscan(rel, idx, snap, nkeys, 0);
}

/*
 * Give an executor state a range table of one entry, the table written,
 * with the columns an update changes (for the index "unchanged" hint).
 */
static inline void
ig_compat_init_range_table(EState *estate, Relation rel, Bitmapset *updated)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->updatedCols = updated;
	ExecInitRangeTable(estate, list_make1(rte));
}

/* ExecCheckIndexConstraints() against the arbiter indexes. */
static inline bool
ig_compat_check_index_constraints(ResultRelInfo *rri, TupleTableSlot *slot,
								  EState *estate, ItemPointer conflict_tid,
								  List *arbiter)
{
	return ExecCheckIndexConstraints(rri, slot, estate, conflict_tid, arbiter);
}

/* ExecInsertIndexTuples(); the list of recheck indexes is not needed. */
static inline void
ig_compat_insert_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot,
							  EState *estate, bool update, bool no_dup_err,
							  bool *spec_conflict, List *arbiter)
{
	List	   *recheck;

	recheck = ExecInsertIndexTuples(rri, slot, estate, update, no_dup_err,
									spec_conflict, arbiter);
	list_free(recheck);
}

/*
 * table_tuple_update() waiting for a concurrent writer, under the active
 * snapshot; *update_indexes says whether the indexes need new entries.
 */
static inline TM_Result
ig_compat_tuple_update(Relation rel, ItemPointer tid, TupleTableSlot *slot,
					   CommandId cid, TM_FailureData *tmfd,
					   LockTupleMode *lockmode, bool *update_indexes)
{
	return table_tuple_update(rel, tid, slot, cid, GetActiveSnapshot(),
							  InvalidSnapshot, true, tmfd, lockmode,
							  update_indexes);
}

#endif							/* IDEM_GATE_COMPAT_H */
