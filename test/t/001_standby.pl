# idem_gate on a streaming standby: claims fail with PostgreSQL's read-only
# error, idem_status works, claims made on the primary are visible, and
# after promotion the former standby grants claims with larger tokens.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idem_gate'");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION idem_gate');

my $first_token = $primary->safe_psql('postgres',
	"SELECT token FROM idem_claim_ex('evt_1', 'wf', '1 minute')");
$primary->safe_psql('postgres',
	qq{SELECT idem_complete('evt_1', 'wf', $first_token, '{"charge": "ch_1"}')});

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;

# a claim made after the backup streams over
$primary->safe_psql('postgres', "SELECT idem_claim('evt_2', 'wf')");
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't',
	'standby is in recovery');

my ($ret, $stdout, $stderr) = $standby->psql('postgres',
	"SELECT idem_claim('evt_3', 'wf')", extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($ret, 0, 'a new claim fails on the standby');
like($stderr, qr/25006: cannot execute idem_claim\(\) in a read-only transaction/,
	'with the read-only error and its SQLSTATE');

# even a duplicate, which writes nothing on a primary, is refused: a
# standby must not answer a gate question it cannot record
($ret, $stdout, $stderr) = $standby->psql('postgres',
	"SELECT * FROM idem_claim_ex('evt_1', 'wf')");
like($stderr, qr/cannot execute idem_claim_ex\(\) in a read-only transaction/,
	'idem_claim_ex refused on the standby');

for my $call ("idem_complete('evt_2', 'wf')", "idem_fail('evt_2', 'wf')",
	"idem_heartbeat('evt_2', 'wf', 1)", "idem_resolve('evt_2', 'wf', 'retry')")
{
	($ret, $stdout, $stderr) = $standby->psql('postgres', "SELECT $call");
	like($stderr, qr/in a read-only transaction/, "$call refused on the standby");
}

is( $standby->safe_psql('postgres',
		"SELECT state || ' ' || (result->>'charge') FROM idem_status('evt_1', 'wf')"),
	'completed ch_1',
	'idem_status works on the standby');
is($standby->safe_psql('postgres', "SELECT state FROM idem_status('evt_2', 'wf')"),
	'processing', 'claims made on the primary are visible on the standby');

# promotion: the new primary grants claims, with tokens above every token
# the old primary handed out
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby did not leave recovery';
my $promoted_token = $standby->safe_psql('postgres',
	"SELECT token FROM idem_claim_ex('evt_3', 'wf')");
cmp_ok($promoted_token, '>', $first_token,
	'after promotion, claims are granted with larger tokens');
is($standby->safe_psql('postgres', "SELECT idem_claim('evt_1', 'wf')"),
	'completed', 'a completed claim stays completed after promotion');

$standby->stop;
$primary->stop;
done_testing();
