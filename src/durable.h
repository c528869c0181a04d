/*-------------------------------------------------------------------------
 *
 * durable.h
 *	  Answers that are durable on the synchronous standbys before they are
 *	  given (durable.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_DURABLE_H
#define IDEM_GATE_DURABLE_H

#include "access/xlogdefs.h"

extern void ig_durable_request_shmem(void);
extern void ig_durable_prepare_writes(void);
extern void ig_durable_wrote(const char *workflow, const char *key);
extern XLogRecPtr ig_durable_lsn(const char *workflow, const char *key);
extern void ig_durable_wait(XLogRecPtr lsn);

#endif							/* IDEM_GATE_DURABLE_H */
