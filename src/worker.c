/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background workers: a launcher and the janitor it starts.
 *
 * The launcher is registered at preload time, starts only once recovery is
 * over (so never on a standby, and at promotion) and connects to no
 * database.  It looks up idem_gate.database and idem_gate.worker_role in
 * the shared catalogs and starts the janitor, a dynamic worker connected to
 * that database.  A database or role that does not exist is reported once
 * and waited for: no restart loop of FATAL connection errors.  When the
 * janitor exits (an error, pg_terminate_backend) the launcher starts it
 * again after a pause, as the postmaster would restart a static worker.
 *
 * The janitor runs a pass every idem_gate.naptime seconds.  It idles
 * quietly while the extension is not installed in its database.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idem_gate.h"
#include "janitor.h"
#include "stats.h"

int			idem_naptime = 10;
char	   *idem_database = NULL;
char	   *idem_worker_role = NULL;

/* Pause before starting the janitor again after it exited. */
#define IG_RESTART_SECS		10

/*
 * The janitor's scheduling priority.  Its passes are background work: on a
 * busy server the operating system should run the claims first.
 */
#define IG_JANITOR_NICE		10

PGDLLEXPORT void idem_gate_launcher_main(Datum main_arg);
PGDLLEXPORT void idem_gate_janitor_main(Datum main_arg);

/*
 * Fill in what the launcher and the janitor have in common: both run only
 * once recovery is over, so never on a standby, and start at promotion.
 * The name is also the type pg_stat_activity.backend_type shows.
 */
static void
ig_worker_init(BackgroundWorker *worker, const char *name,
			   const char *function, int restart_time)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_time;
	strlcpy(worker->bgw_library_name, "idem_gate", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker->bgw_name, name, BGW_MAXLEN);
	strlcpy(worker->bgw_type, name, BGW_MAXLEN);
}

/*
 * Register the launcher; called from _PG_init while preloading.
 */
void
idem_worker_register(void)
{
	BackgroundWorker worker;

	ig_worker_init(&worker, "idem_gate launcher", "idem_gate_launcher_main",
				   IG_RESTART_SECS);
	RegisterBackgroundWorker(&worker);
}

/*
 * Wait on the latch for up to timeout_ms, handling SIGHUP.  Never a sleep:
 * SIGTERM, SIGHUP and postmaster death end the wait.
 */
