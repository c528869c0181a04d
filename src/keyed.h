/*-------------------------------------------------------------------------
 *
 * keyed.h
 *	  Keyed keys: for a workflow whose policy says keyed, the gate stores
 *	  HMAC-SHA256(secret, workflow || 0x00 || key) in place of the key, as
 *	  "id:hex", under the secrets of idem_gate.secret_file (keyed.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_KEYED_H
#define IDEM_GATE_KEYED_H

#include "fmgr.h"

/* Most secrets the file may list. */
#define IG_KEYED_MAX_SECRETS	16

/* A secret's id: 1 to 16 letters and digits. */
#define IG_KEYED_MAX_ID			16

/*
 * The stored forms of one caller's key: one per listed secret, newest
 * first, the first being where a new claim goes.
 */
typedef struct IgKeyForms
{
	text	   *key;			/* the caller's key, to compute them again */
	const char *workflow;
	uint64		generation;		/* of the secrets they were computed with */
	int			n;
	Datum		form[IG_KEYED_MAX_SECRETS];	/* text */
	char	   *form_str[IG_KEYED_MAX_SECRETS];
} IgKeyForms;

extern void ig_keyed_init(void);
extern void ig_keyed_request_shmem(void);
extern IgKeyForms *ig_keyed_forms(const char *workflow, text *key);
extern bool ig_keyed_refresh(IgKeyForms *forms);
extern int	ig_keyed_secret_ids(char ids[][IG_KEYED_MAX_ID + 1]);

#endif							/* IDEM_GATE_KEYED_H */
