/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The janitor: one pass in one database, started by the launcher
 *	  (launcher.c); and what the two share: the settings, the janitors'
 *	  slots in shared memory, the registration at preload time.
 *
 * A janitor connects to its database, checks that the extension is
 * installed there (one catalog lookup: all that a database without
 * idem_gate costs), runs one pass and exits.  Holding no connection between
 * passes is what lets a plain DROP DATABASE of the database through.
 *
 * Each janitor holds a slot in shared memory for its lifetime: the
 * launcher counts the slots against idem_gate.max_janitors, never starts a
 * second janitor in a database whose slot is in use (even one a previous
 * launcher started, before an error restarted it), and reads in the slot
 * what the janitor found of the extension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
#include "catalog/pg_proc.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "base.h"
#include "janitor.h"
#include "janitor_sql.h"
#include "shape.h"
#include "worker.h"

/* Settings */
int			ig_worker_naptime = 10;
char	   *ig_worker_database = NULL;
char	   *ig_worker_role = NULL;
int			ig_worker_max_janitors = 3;

IgWorkerShared *ig_worker_shared = NULL;

/* Upper bound of idem_gate.max_janitors whatever max_worker_processes is */
#define IG_MAX_JANITORS_LIMIT	1024

/*
 * The janitor's scheduling priority.  Its passes are background work: on a
 * busy server the operating system should run the claims first.
 */
#define IG_JANITOR_NICE		10

StaticAssertDecl(sizeof(IgJanitorArgs) <= BGW_EXTRALEN,
				 "IgJanitorArgs must fit in bgw_extra");

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

PGDLLEXPORT void idem_gate_janitor_main(Datum main_arg);

/*
 * idem_gate.database: a comma-separated list of database names (quoted
 * where they need it).  Names are all we can check here; the launcher
 * reports a database that does not exist.
 */
static bool
check_database(char **newval, void **extra, GucSource source)
{
	char	   *raw;
	List	   *names;
	ListCell   *lc;
	bool		ok = true;

	if (*newval == NULL)
		return true;
	raw = pstrdup(*newval);
	if (!SplitGUCList(raw, ',', &names))
	{
		GUC_check_errdetail("idem_gate.database must be a comma-separated list of database names.");
		ok = false;
	}
	else
	{
		foreach(lc, names)
		{
			if (strlen((char *) lfirst(lc)) >= NAMEDATALEN)
			{
				GUC_check_errdetail("Database names are at most %d bytes long.",
									NAMEDATALEN - 1);
				ok = false;
				break;
			}
		}
	}
	list_free(names);
	pfree(raw);
	return ok;
}

/*
 * idem_gate.max_janitors: each janitor is a background worker, and so is
 * the launcher.  The built-in default is accepted as is (the launcher then
 * runs no more janitors than the server has worker slots for).
 */
static bool
check_max_janitors(int *newval, void **extra, GucSource source)
{
	if (source != PGC_S_DEFAULT && *newval >= max_worker_processes)
	{
		GUC_check_errdetail("The janitors and the launcher are background workers: with max_worker_processes = %d, at most %d janitors can run.",
							max_worker_processes, Max(max_worker_processes - 1, 0));
		return false;
	}
	return true;
}

/*
 * Define the worker's settings; called from _PG_init.  naptime exists
 * without preloading too, as in 1.0; the others only with the worker.
 */
