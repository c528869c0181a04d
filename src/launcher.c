/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: it finds the databases to serve and starts a janitor
 *	  (worker.c) for a pass in each, every idem_gate.naptime.
 *
 * The launcher is registered at preload time, starts only once recovery is
 * over (so never on a standby, and at promotion) and connects to no
 * database.  Every idem_gate.naptime, and at once after a reload, it reads
 * pg_database: the databases that idem_gate.database names or, when it is
 * empty, every database that allows connections and is not a template.
 * Each of them gets a janitor every naptime, timed from the start of its
 * last pass, at most idem_gate.max_janitors at once, the database served
 * longest ago first.  A database or role that does not exist is reported
 * once and waited for: no restart loop of FATAL connection errors.
 *
 * A janitor holds no connection between passes, so a plain DROP DATABASE
 * goes through.  Should DROP DATABASE (or anything else that needs a
 * database without connections: ALTER DATABASE RENAME or SET TABLESPACE,
 * CREATE DATABASE ... TEMPLATE) come while a pass runs, the launcher sees
 * the lock it takes on the database and ends the pass, as DROP DATABASE
 * itself ends an autovacuum worker's; and it starts no pass there while
 * that lock is held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "worker.h"

/* How often the launcher looks for a DROP DATABASE while janitors run. */
#define IG_WATCH_MS			250

/* A database busy with DROP, RENAME...: try again this much later. */
#define IG_BUSY_RETRY_MS	1000

/* A slot that no janitor took this long after its launcher died is free. */
#define IG_ORPHAN_SECS		60

/* The launcher's view of one database it serves. */
typedef struct IgDb
{
	Oid			dboid;
	NameData	name;
	TimestampTz last_start;		/* of its last pass; 0 = never */
	TimestampTz not_before;		/* busy with DROP, RENAME...: wait */
	IgExtState ext;
	IgPassState pass;
	bool		seen;			/* in the latest scan */
} IgDb;

static IgDb *dbs = NULL;
static int	ndbs = 0;
static BackgroundWorkerHandle **handles = NULL;	/* per slot */
static bool *ended = NULL;	/* per slot: asked to end its pass */
static List *reported_missing = NIL; /* names reported missing */
static bool names_given = false;	/* idem_gate.database lists databases */
static Oid	worker_roleoid = InvalidOid;
static bool role_ok = true;
static bool rescan = true;
static TimestampTz start_retry = 0;
static MemoryContext scan_cxt = NULL;

PGDLLEXPORT void idem_gate_launcher_main(Datum main_arg);

/*
 * Wait on the latch for up to timeout_ms, handling SIGHUP (the launcher
 * then reads the database list again at once).  Never a sleep: SIGTERM,
 * SIGHUP, a janitor's exit and postmaster death end the wait.
 */
static void
wait_on_latch(long timeout_ms)
{
	int			rc;

	rc = WaitLatch(MyLatch,
				   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   Max(timeout_ms, 0), PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		rescan = true;
	}
}

/*
 * Does another session need this database without connections?  DROP
 * DATABASE, ALTER DATABASE RENAME / SET TABLESPACE and CREATE DATABASE
 * ... TEMPLATE lock the database in a mode that conflicts with the one a
 * connecting backend takes, hold it while they wait for the others to
 * leave, and fail if they do not within 5 seconds.  Asked without waiting,
 * and released at once.
 */
static bool
database_wanted(Oid dboid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, dboid, 0);
	if (LockAcquire(&tag, RowExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, RowExclusiveLock, true);
	return false;
}

/* Was this name reported as missing or unusable? */
static bool
was_reported(List *reported, const char *name)
{
	ListCell   *lc;

	foreach(lc, reported)
	{
		if (strcmp((char *) lfirst(lc), name) == 0)
			return true;
	}
	return false;
}

