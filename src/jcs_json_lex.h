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

extern void jcs_j_syntax_error(const JcsJText *doc, uint32 pos) pg_attribute_noreturn();
extern uint32 jcs_j_scan_string(const JcsJText *doc, uint32 pos, bool *escapes);
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

#endif							/* IDEM_GATE_JCS_JSON_LEX_H */
