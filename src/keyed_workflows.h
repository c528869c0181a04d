/*-------------------------------------------------------------------------
 *
 * keyed_workflows.h
 *	  Which workflows are keyed: those whose row in idem_gate.policies
 *	  says keyed, cached per backend (keyed_workflows.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_KEYED_WORKFLOWS_H
#define IDEM_GATE_KEYED_WORKFLOWS_H

#include "nodes/pg_list.h"

extern bool ig_keyed_workflows_has(const char *workflow);
extern const List *ig_keyed_workflows_list(void);

#endif							/* IDEM_GATE_KEYED_WORKFLOWS_H */
