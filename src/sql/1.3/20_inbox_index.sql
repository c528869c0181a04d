/*
 * The inbox's list, read in the order the page shows it (since, workflow,
 * key), from an index alone.  needs_review and failing claims are the
 * inbox's bulk and are rare among all claims: a partial index keeps them,
 * with the attempt count the failing filter reads, so that a page of the
 * inbox costs what the inbox holds, not the claims table, and reads no
 * heap page for a claim that has not changed since the last vacuum.  A
 * claim that goes from processing to completed never enters it, so the
 * gate's hot path writes no more index entries than before.  Stuck claims
 * are processing claims, found by the janitor's index.
 */
CREATE INDEX claims_inbox_since
	ON idem_gate.claims (state, updated_at, workflow, key) INCLUDE (attempt)
	WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['needs_review', 'failed_retryable']::idem_gate.state[]);
