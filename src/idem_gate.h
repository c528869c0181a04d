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

/* true when the library was loaded through shared_preload_libraries */
extern bool idem_preloaded;

extern void _PG_init(void);


#endif							/* IDEM_GATE_H */
