/*-------------------------------------------------------------------------
 *
 * idem_gate.h
 *	  Declarations shared by idem_gate's source files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_H
#define IDEM_GATE_H

#include "fmgr.h"

/*
 * Fingerprint mismatch: a key reused for another payload.  No standard
 * SQLSTATE means this (23505 would tell clients "duplicate, all is well"),
 * so idem_gate uses its own class "IG".
 */
#define ERRCODE_IDEM_FINGERPRINT_MISMATCH	MAKE_SQLSTATE('I','G','0','0','1')

/* Longest key or workflow shown in an error message, in characters. */
#define IDEM_DISPLAY_CHARS	64

/* GUCs (idem_gate.c) */
extern int	idem_max_key_length;

/* true when the library was loaded through shared_preload_libraries */
extern bool idem_preloaded;

extern void _PG_init(void);

/* claim.c */
extern char *idem_display(const char *s);
extern Oid	idem_function_owner(FunctionCallInfo fcinfo);

#endif							/* IDEM_GATE_H */
