# Durable answers: with a synchronous standby configured, no answer is given
# from a row the standby may lack.  A claim whose commit was cut off in its
# synchronous-replication wait is committed on the primary only; its run's
# retry, a duplicate, a retried completion and the rest wait for the standby
# instead of answering, a cancel ends such a wait with an error, and after
# the primary dies and the standby is promoted no token was acknowledged to
# two runs.  With the standby caught up, answers do not wait.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
max_prepared_transactions = 2
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
$primary->backup('bk');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"primary_conninfo = '" . $primary->connstr . " application_name=s1'");
$standby->start;
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (s1)'");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'quorum' FROM pg_stat_replication WHERE application_name = 's1'")
  or die 'the standby did not become synchronous';

# Run a statement in the background; returns the harness and its output.
sub background
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
		  '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# Wait until a backend running a statement matching $like waits for the
# synchronous standby; returns its pid.
sub waiting_for_standby
{
	my ($node, $like) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '$like'")
	  or return 0;
	return $node->safe_psql('postgres',
		"SELECT min(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '$like'");
}

# A statement that commits on the primary but whose synchronous-replication
# wait is cut off, as when the client's connection drops.
sub committed_locally_only
{
	my ($node, $sql, $tag) = @_;
	my ($h, $out, $err) = background($node, $sql);
	my $pid = waiting_for_standby($node, "%$tag%");
	ok($pid, "$tag: the commit waits for the stopped standby");
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	$h->finish;
	unlike($$out, qr/^new|^t$/m, "$tag: its client got no answer");
}

# A retry must wait, not answer: under a statement timeout it ends with an
# error; returns what it printed.
sub waits_instead_of_answering
{
	my ($node, $sql, $what) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET statement_timeout = '1500ms'; $sql",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($ret, 0, "$what: no answer while the standby lacks the row");
	like($stderr, qr/57014: canceling statement due to statement timeout/,
		"$what: the wait ends with the timeout's error");
	unlike($stdout, qr/new|completed|in_flight|needs_review|^t$/m,
		"$what: nothing was answered");
	return $stdout;
}

# the steady state: the standby has everything, and duplicates do not wait
my $tok = $primary->safe_psql('postgres',
	"SELECT token FROM idem_claim_ex('done-1', 'charge', '1 hour', NULL, 'run0')");
$primary->safe_psql('postgres', "SELECT idem_complete('done-1', 'charge', $tok, '{\"ch\": 1}')");
$primary->safe_psql('postgres',
	"SELECT token FROM idem_claim_ex('fresh-1', 'charge', '1 hour', NULL, 'runF')");
$primary->wait_for_catchup('s1');
my ($ret, $stdout, $stderr) = $primary->psql('postgres',
	"SET statement_timeout = '1500ms'; SELECT outcome FROM idem_claim_ex('done-1', 'charge')");
is($stdout, 'completed', 'with the standby caught up a duplicate answers at once');
($ret, $stdout) = $primary->psql('postgres',
	"SET statement_timeout = '1500ms'; SELECT outcome, token FROM idem_claim_ex('fresh-1', 'charge', '1 hour', NULL, 'runF')");
is($stdout, "new|" . ($tok + 1), 'and a re-entry of its owner too');

# synchronous_commit = remote_apply: the gate raises a weaker setting to on
# for a commit that wrote claims, and never lowers this one, so a claim
# returns only once the standby shows its row, even while replay lags
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '2s'");
$standby->reload;
$primary->safe_psql('postgres', 'ALTER SYSTEM SET synchronous_commit = remote_apply');
$primary->reload;
$primary->safe_psql('postgres', "SELECT idem_claim('applied-1', 'charge')");
is($standby->safe_psql('postgres', "SELECT count(*) FROM idem_gate.claims WHERE key = 'applied-1'"),
	'1', 'under remote_apply a claim returns once the standby shows its row');
