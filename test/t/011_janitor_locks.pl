# No session stalls the janitor (1.3).  In as many databases as there are
# janitor slots, a run keeps an old open claim locked in a transaction (a
# heartbeat it never commits) while its payload is due to be cleared, and
# in each, another run holds an expired completion (a release it never
# commits).  The janitors skip those rows: they never wait on a lock,
# clear and delete every other row, and keep no slot from the other
# databases, where a stuck claim is announced within stuck_after and two
# naptimes.  Once the transactions end, the next passes take the rows they
# held.  On 1.2 the payload clearing waited for the held row with every
# janitor slot taken, and the stuck claim was never announced.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
idem_gate.max_janitors = 2
});
$node->start;

# A session that runs $sql and then keeps its transaction open, until
# release() sends it ROLLBACK: the same on every major's test modules.
sub hold
{
	my ($db, $sql) = @_;
	my ($in, $out, $err) = ("$sql;\nSELECT 'holding';\n", '', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db) ],
		'<', \$in, '>', \$out, '2>', \$err);
	$h->pump until $out =~ /holding/ || $err ne '';
	die "a holder failed: $err" if $err ne '';
	return [ $h, \$in ];
}

sub release
{
	my ($holder) = @_;
	${ $holder->[1] } .= "ROLLBACK;\n\\q\n";
	$holder->[0]->finish;
}

my @stalled = ('stall_a', 'stall_b');
my @holders;
for my $db (@stalled)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		SET client_min_messages = warning;
		CREATE EXTENSION idem_gate;
		INSERT INTO idem_gate.policies (workflow, retention, receipt_retention)
			VALUES ('wf', '1 second', '1 second');
		SELECT idem_claim_ex('open_a', 'wf', NULL, NULL, 'run-a', '{"email": "a@example.com"}');
		SELECT idem_claim_ex('open_b', 'wf', NULL, NULL, 'run-b', '{"email": "b@example.com"}');
		SELECT idem_complete(k, 'wf', NULL, '{"charge": 1}') FROM (VALUES ('done_a'), ('done_b')) v(k),
			LATERAL idem_claim(v.k, 'wf');
	});
	# the holders: a run's heartbeat and an operator's release, never committed
	push @holders,
	  hold($db, "BEGIN; SELECT idem_heartbeat('open_b', 'wf', (SELECT token FROM idem_gate.claims WHERE key = 'open_b'))"),
	  hold($db, "BEGIN; SELECT idem_release('done_b', 'wf', 'checked by hand')");
}

# the other database: a claim that gets stuck
$node->safe_psql('postgres', 'CREATE DATABASE victim');
$node->safe_psql('victim', q{
	SET client_min_messages = warning;
	CREATE EXTENSION idem_gate;
	INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('v', '2 seconds');
});
my $start = time();
$node->safe_psql('victim', "SELECT idem_claim('stuck-claim', 'v')");

# stuck_after (2 s) and two naptimes (2 s), with a second of slack for the
# poll itself
my $alerted = 0;
while (time() < $start + 5)
{
	$alerted = $node->safe_psql('victim',
		"SELECT count(*) FROM idem_gate.claims WHERE alerted_token IS NOT NULL") + 0;
	last if $alerted;
	select(undef, undef, undef, 0.2);
}
my $took = time() - $start;
ok($alerted, sprintf('the stuck claim in another database is announced within stuck_after + 2 naptimes (%.1f s)', $took));

# the janitors of the stalled databases did every row but the held ones,
# and never waited on a lock
for my $db (@stalled)
{
	ok($node->poll_query_until($db, q{
		SELECT string_agg(key || ':' || state || ':' || (payload IS NOT NULL), ',' ORDER BY key)
		  FROM idem_gate.claims},
		'done_b:completed:false,open_a:processing:false,open_b:processing:true'),
		"$db: the expired completion deleted, the free payload cleared, the held rows left");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM pg_stat_activity
		 WHERE datname = '$db' AND backend_type = 'idem_gate janitor' AND wait_event_type = 'Lock'}),
		'0', "$db: no janitor waits on a lock");
}

# a completion and a takeover of other claims never wait for the janitor
$node->safe_psql('stall_a', "SELECT idem_claim('t1', 'wf')");
my ($ret, $out, $err) = $node->psql('stall_a', q{
	SET statement_timeout = '3s';
	SELECT idem_complete('open_a', 'wf', (SELECT token FROM idem_gate.claims WHERE key = 'open_a'), '{"ok": 1}');
});
is($out, 't', 'another run completes its claim meanwhile');

# the holders end: the next passes take what they held
release($_) for @holders;
for my $db (@stalled)
{
	ok($node->poll_query_until($db, q{
		SELECT count(*) = 0 FROM idem_gate.claims
		 WHERE key = 'done_b' OR (key = 'open_b' AND payload IS NOT NULL)}),
		"$db: the rows once held are done at a later pass");
}

$node->stop;
done_testing();
