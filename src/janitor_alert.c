/*-------------------------------------------------------------------------
 *
 * janitor_alert.c
 *	  The janitor's stuck-claim alerts: a NOTIFY per claim whose payload is
 *	  built here and always fits, and log lines a key cannot forge.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/async.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "idem_gate.h"
#include "call.h"
#include "janitor_int.h"

/*
 * Bytes of a key or workflow in an alert's payload.  NOTIFY refuses a
 * payload of about 8,000 bytes or more, and escaping can make a string six
 * times longer: two strings of this size, escaped, always fit.
 */
#define IG_PAYLOAD_NAME_BYTES	500

/*
 * A key or workflow for a log line: cut, and with control characters
 * shown as \xNN, so that a key cannot forge lines of the server log.
 */
static char *
ig_log_display(const char *s)
{
	char	   *cut = idem_display(s);
	StringInfoData out;

	initStringInfo(&out);
	for (const char *p = cut; *p; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (c < 0x20 || c == 0x7f || c == '\\')
			appendStringInfo(&out, "\\x%02x", c);
		else
			appendStringInfoChar(&out, c);
	}
	return out.data;
}

/* A JSON string member of an alert's payload, cut to fit. */
static void
ig_payload_name(StringInfo buf, const char *member, const char *s)
{
	int			len = strlen(s);
	int			cut = len;

	if (len > IG_PAYLOAD_NAME_BYTES)
		cut = pg_mbcliplen(s, len, IG_PAYLOAD_NAME_BYTES);
	appendStringInfo(buf, "\"%s\":", member);
	escape_json(buf, pnstrdup(s, cut));
	if (cut < len)
		appendStringInfo(buf, ",\"%s_truncated\":true", member);
	appendStringInfoChar(buf, ',');
}

/*
 * Raise the alerts of one stuck batch: a NOTIFY per claim, whose payload
 * is built here and always fits, and the examples of the WARNING line.
 */
void
ig_alert_rows(IgPass *pass, bool review)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		char	   *wf = SPI_getvalue(tup, desc, 1);
		char	   *key = SPI_getvalue(tup, desc, 2);
		char	   *token = SPI_getvalue(tup, desc, 3);
		char	   *age = SPI_getvalue(tup, desc, 6);
		int64		k = pass->counts->alerts + i;
		StringInfoData payload;

		initStringInfo(&payload);
		appendStringInfoChar(&payload, '{');
		ig_payload_name(&payload, "workflow", wf);
		ig_payload_name(&payload, "key", key);
		appendStringInfo(&payload, "\"token\":%s,\"attempt\":%s,\"claimed_at\":",
						 token, SPI_getvalue(tup, desc, 4));
		escape_json(&payload, SPI_getvalue(tup, desc, 5));
		appendStringInfoString(&payload, ",\"age\":");
		escape_json(&payload, age);
		appendStringInfo(&payload, ",\"action\":\"%s\"}",
						 review ? "needs_review" : "alert");
		Async_Notify("idem_gate_alert", payload.data);
		if (pass->forward_alerts)
			pass->forward = lappend(pass->forward, payload.data);

		if (k < IG_ALERT_EXAMPLES)
		{
			MemoryContext old = MemoryContextSwitchTo(pass->cxt);

			pass->examples[k] = psprintf("workflow \"%s\" key \"%s\" token %s stuck for %s",
										 ig_log_display(wf), ig_log_display(key),
										 token, age);
			MemoryContextSwitchTo(old);
		}
	}
}

/*
 * On a Citus worker, raise the batch's alerts on the coordinator as well
 * (citus.c), after the batch's rows have been read.
 */
void
ig_alert_forward(IgPass *pass)
{
	if (pass->forward == NIL)
		return;
	ig_citus_notify_coordinator(pass->forward);
	pass->forward = NIL;
}