/* Mark a database as one to serve, adding it if new. */
static void
db_seen(Form_pg_database form)
{
	static int	allocated = 0;
	IgDb	   *db = NULL;

	for (int i = 0; i < ndbs && db == NULL; i++)
	{
		if (dbs[i].dboid == form->oid)
			db = &dbs[i];
	}
	if (db == NULL)
	{
		if (ndbs == allocated)
		{
			allocated = Max(16, allocated * 2);
			dbs = dbs ?
				repalloc(dbs, allocated * sizeof(IgDb)) :
				MemoryContextAlloc(TopMemoryContext, allocated * sizeof(IgDb));
		}
		db = &dbs[ndbs++];
		memset(db, 0, sizeof(IgDb));
		db->dboid = form->oid;
	}
	db->name = form->datname;	/* it may have been renamed */
	db->seen = true;
}

/* A database the launcher serves, named for a (rare) log line. */
static const char *
db_name(Oid dboid)
{
	for (int i = 0; i < ndbs; i++)
	{
		if (dbs[i].dboid == dboid)
			return psprintf("\"%s\"", NameStr(dbs[i].name));
	}
	return psprintf("with OID %u", dboid);
}

/*
 * Read pg_database (and pg_authid for the role) with plain heap scans:
 * without a database, the launcher cannot use catalog indexes (the
 * autovacuum launcher reads pg_database the same way).  Databases that are
 * gone are forgotten; a named one that is missing or does not allow
 * connections is reported once, until it comes back.
 */
