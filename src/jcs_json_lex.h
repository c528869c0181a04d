/*-------------------------------------------------------------------------
 *
 * jcs_json_lex.h
 *	  Tokens of json text (jcs_json_lex.c), for the json walker.
 *
 * Offsets are byte positions in the text; every scan returns the offset
 * after what it read and raises a syntax error rather than read past len.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JCS_JSON_LEX_H
#define IDEM_GATE_JCS_JSON_LEX_H

/* A json text: len bytes, not terminated. */
typedef struct JcsJText
{
	const unsigned char *text;
	uint32		len;
} JcsJText;

extern void jcs_j_syntax_error(const JcsJText *doc, uint32 pos);
extern uint32 jcs_j_scan_string_full(const JcsJText *doc, uint32 pos,
									 bool *escapes);
extern int	jcs_j_decode_string(const JcsJText *doc, uint32 start, uint32 end,
								char *out);
extern uint32 jcs_j_scan_number(const JcsJText *doc, uint32 pos);
extern uint32 jcs_j_scan_literal(const JcsJText *doc, uint32 pos,
								 const char *lit, uint32 litlen);

/* Skip JSON whitespace. */
static inline uint32
jcs_j_skip_ws(const JcsJText *doc, uint32 pos)
{
	while (pos < doc->len &&
		   (doc->text[pos] == ' ' || doc->text[pos] == '\n' ||
			doc->text[pos] == '\r' || doc->text[pos] == '\t'))
		pos++;
	return pos;
}

/*
 * After an element or member of a container, at *pos (whitespace allowed):
 * true with *pos at the next item when a ',' follows, false with *pos after
 * the closing bracket close when it follows; anything else is an error.
 */
static inline bool
jcs_j_next_item(const JcsJText *doc, uint32 *pos, char close)
{
	uint32		p = jcs_j_skip_ws(doc, *pos);

	if (p < doc->len && doc->text[p] == ',')
	{
		*pos = jcs_j_skip_ws(doc, p + 1);
		return true;
	}
	if (p >= doc->len || doc->text[p] != (unsigned char) close)
		jcs_j_syntax_error(doc, p);
	*pos = p + 1;
	return false;
}

/*
 * Check the string whose opening quote is at pos; returns the offset after
 * its closing quote and tells whether it holds any escape.  Most strings
 * have none and are scanned here, inline; the others, and errors, go to
 * jcs_j_scan_string_full.
 */
static inline uint32
jcs_j_scan_string(const JcsJText *doc, uint32 pos, bool *escapes)
{
	const unsigned char *t = doc->text;
	uint32		p = pos + 1;

	while (p < doc->len && t[p] != '"' && t[p] != '\\' && t[p] >= 0x20)
		p++;
	if (p < doc->len && t[p] == '"')
	{
		*escapes = false;
		return p + 1;
	}
	return jcs_j_scan_string_full(doc, pos, escapes);
}

#endif							/* IDEM_GATE_JCS_JSON_LEX_H */
