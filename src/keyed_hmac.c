/*-------------------------------------------------------------------------
 *
 * keyed_hmac.c
 *	  HMAC-SHA256 under one secret of a keyed workflow, from state prepared
 *	  once per secret.
 *
 * A keyed claim computes HMAC-SHA256(secret, workflow || 0x00 || key)
 * under every listed secret (keyed.c).  Through PostgreSQL's common/hmac.h
 * each call takes the key again, so OpenSSL hashes the key's two padded
 * blocks anew and allocates a context for every claim: most of what a
 * keyed duplicate costs over a plain one.  RFC 2104 section 4 allows
 * hashing them once: HMAC(K, m) = H((K' ^ opad) || H((K' ^ ipad) || m)),
 * K' being K padded with zeros to the hash's block, or H(K) so padded when
 * K is longer than the block, so the SHA-256 states after the blocks
 * K' ^ ipad and K' ^ opad can be kept and copied for each message.  That
 * gives the same bytes as the definition: sql/keyed.sql compares the
 * stored forms with HMACs computed elsewhere, and test/t/013_keyed_hmac.pl
 * with pgcrypto's hmac() across reloads.
 *
 * Where PostgreSQL was built with OpenSSL, the Makefile defines
 * IG_USE_OPENSSL and links libcrypto as PostgreSQL's own modules do, and
 * the two states are OpenSSL EVP digest contexts, copied with
 * EVP_MD_CTX_copy_ex() for each message (compat.h says which OpenSSL
 * releases have the calls).  Built without OpenSSL, PostgreSQL's SHA-256
 * contexts cannot be copied, and each HMAC goes through common/hmac.h as
 * before: the same bytes, at the old cost.
 *
 * The state derives from the secret as much as the secret does: freeing it
 * wipes it (EVP_MD_CTX_free() clears an EVP context's memory before
 * freeing it; the copy of the key kept without OpenSSL is zeroed here).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/sha2.h"
#include "utils/memutils.h"

#include "compat.h"
#include "keyed_hmac.h"

#ifdef IG_HMAC_EVP
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#else
#include "common/hmac.h"
#endif

/* The pads of RFC 2104, XORed into every byte of the key's block. */
#define IPAD		0x36
#define OPAD		0x5c

#ifdef IG_HMAC_EVP

struct IgKeyedHmac
{
	EVP_MD_CTX *inner;			/* SHA-256 having hashed K' ^ ipad */
	EVP_MD_CTX *outer;			/* SHA-256 having hashed K' ^ opad */
	EVP_MD_CTX *work;			/* a copy of one of them, for each message */
};

/*
 * OpenSSL's reason for the last failure, for the error message: a failure
 * here is out of memory or a broken library, never the caller's input.
 */
static const char *
reason(void)
{
	unsigned long e = ERR_get_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r != NULL ? r : "no reason given";
}

/*
 * Prepare the two states for a secret, once per secret and backend: what
 * keyed.c calls when it takes in the secrets of a load or a reload.  The
 * padded blocks are wiped before returning.
 */
IgKeyedHmac *
ig_keyed_hmac_create(const uint8 *key, int len)
{
	IgKeyedHmac *h = MemoryContextAllocZero(TopMemoryContext, sizeof(IgKeyedHmac));
	uint8		block[PG_SHA256_BLOCK_LENGTH];
	uint8		pad[PG_SHA256_BLOCK_LENGTH];
	bool		ok;

	memset(block, 0, sizeof(block));
	ERR_clear_error();
	h->inner = EVP_MD_CTX_new();
	h->outer = EVP_MD_CTX_new();
	h->work = EVP_MD_CTX_new();
	ok = h->inner != NULL && h->outer != NULL && h->work != NULL;

	/* K': a key longer than the block is hashed first (RFC 2104, 2) */
	if (ok && len > PG_SHA256_BLOCK_LENGTH)
		ok = EVP_Digest(key, len, block, NULL, EVP_sha256(), NULL) == 1;
	else if (ok)
		memcpy(block, key, len);

	for (int i = 0; i < PG_SHA256_BLOCK_LENGTH; i++)
		pad[i] = block[i] ^ IPAD;
	ok = ok &&
		EVP_DigestInit_ex(h->inner, EVP_sha256(), NULL) == 1 &&
		EVP_DigestUpdate(h->inner, pad, sizeof(pad)) == 1;
	for (int i = 0; i < PG_SHA256_BLOCK_LENGTH; i++)
		pad[i] = block[i] ^ OPAD;
	ok = ok &&
		EVP_DigestInit_ex(h->outer, EVP_sha256(), NULL) == 1 &&
		EVP_DigestUpdate(h->outer, pad, sizeof(pad)) == 1;
	OPENSSL_cleanse(block, sizeof(block));
	OPENSSL_cleanse(pad, sizeof(pad));

	if (!ok)
	{
		const char *r = reason();

		ig_keyed_hmac_free(h);
		elog(ERROR, "could not prepare HMAC-SHA256: %s", r);
	}
	return h;
}

