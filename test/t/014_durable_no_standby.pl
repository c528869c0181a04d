# Durable answers never wait where no synchronous standby can exist: a
# server with max_wal_senders = 0, and a standby answering reads.  With
# shared_preload_libraries the gate keeps the commit positions of its
# writes and waits, for an answer read from a row, until the synchronous
# standbys confirm them; a server that cannot have any, or that is itself
# a standby, answers at once.  A wait there would never end: the
# statement_timeout of each check turns it into a failure, not a hang.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# 1. no WAL senders at all (wal_level minimal)
my $solo = PostgreSQL::Test::Cluster->new('solo');
$solo->init;
$solo->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
wal_level = minimal
max_wal_senders = 0
synchronous_standby_names = '*'
});
$solo->start;
$solo->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
$solo->safe_psql('postgres', q{SELECT idem_claim('k1', 'w')});

my ($rc, $out, $err) = $solo->psql('postgres', q{
	SET statement_timeout = '5s';
	SELECT idem_claim('k1', 'w');
});
is($out, 'in_flight', 'max_wal_senders = 0: a duplicate answers at once');
unlike($err, qr/statement timeout/, 'and does not wait for a standby that cannot exist');

$solo->safe_psql('postgres', q{SELECT idem_complete('k1', 'w', 1, '{"id": 7}')});
($rc, $out, $err) = $solo->psql('postgres', q{
	SET statement_timeout = '5s';
	SELECT outcome || ' ' || (result->>'id') FROM idem_claim_ex('k1', 'w');
});
is($out, 'completed 7', 'and so does a completed one, with its receipt');

# 2. a standby, read by idem_status
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION idem_gate');
$primary->safe_psql('postgres', q{SELECT idem_claim('k2', 'w')});
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', qq{
synchronous_standby_names = '*'
});
$standby->start;
$primary->wait_for_catchup($standby);

($rc, $out, $err) = $standby->psql('postgres', q{
	SET statement_timeout = '5s';
	SELECT state FROM idem_status('k2', 'w');
});
is($out, 'processing', 'a standby answers idem_status at once');
unlike($err, qr/statement timeout/, 'without waiting for standbys of its own');

done_testing();
