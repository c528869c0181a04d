/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  With synchronous replication configured, every answer the gate gives
 *	  is durable on the synchronous standbys before it returns.
 *
 * PostgreSQL makes a commit visible on the primary before its
 * synchronous-replication wait ends, and a wait that is cut short (the
 * client's connection drops, the standby is unreachable) leaves a
 * transaction committed locally only.  A claim retried after that reads
 * the row and answers at once: new for the owning run's re-entry, or
 * completed, in_flight, needs_review for a duplicate.  If the primary then
 * dies and the standby, which never had the row, is promoted, that answer
 * is lost: the same token could be granted to two runs.
 *
 * So an answer read from a row waits until the synchronous standbys have
 * confirmed the commit that wrote it, and every write before it.  To wait
 * only when needed, the gate remembers the commit position of its own
 * writes: each key hashes to one of IG_DURABLE_SLOTS slots in shared
 * memory, which holds the largest commit end LSN of a gate transaction
 * that wrote a key of that slot, and how many such transactions are
 * committing right now (between their pre-commit and commit, when their
 * rows may already be visible but their LSN not yet known: a reader then
 * takes the current end of WAL).  Collisions only make a reader wait for
 * a later LSN than its own row's.  After a restart or a promotion, rows
 * written before this server started answering are covered by a floor: the
 * end of WAL when the first answer after start-up was read.  A duplicate
 * whose row the standby already has therefore compares two positions and
 * goes on: no round trip.
 *
 * The wait itself polls the standbys' confirmed position, the one
 * SyncRepWaitForLSN() compares with, on the latch with a short growing
 * timeout, as the wait event SyncRep; a cancel or a termination ends it
 * with an error, never an answer.  Writes need no wait of their own:
 * their commit waits, at least for the standbys' flush (a transaction that
 * wrote a claim raises its synchronous_commit to on when synchronous
 * standbys are configured).
 *
 * Without shared_preload_libraries there is no shared memory: an answer
 * then waits for the end of WAL as it was when the row was read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "replication/walsender.h"
#include "replication/syncrep.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "durable.h"

/* Slots of key hashes; a power of two. */
#define IG_DURABLE_SLOTS	8192

/* A slot's LSN after a prepared transaction wrote a key of it: unknown. */
#define IG_LSN_UNKNOWN		PG_UINT64_MAX

/* The longest pause between two looks at the standbys' position, in ms. */
#define IG_WAIT_MAX_MS		50

typedef struct IgDurableShared
{
	pg_atomic_uint64 floor;		/* end of WAL at the first answer; 0 = none yet */
	pg_atomic_uint64 lsn[IG_DURABLE_SLOTS];
	pg_atomic_uint32 committing[IG_DURABLE_SLOTS];
} IgDurableShared;

static IgDurableShared *shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * The slots the current transaction wrote keys of: a bitmap, and the first
 * IG_DURABLE_LISTED of them in a list, so that the usual transaction (one
 * claim, one key) visits its one slot at commit rather than the bitmap's
 * 128 words.
 */
#define IG_DURABLE_LISTED	16
static uint64 written[IG_DURABLE_SLOTS / 64];
static int	listed[IG_DURABLE_LISTED];
static int	nlisted = 0;
static bool overflowed = false; /* more slots than the list holds */
static bool wrote_any = false;
static bool slots_raised = false;	/* its slots' counts were raised */
static bool callback_registered = false;

static void durable_shmem_request(void);
static void durable_shmem_startup(void);

/* Called from _PG_init while preloading: ask for the slots. */
void
ig_durable_request_shmem(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = durable_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = durable_shmem_startup;
}

static void
durable_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(IgDurableShared)));
}

