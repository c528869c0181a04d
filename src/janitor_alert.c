/*-------------------------------------------------------------------------
 *
 * janitor_alert.c
 *	  The alerts that announce a claim entering the inbox: a NOTIFY per
 *	  claim whose payload carries nothing secret and always fits, and log
 *	  lines a key cannot forge.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/async.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "catalog/pg_type.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "idem_gate.h"
#include "call.h"
#include "durable.h"
#include "janitor.h"
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
 * The payload announcing that a claim of workflow needs a person, for
 * reason ("stuck", "needs_review", "failing"): the workflow, the reason
 * and the time, nothing secret.  No key, token, payload or error text: a
 * listener needs no privilege, and one with rights reads the details from
 * idem_gate.inbox.  Always fits NOTIFY's limit.
 */
char *
ig_alert_payload(const char *workflow, const char *reason, TimestampTz at)
{
	StringInfoData payload;
	char		buf[MAXDATELEN + 1];
	int			utc = 0;

	initStringInfo(&payload);
	appendStringInfoChar(&payload, '{');
	ig_payload_name(&payload, "workflow", workflow);
	appendStringInfo(&payload, "\"reason\":\"%s\",\"at\":\"%s\"}", reason,
					 JsonEncodeDateTime(buf, TimestampTzGetDatum(at),
										TIMESTAMPTZOID, &utc));
	return payload.data;
}

/*
 * Announce that a claim of workflow entered the inbox for reason: a
 * NOTIFY on idem_gate_alert, delivered when the transaction that made it
 * so commits, and so once (idem_fail of a claim moves it out of
 * processing, which it enters again only at a new grant).
 */
void
ig_alert_announce(const char *workflow, const char *reason)
{
	Async_Notify("idem_gate_alert", ig_alert_payload(workflow, reason,
													 GetCurrentTimestamp()));
}

/*
 * Raise the alerts of one stuck batch: a NOTIFY per claim and the
 * examples of the WARNING line.  With stuck_action = 'review' the claim
 * entered the inbox as needs_review, otherwise as stuck.
 */
void
ig_alert_rows(IgPass *pass, bool review)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;
	TimestampTz now = GetCurrentTimestamp();

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		char	   *wf = SPI_getvalue(tup, desc, 1);
		char	   *key = SPI_getvalue(tup, desc, 2);
		char	   *age = SPI_getvalue(tup, desc, 6);
		int64		k = pass->counts->alerts + i;
		char	   *payload = ig_alert_payload(wf, review ? "needs_review" : "stuck", now);

		Async_Notify("idem_gate_alert", payload);
		if (review)
			ig_durable_wrote(wf, key);
		if (pass->forward_alerts)
			pass->forward = lappend(pass->forward, payload);

		if (k < IG_ALERT_EXAMPLES)
		{
			MemoryContext old = MemoryContextSwitchTo(pass->cxt);

			pass->examples[k] = psprintf("workflow \"%s\" key \"%s\" stuck for %s",
										 ig_log_display(wf), ig_log_display(key),
										 age);
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