static void
scan_databases(void)
{
	MemoryContext old = MemoryContextSwitchTo(scan_cxt);
	List	   *names = NIL;
	List	   *found = NIL;
	List	   *reported = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	ListCell   *lc;
	int			kept = 0;

	if (ig_worker_database != NULL && !SplitGUCList(pstrdup(ig_worker_database), ',', &names))
		names = NIL;			/* the check hook refuses a bad list */
	names_given = (names != NIL);
	for (int i = 0; i < ndbs; i++)
		dbs[i].seen = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	MemoryContextSwitchTo(scan_cxt);
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		const char *name = NameStr(db->datname);

		if (database_is_invalid_form(db))
			continue;			/* a DROP DATABASE was interrupted */
		if (!names_given)
		{
			if (db->datallowconn && !db->datistemplate)
				db_seen(db);
			continue;
		}
		foreach(lc, names)
		{
			if (strcmp((char *) lfirst(lc), name) != 0)
				continue;
			found = lappend(found, lfirst(lc));
			if (db->datallowconn)
				db_seen(db);
			else
			{
				reported = lappend(reported, pstrdup(name));
				if (!was_reported(reported_missing, name))
					ereport(LOG,
							(errmsg("idem_gate: database \"%s\" does not allow connections; the janitor skips it",
									name)));
			}
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	foreach(lc, names)
	{
		char	   *name = (char *) lfirst(lc);

		if (list_member_ptr(found, name))
			continue;
		reported = lappend(reported, pstrdup(name));
		if (!was_reported(reported_missing, name))
			ereport(LOG,
					(errmsg("idem_gate: database \"%s\" does not exist; the janitor waits for it",
							name),
					 errhint("Create the database, or remove it from idem_gate.database and reload the configuration.")));
	}

	/* the role, found again in case it was dropped or created */
	worker_roleoid = InvalidOid;
	if (ig_worker_role != NULL && ig_worker_role[0] != '\0')
	{
		bool		was_ok = role_ok;

		rel = table_open(AuthIdRelationId, AccessShareLock);
		scan = table_beginscan_catalog(rel, 0, NULL);
		while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			Form_pg_authid role = (Form_pg_authid) GETSTRUCT(tup);

			if (strcmp(NameStr(role->rolname), ig_worker_role) == 0)
				worker_roleoid = role->oid;
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
		role_ok = OidIsValid(worker_roleoid);
		if (!role_ok && was_ok)
			ereport(LOG,
					(errmsg("idem_gate: role \"%s\" does not exist; the janitor waits for it",
							ig_worker_role),
					 errhint("Create the role, or set idem_gate.worker_role to an existing role and reload the configuration.")));
	}
	else
		role_ok = true;
	CommitTransactionCommand();

	/* keep what was seen; remember what was reported, for the next scan */
	for (int i = 0; i < ndbs; i++)
	{
		if (dbs[i].seen)
			dbs[kept++] = dbs[i];
	}
	ndbs = kept;

	MemoryContextSwitchTo(TopMemoryContext);
	list_free_deep(reported_missing);
	reported_missing = NIL;
	foreach(lc, reported)
		reported_missing = lappend(reported_missing, pstrdup((char *) lfirst(lc)));
	MemoryContextSwitchTo(old);
	MemoryContextReset(scan_cxt);
}

/*
 * Free a slot whose janitor is gone, and keep what it found of the
 * extension for the next pass in its database.
 */
static void
slot_free(int i)
{
	IgJanitorSlot *slot = &ig_worker_shared->slots[i];
	Oid			dboid;
	IgExtState ext;
	IgPassState pass;

	SpinLockAcquire(&ig_worker_shared->mutex);
	dboid = slot->dboid;
	ext = slot->ext;
	pass = slot->pass;
	slot->state = IG_SLOT_FREE;
	slot->pid = 0;
	SpinLockRelease(&ig_worker_shared->mutex);

	ended[i] = false;
	for (int d = 0; d < ndbs; d++)
	{
		if (dbs[d].dboid != dboid)
			continue;
		if (ext != IG_EXT_UNKNOWN)
			dbs[d].ext = ext;
		if (pass != IG_PASS_UNKNOWN)
			dbs[d].pass = pass;
	}
}

/*
 * Look after the running janitors: free the slots of those that exited
 * (including a previous launcher's, which this one has no handle for), and
 * end the pass of any whose database another session needs without
 * connections.  Returns how many slots are in use.
 */
static int
watch_janitors(TimestampTz now)
{
	int			active = 0;

	for (int i = 0; i < ig_worker_shared->nslots; i++)
	{
		IgJanitorSlot *slot = &ig_worker_shared->slots[i];
		IgSlotState state;
		pid_t		pid;
		Oid			dboid;
		TimestampTz assigned;
		bool		gone;

		SpinLockAcquire(&ig_worker_shared->mutex);
		state = slot->state;
		pid = slot->pid;
		dboid = slot->dboid;
		assigned = slot->assigned;
		SpinLockRelease(&ig_worker_shared->mutex);

		if (state == IG_SLOT_FREE)
			continue;
		if (handles[i] != NULL)
		{
			pid_t		bgpid;

			gone = (GetBackgroundWorkerPid(handles[i], &bgpid) == BGWH_STOPPED);
			if (gone)
			{
				pfree(handles[i]);
				handles[i] = NULL;
			}
		}
		else if (state == IG_SLOT_RUNNING)
			gone = (kill(pid, 0) != 0);
		else
			gone = (state == IG_SLOT_DONE ||
					TimestampDifferenceExceeds(assigned, now, IG_ORPHAN_SECS * 1000));
		if (gone)
		{
			slot_free(i);
			continue;
		}
		active++;

		if (!ended[i] && state == IG_SLOT_RUNNING && database_wanted(dboid))
		{
			ereport(LOG,
					(errmsg("idem_gate: ending the janitor's pass in database %s, which another session needs without connections",
							db_name(dboid)),
					 errdetail("DROP DATABASE, ALTER DATABASE and CREATE DATABASE ... TEMPLATE wait for the database's other sessions to leave.")));
			if (handles[i] != NULL)
				TerminateBackgroundWorker(handles[i]);
			else
				(void) kill(pid, SIGTERM);
			ended[i] = true;
		}
	}
	return active;
}

/* Is a janitor at work in this database? */
static bool
db_busy(Oid dboid)
{
	bool		busy = false;

	SpinLockAcquire(&ig_worker_shared->mutex);
	for (int i = 0; i < ig_worker_shared->nslots && !busy; i++)
		busy = (ig_worker_shared->slots[i].state != IG_SLOT_FREE &&
				ig_worker_shared->slots[i].dboid == dboid);
	SpinLockRelease(&ig_worker_shared->mutex);
	return busy;
}

/*
 * Start a janitor for one pass in a database.  The postmaster does not
 * restart it: the launcher starts the next pass.
 */
static bool
start_janitor(IgDb *db)
{
	static bool warned = false;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	IgJanitorArgs args;
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	memset(&args, 0, sizeof(args));
	SpinLockAcquire(&ig_worker_shared->mutex);
	for (i = 0; i < ig_worker_shared->nslots; i++)
	{
		if (ig_worker_shared->slots[i].state == IG_SLOT_FREE)
			break;
	}
	if (i < ig_worker_shared->nslots)
	{
		IgJanitorSlot *slot = &ig_worker_shared->slots[i];

		slot->state = IG_SLOT_STARTING;
		slot->generation = ++ig_worker_shared->generation;
		slot->dboid = db->dboid;
		slot->pid = 0;
		slot->ext = IG_EXT_UNKNOWN;
		slot->pass = IG_PASS_UNKNOWN;
		slot->assigned = now;
		args.generation = slot->generation;
	}
	SpinLockRelease(&ig_worker_shared->mutex);
	if (i == ig_worker_shared->nslots)
		return false;

	args.dboid = db->dboid;
	args.roleoid = worker_roleoid;
	args.prior = db->ext;
	args.prior_pass = db->pass;
	args.named = names_given;
	ig_worker_describe(&worker, "idem_gate janitor", "idem_gate_janitor_main",
					   BGW_NEVER_RESTART);
	worker.bgw_main_arg = Int32GetDatum(i);
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		slot_free(i);
		if (!warned)
			ereport(WARNING,
					(errmsg("idem_gate: could not start a janitor"),
					 errhint("Raise max_worker_processes; the launcher tries again every %d seconds.",
							 IG_RESTART_SECS)));
		warned = true;
		return false;
	}
	warned = false;
	handles[i] = handle;
	return true;
}

