/*-------------------------------------------------------------------------
 *
 * jcs_json.h
 *	  Canonical JSON of json (text) documents (jcs_json.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JCS_JSON_H
#define IDEM_GATE_JCS_JSON_H

#include "jcs.h"

extern void jcs_emit_json_text(JcsState *st, const char *text, size_t len);

#endif							/* IDEM_GATE_JCS_JSON_H */
