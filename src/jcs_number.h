/*-------------------------------------------------------------------------
 *
 * jcs_number.h
 *	  JSON numbers in RFC 8785 form (jcs_number.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JCS_NUMBER_H
#define IDEM_GATE_JCS_NUMBER_H

#include "jcs.h"

extern void jcs_put_number(JcsState *st, const char *num, size_t len);

#endif							/* IDEM_GATE_JCS_NUMBER_H */
