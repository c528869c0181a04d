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
#define IDEM_RESTART_SECS	10

/* Settings (worker.c) */
extern int	idem_naptime;
extern char *idem_database;
extern char *idem_worker_role;
extern int	idem_max_janitors;

/*
 * What the janitors found of the extension in a database, so that its
 * absence is logged once and not at every pass.  In a database that was
 * never seen with idem_gate and that idem_gate.database does not name, the
 * absence is the normal case and is not logged at all.
 */
typedef enum IdemExtState
{
	IDEM_EXT_UNKNOWN,
	IDEM_EXT_ABSENT_QUIET,
	IDEM_EXT_ABSENT_LOGGED,
	IDEM_EXT_PRESENT
} IdemExtState;

/*
 * Whether the janitor could work in a database at its last pass, so that
 * a change is logged once and not at every pass: the server may be
 * read-only for a while (an HA manager fences a promoted primary with
 * default_transaction_read_only), or the claims table refuse writes.
 */
typedef enum IdemPassState
{
	IDEM_PASS_UNKNOWN,
	IDEM_PASS_WORKING,
	IDEM_PASS_READ_ONLY,
	IDEM_PASS_REFUSED
} IdemPassState;

typedef enum IdemSlotState
{
	IDEM_SLOT_FREE,
	IDEM_SLOT_STARTING,			/* registered by the launcher */
	IDEM_SLOT_RUNNING,			/* taken by its janitor */
	IDEM_SLOT_DONE				/* its janitor exited */
} IdemSlotState;

/* A janitor's slot in shared memory; the mutex protects all of it. */
typedef struct IdemJanitorSlot
{
	IdemSlotState state;
	uint32		generation;		/* which start this is */
	Oid			dboid;
	pid_t		pid;			/* while running */
	IdemExtState ext;			/* what the janitor found */
	IdemPassState pass;			/* whether it could work */
	TimestampTz assigned;
} IdemJanitorSlot;

typedef struct IdemWorkerShared
{
	slock_t		mutex;
	uint32		generation;
	int			nslots;
	IdemJanitorSlot slots[FLEXIBLE_ARRAY_MEMBER];
} IdemWorkerShared;

/* What the launcher hands a janitor in bgw_extra. */
typedef struct IdemJanitorArgs
{
	uint32		generation;
	Oid			dboid;
	Oid			roleoid;
	IdemExtState prior;			/* what the previous pass found */
	IdemPassState prior_pass;	/* whether the previous pass could work */
	bool		named;			/* listed in idem_gate.database */
} IdemJanitorArgs;

/* The slots; NULL without preloading. */
extern IdemWorkerShared *idem_workers;

extern void idem_worker_define_settings(void);
extern void idem_worker_register(void);
extern void idem_worker_init(BackgroundWorker *worker, const char *name,
							 const char *function, int restart_time);

#endif							/* IDEM_GATE_WORKER_H */
