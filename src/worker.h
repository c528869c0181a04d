/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background workers: the launcher (launcher.c) and the janitors it
 *	  starts (worker.c), and the shared-memory slots between them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_WORKER_H
#define IDEM_GATE_WORKER_H

#include "datatype/timestamp.h"
#include "postmaster/bgworker.h"
#include "storage/spin.h"

/* Pause before the postmaster restarts the launcher, or it tries again. */
#define IG_RESTART_SECS	10

/* Settings (worker.c) */
extern int	ig_worker_naptime;
extern char *ig_worker_database;
extern char *ig_worker_role;
extern int	ig_worker_max_janitors;

/*
 * What the janitors found of the extension in a database, so that its
 * absence is logged once and not at every pass.  In a database that was
 * never seen with idem_gate and that idem_gate.database does not name, the
 * absence is the normal case and is not logged at all.
 */
typedef enum IgExtState
{
	IG_EXT_UNKNOWN,
	IG_EXT_ABSENT_QUIET,
	IG_EXT_ABSENT_LOGGED,
	IG_EXT_PRESENT
} IgExtState;

/*
 * Whether the janitor could work in a database at its last pass, so that
 * a change is logged once and not at every pass: the server may be
 * read-only for a while (an HA manager fences a promoted primary with
 * default_transaction_read_only), or the claims table refuse writes.
 */
typedef enum IgPassState
{
	IG_PASS_UNKNOWN,
	IG_PASS_WORKING,
	IG_PASS_READ_ONLY,
	IG_PASS_REFUSED
} IgPassState;

typedef enum IgSlotState
{
	IG_SLOT_FREE,
	IG_SLOT_STARTING,			/* registered by the launcher */
	IG_SLOT_RUNNING,			/* taken by its janitor */
	IG_SLOT_DONE				/* its janitor exited */
} IgSlotState;

/* A janitor's slot in shared memory; the mutex protects all of it. */
typedef struct IgJanitorSlot
{
	IgSlotState state;
	uint32		generation;		/* which start this is */
	Oid			dboid;
	pid_t		pid;			/* while running */
	IgExtState ext;			/* what the janitor found */
	IgPassState pass;			/* whether it could work */
	TimestampTz assigned;
} IgJanitorSlot;

typedef struct IgWorkerShared
{
	slock_t		mutex;
	uint32		generation;
	int			nslots;
	IgJanitorSlot slots[FLEXIBLE_ARRAY_MEMBER];
} IgWorkerShared;

/* What the launcher hands a janitor in bgw_extra. */
typedef struct IgJanitorArgs
{
	uint32		generation;
	Oid			dboid;
	Oid			roleoid;
	IgExtState prior;			/* what the previous pass found */
	IgPassState prior_pass;	/* whether the previous pass could work */
	bool		named;			/* listed in idem_gate.database */
} IgJanitorArgs;

/* The slots; NULL without preloading. */
extern IgWorkerShared *ig_worker_shared;

extern void ig_worker_init(void);
extern void ig_worker_register(void);
extern void ig_worker_describe(BackgroundWorker *worker, const char *name,
							   const char *function, int restart_time);

#endif							/* IDEM_GATE_WORKER_H */
