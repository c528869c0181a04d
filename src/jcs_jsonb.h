/*-------------------------------------------------------------------------
 *
 * jcs_jsonb.h
 *	  Canonical JSON of jsonb documents (jcs_jsonb.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JCS_JSONB_H
#define IDEM_GATE_JCS_JSONB_H

#include "utils/jsonb.h"

#include "jcs.h"

extern void jcs_emit_jsonb(JcsState *st, const JsonbContainer *jc);
extern void jcs_emit_jsonbvalue(JcsState *st, const JsonbValue *v);

#endif							/* IDEM_GATE_JCS_JSONB_H */