/* Attach to the slots, or create them: all empty, no floor yet. */
static void
durable_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_gate durable answers",
							 sizeof(IgDurableShared), &found);
	if (!found)
	{
		pg_atomic_init_u64(&shared->floor, 0);
		for (int i = 0; i < IG_DURABLE_SLOTS; i++)
		{
			pg_atomic_init_u64(&shared->lsn[i], 0);
			pg_atomic_init_u32(&shared->committing[i], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Are synchronous standbys configured, so that answers must wait for
 * them?  As the checkpointer last published it, or as this backend's own
 * setting says: either is enough.  Never on a standby.
 */
static bool
sync_standbys_defined(void)
{
	if (WalSndCtl == NULL || max_wal_senders == 0 || RecoveryInProgress())
		return false;
	return (((volatile WalSndCtlData *) WalSndCtl)->sync_standbys_status &
			SYNC_STANDBY_DEFINED) != 0 ||
		(SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0');
}

/* The slot of a key. */
static int
slot_of(const char *workflow, const char *key)
{
	uint32		h = hash_bytes((const unsigned char *) workflow, strlen(workflow));

	h = hash_combine(h, hash_bytes((const unsigned char *) key, strlen(key)));
	return h & (IG_DURABLE_SLOTS - 1);
}

/*
 * The next slot the transaction wrote, from *pos (start at 0), or -1 after
 * the last: from the list, or from the bitmap when the list overflowed.
 */
static int
next_written(int *pos)
{
	if (!overflowed)
		return (*pos < nlisted) ? listed[(*pos)++] : -1;
	for (; *pos < IG_DURABLE_SLOTS; (*pos)++)
	{
		uint64		bits = written[*pos / 64] >> (*pos % 64);

		if (bits == 0)
		{
			*pos = (*pos / 64 + 1) * 64 - 1;	/* the rest of the word is empty */
			continue;
		}
		*pos += pg_rightmost_one_pos64(bits);
		return (*pos)++;
	}
	return -1;
}

/* Raise (delta 1) or lower (-1) the committing count of the written slots. */
static void
slots_committing(int delta)
{
	int			pos = 0;
	int			slot;

	while ((slot = next_written(&pos)) >= 0)
	{
		if (delta > 0)
			pg_atomic_fetch_add_u32(&shared->committing[slot], 1);
		else
			pg_atomic_fetch_sub_u32(&shared->committing[slot], 1);
	}
}

/* Set the written slots' LSN to at least lsn. */
static void
slots_advance(uint64 lsn)
{
	int			pos = 0;
	int			slot;

	while ((slot = next_written(&pos)) >= 0)
	{
		pg_atomic_uint64 *p = &shared->lsn[slot];
		uint64		cur = pg_atomic_read_u64(p);

		while (cur < lsn && !pg_atomic_compare_exchange_u64(p, &cur, lsn))
			;
	}
}

/* Forget the written slots: the transaction ended. */
static void
slots_forget(void)
{
	if (overflowed)
		memset(written, 0, sizeof(written));
	else
		for (int i = 0; i < nlisted; i++)
			written[listed[i] / 64] = 0;
	nlisted = 0;
	overflowed = false;
	wrote_any = false;
}

/*
 * A transaction that wrote claims ends: with synchronous standbys
 * configured, it waits at least for their flush, whatever the session's
 * synchronous_commit says.  Every way a transaction ends goes through
 * here: a plain COMMIT, a procedure's COMMIT (which commits through the
 * same path), and PREPARE TRANSACTION, whose own record then waits, so
 * that COMMIT PREPARED, which no longer knows what the transaction wrote,
 * finds it on the standbys already: after a failover the prepared
 * transaction is still there, holding its rows, and nobody is answered
 * new for them.
 */
static void
raise_synchronous_commit(void)
{
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH &&
		sync_standbys_defined())
		(void) set_config_option("synchronous_commit", "on",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * The end of a transaction that wrote claims.  Before its commit record:
 * count it as committing in its slots (its rows may be visible before its
 * LSN is known), and make it wait for the synchronous standbys' flush at
 * least.  After the commit: record its commit LSN in the slots.  A
 * prepared transaction's PREPARE record waits likewise; its commit comes
 * later, elsewhere: its slots keep an unknown LSN, and answers from them
 * wait for the end of WAL.
 */
static void
durable_xact_cb(XactEvent event, void *arg)
{
	if (!wrote_any)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			raise_synchronous_commit();
			if (shared != NULL)
			{
				slots_committing(1);
				slots_raised = true;
			}
			return;
		case XACT_EVENT_PRE_PREPARE:
			/* PREPARE TRANSACTION then waits for the standbys' flush */
			raise_synchronous_commit();
			if (shared != NULL)
				slots_advance(IG_LSN_UNKNOWN);
			break;
		case XACT_EVENT_COMMIT:
			if (slots_raised)
			{
				slots_advance(XactLastCommitEnd);
				pg_write_barrier();
			}
			/* FALLTHROUGH */
		case XACT_EVENT_ABORT:
			if (slots_raised)
				slots_committing(-1);
			break;
		default:
			return;
	}
	slots_forget();
	slots_raised = false;
}

/*
 * The gate is writing the row of (workflow, key) in this transaction:
 * remember its slot for the commit.
 */
void
ig_durable_wrote(const char *workflow, const char *key)
{
	int			slot = slot_of(workflow, key);

	if (!callback_registered)
	{
		RegisterXactCallback(durable_xact_cb, NULL);
		callback_registered = true;
	}
	if (written[slot / 64] & (UINT64CONST(1) << (slot % 64)))
		return;
	written[slot / 64] |= UINT64CONST(1) << (slot % 64);
	if (nlisted < IG_DURABLE_LISTED)
		listed[nlisted++] = slot;
	else
		overflowed = true;
	wrote_any = true;
}

/*
 * The position the synchronous standbys must have confirmed before an
 * answer read from the row of (workflow, key) may be given, or
 * InvalidXLogRecPtr when none must: no synchronous standbys configured.
 * Call it after reading the row.
 */
XLogRecPtr
ig_durable_lsn(const char *workflow, const char *key)
{
	int			slot;
	uint64		floor;
	uint64		lsn;

	if (!sync_standbys_defined())
		return InvalidXLogRecPtr;
	if (shared == NULL)
		return GetXLogInsertRecPtr();

	floor = pg_atomic_read_u64(&shared->floor);
	if (floor == 0)
	{
		uint64		now = GetXLogInsertRecPtr();

		(void) pg_atomic_compare_exchange_u64(&shared->floor, &floor, now);
		floor = pg_atomic_read_u64(&shared->floor);
	}
	slot = slot_of(workflow, key);
	pg_memory_barrier();
	if (pg_atomic_read_u32(&shared->committing[slot]) > 0)
		return GetXLogInsertRecPtr();
	pg_read_barrier();
	lsn = pg_atomic_read_u64(&shared->lsn[slot]);
	if (lsn == IG_LSN_UNKNOWN)
		return GetXLogInsertRecPtr();
	return Max(lsn, floor);
}

/*
 * Wait until the synchronous standbys have confirmed lsn: flushed, or
 * applied under synchronous_commit = remote_apply.  Returns at once when
 * they have, the usual case.  A cancel, a statement timeout or a
 * termination ends the wait with an error; so the caller never answers
 * from a row they may lack.  Stops waiting when synchronous standbys are
 * no longer configured, as PostgreSQL releases its own waiters then.
 */
void
ig_durable_wait(XLogRecPtr lsn)
{
	int			mode = (synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY) ?
		SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH;
	long		pause = 1;

	if (XLogRecPtrIsInvalid(lsn))
		return;
	for (;;)
	{
		XLogRecPtr	confirmed;

		pg_read_barrier();
		confirmed = ((volatile WalSndCtlData *) WalSndCtl)->lsn[mode];
		if (confirmed >= lsn || !sync_standbys_defined())
			return;
		CHECK_FOR_INTERRUPTS();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause, WAIT_EVENT_SYNC_REP);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		pause = Min(pause * 2, IG_WAIT_MAX_MS);
	}
}