/*
 * HMAC-SHA256 of a || b into mac (32 bytes): a copy of the inner state
 * hashes the message, a copy of the outer one the inner hash.  Called for
 * every listed secret of every keyed call.
 */
void
ig_keyed_hmac_compute(IgKeyedHmac *h, const uint8 *a, size_t alen,
					  const uint8 *b, size_t blen, uint8 *mac)
{
	uint8		ih[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	unsigned int m = 0;

	if (EVP_MD_CTX_copy_ex(h->work, h->inner) != 1 ||
		EVP_DigestUpdate(h->work, a, alen) != 1 ||
		EVP_DigestUpdate(h->work, b, blen) != 1 ||
		EVP_DigestFinal_ex(h->work, ih, &n) != 1 ||
		EVP_MD_CTX_copy_ex(h->work, h->outer) != 1 ||
		EVP_DigestUpdate(h->work, ih, n) != 1 ||
		EVP_DigestFinal_ex(h->work, mac, &m) != 1 ||
		m != PG_SHA256_DIGEST_LENGTH)
		elog(ERROR, "could not compute HMAC-SHA256: %s", reason());
	explicit_bzero(ih, sizeof(ih));
}

/*
 * Wipe and free a secret's state: its secret left the file at a reload,
 * or the secrets are being taken in again.
 */
void
ig_keyed_hmac_free(IgKeyedHmac *h)
{
	if (h == NULL)
		return;
	/* each clears the context's memory, its digest state too, when freeing */
	EVP_MD_CTX_free(h->inner);
	EVP_MD_CTX_free(h->outer);
	EVP_MD_CTX_free(h->work);
	explicit_bzero(h, sizeof(IgKeyedHmac));
	pfree(h);
}

#else							/* !IG_HMAC_EVP */

/*
 * Without OpenSSL: a copy of the key, since common/hmac.h takes it for
 * every HMAC.
 */
struct IgKeyedHmac
{
	int			len;
	uint8		key[FLEXIBLE_ARRAY_MEMBER];
};

/*
 * Keep a copy of the secret, once per secret and backend: PostgreSQL's
 * own SHA-256 contexts, used when it was built without OpenSSL, cannot be
 * copied, so there is nothing to compute ahead.
 */
IgKeyedHmac *
ig_keyed_hmac_create(const uint8 *key, int len)
{
	IgKeyedHmac *h = MemoryContextAlloc(TopMemoryContext,
										offsetof(IgKeyedHmac, key) + len);

	h->len = len;
	memcpy(h->key, key, len);
	return h;
}

/*
 * HMAC-SHA256 of a || b into mac (32 bytes) through common/hmac.h, which
 * hashes the key's pads again for every message: correct, and slower than
 * where OpenSSL is there.
 */
void
ig_keyed_hmac_compute(IgKeyedHmac *h, const uint8 *a, size_t alen,
					  const uint8 *b, size_t blen, uint8 *mac)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL ||
		pg_hmac_init(ctx, h->key, h->len) < 0 ||
		pg_hmac_update(ctx, a, alen) < 0 ||
		pg_hmac_update(ctx, b, blen) < 0 ||
		pg_hmac_final(ctx, mac, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute HMAC-SHA256: %s",
			 ctx ? pg_hmac_error(ctx) : "out of memory");
	pg_hmac_free(ctx);
}

/* Wipe and free the copy of a secret whose state is no longer wanted. */
void
ig_keyed_hmac_free(IgKeyedHmac *h)
{
	if (h == NULL)
		return;
	explicit_bzero(h, offsetof(IgKeyedHmac, key) + h->len);
	pfree(h);
}

#endif							/* IG_HMAC_EVP */
