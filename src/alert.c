/*-------------------------------------------------------------------------
 *
 * alert.c
 *	  The announcements of a claim entering the inbox, made by idem_fail
 *	  (claim_owner.c) and the janitor's stuck step (janitor.c): a NOTIFY per
 *	  claim whose payload carries nothing secret and always fits, and log
 *	  lines a key cannot forge.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/datetime.h"
#include "utils/json.h"

#include "alert.h"
#include "base.h"

/*
 * Bytes of a key or workflow in an alert's payload.  NOTIFY refuses a
 * payload of about 8,000 bytes or more, and escaping can make a string six
 * times longer: two strings of this size, escaped, always fit.
 */
#define NAME_BYTES	500

/*
 * A key or workflow for a log line: cut, and with control characters
 * shown as \xNN, so that a key cannot forge lines of the server log.
 */
char *
ig_alert_log_display(const char *s)
{
	char	   *cut = ig_display(s);
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
payload_name(StringInfo buf, const char *member, const char *s)
{
	int			len = strlen(s);
	int			cut = len;

	if (len > NAME_BYTES)
		cut = pg_mbcliplen(s, len, NAME_BYTES);
	appendStringInfo(buf, "\"%s\":", member);
	escape_json(buf, pnstrdup(s, cut));
	if (cut < len)
		appendStringInfo(buf, ",\"%s_truncated\":true", member);
	appendStringInfoChar(buf, ',');
}

/*
 * The announcements this server process has made: each payload carries
 * its number, because PostgreSQL delivers identical notifications of one
 * transaction once, and two claims of one workflow can enter the inbox in
 * one transaction (a janitor's batch, an n8n batch of failures).
 */
static uint64 announced = 0;

/*
 * The payload announcing that a claim of workflow needs a person, for
 * reason ("stuck", "needs_review", "failing"): the workflow, the reason,
 * the time and the announcement's number, nothing secret.  No key, token,
 * payload or error text: a listener needs no privilege, and one with
 * rights reads the details from idem_gate.inbox.  Always fits NOTIFY's
 * limit.
 */
static char *
alert_payload(const char *workflow, const char *reason, TimestampTz at)
{
	StringInfoData payload;
	char		buf[MAXDATELEN + 1];
	int			utc = 0;

	initStringInfo(&payload);
	appendStringInfoChar(&payload, '{');
	payload_name(&payload, "workflow", workflow);
	appendStringInfo(&payload, "\"reason\":\"%s\",\"at\":\"%s\",\"seq\":" UINT64_FORMAT "}",
					 reason,
					 JsonEncodeDateTime(buf, TimestampTzGetDatum(at),
										TIMESTAMPTZOID, &utc),
					 ++announced);
	return payload.data;
}

/*
 * Announce that a claim of workflow entered the inbox for reason at time
 * at: a NOTIFY on idem_gate_alert, delivered when the transaction that
 * made it so commits, and so once (idem_fail of a claim moves it out of
 * processing, which it enters again only at a new grant; the janitor
 * alerts a stuck claim once per token).  Returns the payload, which a
 * Citus worker raises on the coordinator too.
 */
char *
ig_alert_announce(const char *workflow, const char *reason, TimestampTz at)
{
	char	   *payload = alert_payload(workflow, reason, at);

	Async_Notify("idem_gate_alert", payload);
	return payload;
}