/*
 * Start the passes that are due, the database served longest ago first,
 * up to idem_gate.max_janitors at once.  Returns when to look again.
 */
static TimestampTz
start_due(TimestampTz now, int *active)
{
	int			limit = Min(ig_worker_max_janitors, ig_worker_shared->nslots);
	TimestampTz wake = TimestampTzPlusMilliseconds(now, ig_worker_naptime * 1000L);

	if (!role_ok)
		return wake;			/* the next scan looks for it again */
	if (now < start_retry)
		return start_retry;

	for (;;)
	{
		IgDb	   *best = NULL;

		for (int d = 0; d < ndbs; d++)
		{
			IgDb	   *db = &dbs[d];
			TimestampTz due = Max(db->not_before,
								  TimestampTzPlusMilliseconds(db->last_start,
															  ig_worker_naptime * 1000L));

			if (db->last_start == 0)
				due = db->not_before;
			if (due > now)
			{
				wake = Min(wake, due);
				continue;
			}
			if (db_busy(db->dboid))
				continue;
			if (best == NULL || db->last_start < best->last_start)
				best = db;
		}
		if (best == NULL || *active >= limit)
			break;
		if (database_wanted(best->dboid))
		{
			best->not_before = TimestampTzPlusMilliseconds(now, IG_BUSY_RETRY_MS);
			continue;
		}
		if (!start_janitor(best))
		{
			start_retry = TimestampTzPlusMilliseconds(now, IG_RESTART_SECS * 1000L);
			return start_retry;
		}
		best->last_start = now;
		(*active)++;
	}
	return wake;
}

/*
 * The launcher's main loop.
 */
void
idem_gate_launcher_main(Datum main_arg)
{
	TimestampTz next_scan = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: only the shared catalogs */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	scan_cxt = AllocSetContextCreate(TopMemoryContext,
									 "idem_gate launcher scan",
									 ALLOCSET_DEFAULT_SIZES);
	handles = MemoryContextAllocZero(TopMemoryContext,
									 ig_worker_shared->nslots * sizeof(*handles));
	ended = MemoryContextAllocZero(TopMemoryContext,
								   ig_worker_shared->nslots * sizeof(bool));

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz wake;
		int			active;

		active = watch_janitors(now);
		if (rescan || now >= next_scan)
		{
			scan_databases();
			rescan = false;
			next_scan = TimestampTzPlusMilliseconds(now, ig_worker_naptime * 1000L);
		}
		wake = Min(start_due(now, &active), next_scan);

		/* janitors at work: watch for a DROP DATABASE waiting on them */
		if (active > 0)
			wake = Min(wake, TimestampTzPlusMilliseconds(now, IG_WATCH_MS));
		wait_on_latch((long) ((wake - GetCurrentTimestamp()) / 1000) + 1);
	}
}
