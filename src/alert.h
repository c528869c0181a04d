/*-------------------------------------------------------------------------
 *
 * alert.h
 *	  The announcements on idem_gate_alert of a claim entering the inbox,
 *	  and the display of a name in a log line (alert.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_ALERT_H
#define IDEM_GATE_ALERT_H

#include "datatype/timestamp.h"

extern char *ig_alert_announce(const char *workflow, const char *reason,
							   TimestampTz at);
extern char *ig_alert_log_display(const char *s);

#endif							/* IDEM_GATE_ALERT_H */