static void
ig_wait(long timeout_ms, uint32 wait_event)
{
	int			rc;

	rc = WaitLatch(MyLatch,
				   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   Max(timeout_ms, 0), wait_event);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * Look a name up in a shared catalog with a plain heap scan: without a
 * database, the launcher cannot use catalog indexes (the autovacuum
 * launcher reads pg_database the same way).
 */
static Oid
ig_shared_catalog_oid(Oid catalog, const char *name)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	Oid			result = InvalidOid;

	rel = table_open(catalog, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		if (catalog == DatabaseRelationId)
		{
			Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

			if (strcmp(NameStr(db->datname), name) == 0)
			{
				result = db->oid;
				break;
			}
		}
		else
		{
			Form_pg_authid role = (Form_pg_authid) GETSTRUCT(tup);

			if (strcmp(NameStr(role->rolname), name) == 0)
			{
				result = role->oid;
				break;
			}
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * Find the janitor's database and role in the shared catalogs.  Reports a
 * missing one once per launcher (and again only after it was found).
 */
static bool
ig_lookup_target(Oid *dboid, Oid *roleoid)
{
	static bool reported = false;
	bool		ok = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	*dboid = ig_shared_catalog_oid(DatabaseRelationId, idem_database);
	*roleoid = InvalidOid;
	if (!OidIsValid(*dboid))
	{
		if (!reported)
			ereport(LOG,
					(errmsg("idem_gate: database \"%s\" does not exist; the janitor waits for it",
							idem_database),
					 errhint("Create the database, or set idem_gate.database to the database where idem_gate is installed and restart the server.")));
		ok = false;
	}
	else if (idem_worker_role != NULL && idem_worker_role[0] != '\0')
	{
		*roleoid = ig_shared_catalog_oid(AuthIdRelationId, idem_worker_role);
		if (!OidIsValid(*roleoid))
		{
			if (!reported)
				ereport(LOG,
						(errmsg("idem_gate: role \"%s\" does not exist; the janitor waits for it",
								idem_worker_role),
						 errhint("Create the role, or set idem_gate.worker_role to an existing role and restart the server.")));
			ok = false;
		}
	}
	CommitTransactionCommand();
	reported = !ok;
	return ok;
}

/*
 * Start the janitor as a dynamic worker.  The postmaster does not restart
 * it: the launcher does, after checking that its database still exists.
 */
static BackgroundWorkerHandle *
ig_start_janitor(Oid dboid, Oid roleoid)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	ig_worker_init(&worker, "idem_gate janitor", "idem_gate_janitor_main",
				   BGW_NEVER_RESTART);
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	memcpy(worker.bgw_extra, &roleoid, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				(errmsg("idem_gate: could not start the janitor"),
				 errhint("Raise max_worker_processes; the launcher tries again in %d seconds.",
						 IG_RESTART_SECS)));
		return NULL;
	}
	return handle;
}

/*
 * The launcher's main loop.
 */
void
idem_gate_launcher_main(Datum main_arg)
{
	BackgroundWorkerHandle *handle = NULL;
	TimestampTz next_start = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: only the shared catalogs */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		long		wait_ms = 1000;
		pid_t		pid;

		if (handle != NULL &&
			GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
		{
			pfree(handle);
			handle = NULL;
			next_start = TimestampTzPlusMilliseconds(now, IG_RESTART_SECS * 1000);
		}

		if (handle == NULL && !idem_janitor_running() && now >= next_start)
		{
			Oid			dboid;
			Oid			roleoid;

			if (ig_lookup_target(&dboid, &roleoid))
				handle = ig_start_janitor(dboid, roleoid);
			next_start = TimestampTzPlusMilliseconds(now,
													 (handle ? IG_RESTART_SECS : idem_naptime) * 1000L);
		}

		ig_wait(wait_ms, PG_WAIT_EXTENSION);
	}
}

/* Release the janitor's slot when it exits, however it exits. */
static void
ig_janitor_exit(int code, Datum arg)
{
	idem_janitor_slot_release();
}

/*
 * Is the extension installed here?  Logs the change when it appears or
 * disappears, not at every pass.
 */
static bool
ig_extension_present(void)
{
	static int	last = -1;	/* unknown */
	bool		present;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	present = OidIsValid(get_extension_oid("idem_gate", true));
	CommitTransactionCommand();

	if (last != (int) present)
	{
		if (!present)
			ereport(LOG,
					(errmsg("idem_gate janitor: extension idem_gate is not installed in database \"%s\"; idling",
							idem_database),
					 errhint("Run CREATE EXTENSION idem_gate in that database; the janitor starts working at its next pass.")));
		else if (last == 0)
			ereport(LOG,
					(errmsg("idem_gate janitor: extension idem_gate found in database \"%s\"; resuming",
							idem_database)));
	}
	last = present;
	return present;
}

/*
 * Lower the janitor's CPU priority.  setpriority() alone does not do it on
 * Linux with autogroup scheduling (the default of many distributions):
 * every PostgreSQL process calls setsid() and so is alone in its own
 * autogroup, and the scheduler shares the CPU fairly between autogroups
 * whatever their members' nice values.  The autogroup has its own nice
 * value, in /proc/self/autogroup; where that file does not exist, the
 * process's own nice value is what counts.
 */
static void
ig_lower_priority(void)
{
	FILE	   *f;
	bool		ok;

	if (setpriority(PRIO_PROCESS, 0, IG_JANITOR_NICE) != 0)
		ereport(DEBUG1,
				(errmsg("idem_gate janitor: could not lower its priority: %m")));

	f = AllocateFile("/proc/self/autogroup", "w");
	if (f == NULL)
		return;
	ok = fprintf(f, "%d", IG_JANITOR_NICE) > 0;
	if (FreeFile(f) != 0)
		ok = false;
	if (!ok)
		ereport(DEBUG1,
				(errmsg("idem_gate janitor: could not lower its autogroup's priority: %m")));
}

/*
 * The janitor's main loop: a pass every idem_gate.naptime seconds, timed
 * from the start of the last pass, so a SIGHUP does not cause an early one.
 */
void
idem_gate_janitor_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	Oid			roleoid;
	TimestampTz last_start = 0;

	memcpy(&roleoid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (!idem_janitor_slot_take())
		proc_exit(0);			/* another janitor is running */
	before_shmem_exit(ig_janitor_exit, (Datum) 0);

	BackgroundWorkerInitializeConnectionByOid(dboid, roleoid, 0);
	pgstat_report_appname("idem_gate janitor");

	/*
	 * Background work yields to the claims: a lower CPU priority, batches
	 * that do not wait for their WAL flush (a deletion lost in a crash is
	 * simply done again at the next pass; no client waits for it).
	 */
	ig_lower_priority();
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz next = TimestampTzPlusMilliseconds(last_start,
													   idem_naptime * 1000L);

		if (last_start == 0 || now >= next)
		{
			last_start = now;
			if (!RecoveryInProgress() && ig_extension_present())
			{
				IgJanitorCounts counts;

				idem_janitor_pass(&counts, true);
			}
			next = TimestampTzPlusMilliseconds(last_start, idem_naptime * 1000L);
			now = GetCurrentTimestamp();
		}

		pgstat_report_activity(STATE_IDLE, NULL);
		ig_wait((long) ((next - now) / 1000), PG_WAIT_EXTENSION);
	}
}