$primary->safe_psql('postgres', 'ALTER SYSTEM RESET synchronous_commit');
$primary->reload;
$standby->append_conf('postgresql.conf', 'recovery_min_apply_delay = 0');
$standby->reload;
$primary->wait_for_catchup('s1');

# claims whose completion and failure come while the standby is away
my $tok2 = $primary->safe_psql('postgres',
	"SELECT token FROM idem_claim_ex('order-2', 'charge', '1 hour', NULL, 'runC')");
$primary->safe_psql('postgres', "SELECT idem_claim('order-3', 'charge')");
$primary->wait_for_catchup('s1');

# a procedure that claims and commits, for the commit paths below
$primary->safe_psql('postgres', q{
CREATE PROCEDURE claim_and_commit(k text) LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.set_config('synchronous_commit', 'local', false);
	PERFORM idem_claim(k, 'charge');
	COMMIT;
END $$});
$primary->wait_for_catchup('s1');

# the standby goes away (a partition; here: stopped): every commit waits
$standby->stop;

# every commit path waits, whatever the session's synchronous_commit:
# PREPARE TRANSACTION (so that COMMIT PREPARED finds the prepared claim on
# the standby: after a failover it still holds its row) and a procedure's
# own COMMIT
{
	my ($hp, $outp, $errp) = background($primary,
		"SET synchronous_commit = local; BEGIN; SELECT idem_claim('prep-1', 'charge') /* runP */; PREPARE TRANSACTION 'p1'");
	my $pidp = waiting_for_standby($primary, '%runP%');
	ok($pidp, 'PREPARE TRANSACTION of a claim waits for the stopped standby, with synchronous_commit = local');
	$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pidp)");
	$hp->finish;
	unlike($$outp, qr/PREPARE TRANSACTION/, 'and does not return');
}
is($primary->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'p1'"),
	'1', 'the transaction is prepared on the primary only');
$primary->safe_psql('postgres', "SET synchronous_commit = local; ROLLBACK PREPARED 'p1'");
committed_locally_only($primary, "CALL claim_and_commit('proc-1') /* runQ */", 'runQ');

committed_locally_only($primary,
	"SELECT outcome, token FROM idem_claim_ex('order-1', 'charge', '1 hour', NULL, 'runA')",
	'runA');
is($primary->safe_psql('postgres',
		"SELECT state || ' ' || execution_id FROM idem_gate.claims WHERE key = 'order-1'"),
	'processing runA', 'its claim is committed on the primary only');

waits_instead_of_answering($primary,
	"SELECT outcome, token FROM idem_claim_ex('order-1', 'charge', '1 hour', NULL, 'runA')",
	'the owning run\'s retry (re-entry)');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('order-1', 'charge', NULL, NULL, 'runB')",
	'a duplicate (in_flight)');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_many(ARRAY['done-1', 'order-1'], 'charge')",
	'a batch holding the key');
waits_instead_of_answering($primary,
	"SELECT idem_heartbeat('order-1', 'charge', 1)", 'a heartbeat with a lost token');

# a batch writes more keys than a transaction lists one by one: the slots
# past the list are remembered too, in a bitmap of 64-slot words.  One
# more key is chosen whose slot is the first of its word (src/durable.c's
# slot_of(): hash_bytes, which hashtext() computes for text, of the
# workflow and of the key, combined as hash_combine() does), since the
# bitmap's walk skips to the next word when the rest of one is empty.
my $edge = $primary->safe_psql('postgres', q{
	SELECT k FROM (SELECT 'edge-' || g AS k, g, hashtext('charge')::bigint & 4294967295 AS a
					 FROM generate_series(1, 5000) g) x
	 WHERE ((a # (((hashtext(k)::bigint & 4294967295) + 2654435769 + ((a << 6) & 4294967295)
				  + (a >> 2)) & 4294967295)) & 8191) % 64 = 0
	 ORDER BY g LIMIT 1});