void
ig_worker_init(void)
{
	DefineCustomIntVariable("idem_gate.naptime",
							"Time between janitor passes in each database.",
							"The launcher also looks for new databases this often.",
							&ig_worker_naptime,
							10, 1, SECS_PER_DAY,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	if (!ig_preloaded)
		return;

	DefineCustomStringVariable("idem_gate.database",
							   "Databases the janitor works in, comma-separated.",
							   "Empty means every database that allows connections and has idem_gate installed.",
							   &ig_worker_database,
							   "",
							   PGC_SIGHUP, GUC_LIST_INPUT,
							   check_database, NULL, NULL);
	DefineCustomStringVariable("idem_gate.worker_role",
							   "Role the janitor connects as; empty means the bootstrap superuser.",
							   NULL,
							   &ig_worker_role,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("idem_gate.max_janitors",
							"Most janitors running at once, each in its own database.",
							"Janitors are background workers: they count against max_worker_processes, as the launcher does.",
							&ig_worker_max_janitors,
							3, 1, IG_MAX_JANITORS_LIMIT,
							PGC_SIGHUP, 0,
							check_max_janitors, NULL, NULL);
}

/*
 * The slots: one per worker process the server can have, since no more
 * janitors than that can ever run at once.
 */
static Size
worker_shmem_size(void)
{
	return add_size(offsetof(IgWorkerShared, slots),
					mul_size(max_worker_processes, sizeof(IgJanitorSlot)));
}

static void
worker_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(worker_shmem_size()));
}

