/*-------------------------------------------------------------------------
 *
 * keyed_hmac.h
 *	  HMAC-SHA256 under one secret of a keyed workflow, from state prepared
 *	  once per secret (keyed_hmac.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_KEYED_HMAC_H
#define IDEM_GATE_KEYED_HMAC_H

/* What one secret's HMAC is computed from; keyed_hmac.c's own. */
typedef struct IgKeyedHmac IgKeyedHmac;

extern IgKeyedHmac *ig_keyed_hmac_create(const uint8 *key, int len);
extern void ig_keyed_hmac_compute(IgKeyedHmac *h,
								  const uint8 *a, size_t alen,
								  const uint8 *b, size_t blen,
								  uint8 *mac);
extern void ig_keyed_hmac_free(IgKeyedHmac *h);

#endif							/* IDEM_GATE_KEYED_HMAC_H */