like($edge, qr/^edge-\d+$/, 'a key whose slot starts a word of the bitmap');
committed_locally_only($primary,
	"SELECT count(*) FROM idem_claim_many(ARRAY(SELECT 'bulk-' || g FROM generate_series(1, 40) g) || '$edge'::text, 'charge', '1 hour', NULL, 'runM')",
	'runM');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('$edge', 'charge', NULL, NULL, 'runN')",
	'a duplicate of the batch\'s key whose slot starts a bitmap word');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('bulk-40', 'charge', NULL, NULL, 'runN')",
	'a duplicate of the last key of a 40-key batch');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('bulk-1', 'charge', NULL, NULL, 'runN')",
	'a duplicate of its first key');

# a session's slots are forgotten when its transaction ends, rolled back
# too: a claim of the same key in the session's next transaction is
# remembered again, and its duplicate waits (a slot left marked from the
# rolled-back transaction would count it as remembered already)
committed_locally_only($primary,
	"BEGIN; SELECT count(*) FROM idem_claim_ex('rolled-1', 'charge'); ROLLBACK; "
	  . "SELECT count(*) FROM idem_claim_ex('rolled-1', 'charge', '1 hour', NULL, 'runR') /* runR */",
	'runR');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('rolled-1', 'charge', NULL, NULL, 'runS')",
	'a duplicate of a key claimed again after a rollback in the same session');

# answers wait only when needed: the primary now holds WAL the standby
# lacks, but a duplicate of a row the standby has answers at once
($ret, $stdout, $stderr) = $primary->psql('postgres',
	"SET statement_timeout = '1500ms'; SELECT outcome FROM idem_claim_ex('done-1', 'charge')");
is($stdout, 'completed',
	'with the standby away, a duplicate of a row it already has answers at once');

# a retried completion and a needs_review answer, from rows written while
# the standby is away
committed_locally_only($primary,
	"SELECT idem_complete('order-2', 'charge', $tok2, '{\"ch\": 2}') /* runC */", 'runC');
waits_instead_of_answering($primary,
	"SELECT idem_complete('order-2', 'charge', $tok2, '{\"ch\": 2}')", 'a retried completion');
waits_instead_of_answering($primary,
	"SELECT outcome FROM idem_claim_ex('order-2', 'charge')", 'a duplicate of the completion');
committed_locally_only($primary,
	"SELECT idem_fail('order-3', 'charge', NULL, 'boom', false) /* runD */", 'runD');
waits_instead_of_answering($primary,
	"SELECT idem_claim('order-3', 'charge')", 'a duplicate of a needs_review claim');

# a cancel ends the wait with an error, never an answer
my ($h, $out, $err) = background($primary,
	"SELECT outcome, token FROM idem_claim_ex('order-1', 'charge', '1 hour', NULL, 'runA') /* cancelme */");
my $pid = waiting_for_standby($primary, '%cancelme%');
ok($pid, 'a retry waits as SyncRep');
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$h->finish;
like($$err, qr/57014: canceling statement due to user request/, 'a cancelled wait is an error');
is($$out, '', 'and no answer');

# the primary dies; the synchronous standby, which has every acknowledged
# commit and none of the cut-off ones, is promoted
$primary->stop('immediate');
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby did not leave recovery';
is($standby->safe_psql('postgres', "SELECT count(*) FROM idem_gate.claims WHERE key = 'order-1'"),
	'0', 'the cut-off claim is not on the promoted standby');
my $b = $standby->safe_psql('postgres',
	"SELECT outcome, token FROM idem_claim_ex('order-1', 'charge', '1 hour', NULL, 'runB')");
like($b, qr/^new\|\d+$/, 'runB is granted the claim on the new primary');
is($standby->safe_psql('postgres', "SELECT outcome FROM idem_claim_ex('done-1', 'charge')"),
	'completed', 'an acknowledged completion survived the failover');
is($standby->safe_psql('postgres', "SELECT state FROM idem_gate.claims WHERE key = 'order-2'"),
	'processing', 'the cut-off completion did not, and was never acknowledged');

$standby->stop;
done_testing();
