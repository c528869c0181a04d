/*-------------------------------------------------------------------------
 *
 * pg_runtime.h
 *	  The backend's allocation and error reporting, for the fuzzers that
 *	  run idem_gate's canonical-JSON toolkit in-process (pg_runtime.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IG_FUZZ_PG_RUNTIME_H
#define IG_FUZZ_PG_RUNTIME_H

/* The error that ended the last rt_try(). */
typedef struct RtError
{
	int			sqlstate;		/* MAKE_SQLSTATE form */
	char		message[1024];
} RtError;

extern RtError rt_error;

extern bool rt_try(void (*fn) (void *), void *arg);
extern void rt_reset(void);
extern const char *rt_sqlstate(int code);

#endif							/* IG_FUZZ_PG_RUNTIME_H */