static void
worker_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ig_worker_shared = ShmemInitStruct("idem_gate janitors", worker_shmem_size(),
									   &found);
	if (!found)
	{
		memset(ig_worker_shared, 0, worker_shmem_size());
		SpinLockInit(&ig_worker_shared->mutex);
		ig_worker_shared->nslots = max_worker_processes;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Fill in what the launcher and the janitors have in common: all run only
 * once recovery is over, so never on a standby, and start at promotion.
 * The name is also the type pg_stat_activity.backend_type shows.
 */
void
ig_worker_describe(BackgroundWorker *worker, const char *name,
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
 * Register the launcher and ask for the janitors' slots; called from
 * _PG_init while preloading.
 */
void
ig_worker_register(void)
{
	BackgroundWorker worker;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = worker_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = worker_shmem_startup;

	ig_worker_describe(&worker, "idem_gate launcher", "idem_gate_launcher_main",
					   IG_RESTART_SECS);
	RegisterBackgroundWorker(&worker);
}


/*
 * Take the slot the launcher assigned; false if the launcher has given it
 * to another start since (this janitor started too late).
 */
static bool
slot_take(int i, const IgJanitorArgs *args)
{
	IgJanitorSlot *slot;
	bool		taken = false;

	if (ig_worker_shared == NULL || i < 0 || i >= ig_worker_shared->nslots)
		return false;
	slot = &ig_worker_shared->slots[i];
	SpinLockAcquire(&ig_worker_shared->mutex);
	if (slot->state == IG_SLOT_STARTING &&
		slot->generation == args->generation && slot->dboid == args->dboid)
	{
		slot->state = IG_SLOT_RUNNING;
		slot->pid = MyProcPid;
		taken = true;
	}
	SpinLockRelease(&ig_worker_shared->mutex);
	return taken;
}

/* Record in the janitor's slot what it found of the extension. */
static void
slot_report(int i, IgExtState ext)
{
	SpinLockAcquire(&ig_worker_shared->mutex);
	if (ig_worker_shared->slots[i].pid == MyProcPid)
		ig_worker_shared->slots[i].ext = ext;
	SpinLockRelease(&ig_worker_shared->mutex);
}

/*
 * Record whether the pass could work, and log the change from what the
 * previous pass found: once when the database turns read-only or starts
 * refusing, once when the janitor works there again.
 */
static void
pass_report(int i, const IgJanitorArgs *args, IgPassState now,
			const char *dbname, const char *why)
{
	IgPassState prior = args->prior_pass;

	SpinLockAcquire(&ig_worker_shared->mutex);
	if (ig_worker_shared->slots[i].pid == MyProcPid)
		ig_worker_shared->slots[i].pass = now;
	SpinLockRelease(&ig_worker_shared->mutex);

	if (now == prior)
		return;
	if (now == IG_PASS_READ_ONLY)
		ereport(LOG,
				(errmsg("idem_gate janitor: database \"%s\" is read-only; no janitor pass there until it accepts writes",
						dbname),
				 errdetail("default_transaction_read_only is on for the janitor's sessions, as an HA manager sets it while it fences a server.")));
	else if (now == IG_PASS_REFUSED)
		ereport(WARNING,
				(errmsg("idem_gate janitor: no janitor pass in database \"%s\": %s",
						dbname, why),
				 errhint("Drop the rule, or restore the token sequence with ALTER SEQUENCE idem_gate.token_seq NO CYCLE INCREMENT BY 1; passes resume at the next naptime.")));
	else if (now == IG_PASS_WORKING && prior != IG_PASS_UNKNOWN)
		ereport(LOG,
				(errmsg("idem_gate janitor: database \"%s\" accepts the janitor's writes again; passes resume",
						dbname)));
}

/* The owner of a function, by its OID; InvalidOid if it is gone. */
static Oid
function_owner(Oid fn)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;		/* dropped since it was looked up */
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Whom a pass acts as: the owner of idem_gate.janitor_run(), so that the
 * worker does exactly what a call of that function by its owner would.
 * Found by catalog, not by a name lookup, which would need USAGE on the
 * schema from the role the janitor connects as.  InvalidOid when the
 * schema or the function is gone: a DROP EXTENSION that committed since
 * extension_present() saw the extension.
 */
static Oid
pass_owner(void)
{
	Oid			nsp;
	Oid			fn = InvalidOid;
	Oid			owner = InvalidOid;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	nsp = get_namespace_oid("idem_gate", true);
	if (OidIsValid(nsp))
		fn = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
							 CStringGetDatum("janitor_run"),
							 PointerGetDatum(buildoidvector(NULL, 0)),
							 ObjectIdGetDatum(nsp));
	if (OidIsValid(fn))
		owner = function_owner(fn);
	CommitTransactionCommand();
	return owner;
}

/*
 * Whether a pass can work in this database now: not while the server is
 * read-only for the janitor's sessions (default_transaction_read_only,
 * from the configuration, the database or the role), nor while the
 * claims table refuses every write.  Decided as the pass's owner.
 */
static IgPassState
pass_state(char **dbname, const char **why)
{
	IgPassState state = IG_PASS_WORKING;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	ig_janitor_sql_enter();		/* the tables are read as the pass's owner */
	*dbname = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
	*why = NULL;
	if (XactReadOnly)
		state = IG_PASS_READ_ONLY;
	else
	{
		static const IgTable written[] = {
			IG_TABLE_CLAIMS, IG_TABLE_AUDIT, IG_TABLE_WATERMARKS
		};

		ig_shape_ensure();
		for (int t = 0; t < lengthof(written) && *why == NULL; t++)
			if (ig_shape_table(written[t])->rule != NULL)
				*why = psprintf("%s has rule \"%s\", which the janitor's statements cannot honour",
								ig_shape_table_name(written[t]), ig_shape_table(written[t])->rule);
		if (*why == NULL && ig_shape.refuse == IG_REFUSE_SEQUENCE)
			*why = "idem_gate.token_seq cycles or does not count up, so a token could be granted twice";
		if (*why != NULL)
		{
			*why = MemoryContextStrdup(TopMemoryContext, *why);
			state = IG_PASS_REFUSED;
		}
	}
	ig_janitor_sql_leave();
	CommitTransactionCommand();
	return state;
}

/*
 * Settings a database owner or a role may attach (ALTER DATABASE | ROLE
 * ... SET) that would change what the janitor's statements, and the code
 * attached to the extension's tables, resolve or do: fixed for the
 * janitor's session, over anything set anywhere.  search_path is the one
 * that matters for rights: with it pinned, a name in a DBA's trigger
 * cannot be redirected to a function the database owner planted.  The
 * janitor skips rows that other transactions lock, and waits at most a
 * tenth of a second for a table lock before it leaves that step to the
 * next pass (janitor.c): no session can make it wait.
 */
static void
pin_settings(void)
{
	static const char *const pinned[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_isolation", "read committed"},
		{"statement_timeout", "0"},
		{"lock_timeout", "100ms"},
		{"idle_in_transaction_session_timeout", "0"},
		{"transform_null_equals", "off"},
		{"DateStyle", "ISO, MDY"},
		{"IntervalStyle", "postgres"},
		{"TimeZone", "UTC"}
	};

	for (int i = 0; i < lengthof(pinned); i++)
		SetConfigOption(pinned[i][0], pinned[i][1], PGC_SUSET, PGC_S_OVERRIDE);
}

/* Give the slot back when the janitor exits, however it exits. */
static void
janitor_exit(int code, Datum arg)
{
	int			i = DatumGetInt32(arg);

	SpinLockAcquire(&ig_worker_shared->mutex);
	if (ig_worker_shared->slots[i].pid == MyProcPid)
	{
		ig_worker_shared->slots[i].state = IG_SLOT_DONE;
		ig_worker_shared->slots[i].pid = 0;
	}
	SpinLockRelease(&ig_worker_shared->mutex);
}

/*
 * Is the extension installed here?  Logs when it disappears from a
 * database that had it (or was named in idem_gate.database) and when it
 * appears, not at every pass.
 */
static bool
extension_present(int i, const IgJanitorArgs *args)
{
	IgExtState now;
	char	   *dbname;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	dbname = get_database_name(MyDatabaseId);
	if (OidIsValid(get_extension_oid("idem_gate", true)))
	{
		now = IG_EXT_PRESENT;
		if (args->prior == IG_EXT_ABSENT_LOGGED)
			ereport(LOG,
					(errmsg("idem_gate janitor: extension idem_gate found in database \"%s\"; resuming",
							dbname)));
		else if (args->prior == IG_EXT_ABSENT_QUIET)
			ereport(LOG,
					(errmsg("idem_gate janitor: extension idem_gate found in database \"%s\"; serving it",
							dbname)));
	}
	else if (args->prior == IG_EXT_PRESENT ||
			 (args->prior == IG_EXT_UNKNOWN && args->named))
	{
		now = IG_EXT_ABSENT_LOGGED;
		ereport(LOG,
				(errmsg("idem_gate janitor: extension idem_gate is not installed in database \"%s\"; idling",
						dbname),
				 errhint("Run CREATE EXTENSION idem_gate in that database; the janitor starts working at its next pass.")));
	}
	else if (args->prior == IG_EXT_UNKNOWN)
		now = IG_EXT_ABSENT_QUIET;
	else
		now = args->prior;
	CommitTransactionCommand();

	slot_report(i, now);
	return now == IG_EXT_PRESENT;
}

/*
 * Lower the janitor's CPU priority.  setpriority() alone does not do it on
 * Linux with autogroup scheduling (the default of many distributions):
 * every PostgreSQL process calls setsid() and so is alone in its own
 * autogroup, and the scheduler shares the CPU fairly between autogroups
 * whatever their members' nice values.  The autogroup has its own nice
 * value, in /proc/self/autogroup; where that file does not exist, the
 * process's own nice value is what counts.  Linux lets an unprivileged
 * process change an autogroup's nice value only once per 100 ms across
 * the whole system (EAGAIN otherwise), which janitors starting together
 * can hit: each tries a few times.
 */
static void
lower_priority(void)
{
	if (setpriority(PRIO_PROCESS, 0, IG_JANITOR_NICE) != 0)
		ereport(DEBUG1,
				(errmsg("idem_gate janitor: could not lower its priority: %m")));

	for (int attempt = 0;; attempt++)
	{
		FILE	   *f = AllocateFile("/proc/self/autogroup", "w");
		bool		ok;

		if (f == NULL)
			return;
		ok = fprintf(f, "%d", IG_JANITOR_NICE) > 0;
		if (FreeFile(f) != 0)
			ok = false;
		if (ok)
			return;
		if (errno != EAGAIN || attempt == 4)
			break;
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 40,
						 PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	ereport(DEBUG1,
			(errmsg("idem_gate janitor: could not lower its autogroup's priority: %m")));
}

/* Log that the extension went away from the janitor's database. */
static void
report_gone(int i)
{
	ereport(LOG,
			(errmsg("idem_gate janitor: extension idem_gate is not installed in database \"%s\"; idling",
					get_database_name(MyDatabaseId)),
			 errhint("Run CREATE EXTENSION idem_gate in that database; the janitor starts working at its next pass.")));
	slot_report(i, IG_EXT_ABSENT_LOGGED);
}

/*
 * Decide whether a pass can work, then run it.  DROP EXTENSION may commit
 * at any moment after extension_present() saw the extension: while the
 * tables' shape is read, or while the pass runs, whose next query then
 * fails on a table that is gone.  That is the extension going away,
 * reported as such (one line, as at the start of a pass), not as an
 * error.  Any other error ends the janitor as usual.
 */
static void
run_pass(int i, const IgJanitorArgs *args)
{
	IgJanitorCounts counts;
	char	   *volatile dbname = NULL;

	PG_TRY();
	{
		const char *why;
		char	   *name;
		IgPassState state = pass_state(&name, &why);

		dbname = name;
		pass_report(i, args, state, dbname, why);
		if (state == IG_PASS_WORKING)
		{
			/*
			 * Background work yields to the claims: a lower CPU priority,
			 * batches that do not wait for their WAL flush (a deletion lost
			 * in a crash is simply done again at the next pass; no client
			 * waits for it).
			 */
			lower_priority();
			SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
			ig_janitor_pass(&counts, true, InvalidOid);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		gone;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();

		/* the server turned read-only during the pass (a fenced primary) */
		if (edata->sqlerrcode == ERRCODE_READ_ONLY_SQL_TRANSACTION &&
			dbname != NULL)
		{
			pass_report(i, args, IG_PASS_READ_ONLY, dbname, NULL);
			return;
		}

		StartTransactionCommand();
		gone = !OidIsValid(get_extension_oid("idem_gate", true));
		if (gone)
			report_gone(i);
		CommitTransactionCommand();
		if (!gone)
			ReThrowError(edata);
	}
	PG_END_TRY();
}

/*
 * Whether the janitor's database still allows connections.  The launcher
 * starts janitors from the list of its last scan, which can be up to one
 * naptime old (or older, for a pass that waited for a free slot): a
 * database a DBA has closed since is left alone, as the next scan will
 * leave it, with a LOG line instead of a failed connection's FATAL.  The
 * janitor connects past the setting only to read it.
 */
static bool
database_open(void)
{
	HeapTuple	tup;
	bool		open = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		open = db->datallowconn;
		if (!open)
			ereport(LOG,
					(errmsg("idem_gate janitor: database \"%s\" no longer allows connections; the janitor skips it",
							NameStr(db->datname))));
		ReleaseSysCache(tup);
	}
	CommitTransactionCommand();
	return open;
}

/*
 * A janitor: one pass in one database, then exit.  The settings are those
 * of the moment it starts (a reload reaches the next pass); SIGTERM ends
 * the pass at once, rolling back the open batch.
 */
void
idem_gate_janitor_main(Datum main_arg)
{
	int			i = DatumGetInt32(main_arg);
	IgJanitorArgs args;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (!slot_take(i, &args))
		proc_exit(0);
	before_shmem_exit(janitor_exit, Int32GetDatum(i));

	BackgroundWorkerInitializeConnectionByOid(args.dboid, args.roleoid,
											  BGWORKER_BYPASS_ALLOWCONN);
	pgstat_report_appname("idem_gate janitor");

	pin_settings();
	if (database_open() && !RecoveryInProgress() &&
		extension_present(i, &args))
	{
		Oid			owner = pass_owner();

		if (!OidIsValid(owner))
		{
			StartTransactionCommand();
			report_gone(i);
			CommitTransactionCommand();
		}
		else
		{
			/*
			 * as the owner of idem_gate.janitor_run(), restricted as it is,
			 * in each of the pass's transactions (janitor_sql.c)
			 */
			ig_janitor_sql_act_as(owner);
			run_pass(i, &args);
			ig_janitor_sql_act_as(InvalidOid);
		}
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	proc_exit(0);
}
