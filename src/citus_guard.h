/*-------------------------------------------------------------------------
 *
 * citus_guard.h
 *	  Keep Citus from delegating a gate call whose key is NULL.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_CITUS_GUARD_H
#define IDEM_GATE_CITUS_GUARD_H

extern void ig_citus_guard_install(void);

#endif							/* IDEM_GATE_CITUS_GUARD_H */
