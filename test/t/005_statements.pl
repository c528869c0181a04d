# Where the gate's writes show in pg_stat_statements.  A direct write is
# not a statement of its own: with pg_stat_statements.track = 'all' no
# nested INSERT or UPDATE of idem_gate.claims appears, and the write's WAL
# and buffers are counted in the calling statement (SELECT idem_claim(...)),
# so a DBA who looks for the gate's cost finds it there.  Through SQL
# (idem_gate.direct_writes = off, or a table a DBA changed) the nested
# statements appear as well.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('statements');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pg_stat_statements, idem_gate'
pg_stat_statements.track = 'all'
});
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION pg_stat_statements; CREATE EXTENSION idem_gate;');

# run SQL as 20 separate statements, keys PREFIX1..PREFIX20
sub claims
{
	my ($prefix, $setting) = @_;
	my $sql = "SET idem_gate.direct_writes = $setting;\n";
	$sql .= "SELECT idem_claim('${prefix}$_', 'wf');\n" for 1 .. 20;
	$sql .= "SELECT idem_complete('${prefix}$_', 'wf');\n" for 1 .. 20;
	$node->safe_psql('postgres', $sql);
}

# calls and WAL records of the statements whose text starts with PREFIX
sub stat_of
{
	my ($prefix) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(wal_records), 0)
		  FROM pg_stat_statements WHERE query LIKE '$prefix%'});
}

$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
claims('direct_', 'on');
my ($calls, $wal) = split / /, stat_of('SELECT idem_claim(');
is($calls, 20, 'direct path: each claim is one statement');
# a new claim writes the heap and two indexes
cmp_ok($wal, '>=', 60, "direct path: the claims' WAL is the calling statement's ($wal records)");
($calls, $wal) = split / /, stat_of('SELECT idem_complete(');
is($calls, 20, 'direct path: each completion is one statement');
cmp_ok($wal, '>=', 20, "direct path: the completions' WAL is the calling statement's ($wal records)");
is(stat_of('INSERT INTO idem_gate.claims'), '0 0', 'direct path: no nested INSERT');
is(stat_of('UPDATE ONLY idem_gate.claims'), '0 0', 'direct path: no nested UPDATE');

$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
claims('sql_', 'off');
($calls) = split / /, stat_of('INSERT INTO idem_gate.claims');
is($calls, 20, 'SQL path: the nested INSERT of every claim is tracked');
($calls) = split / /, stat_of('UPDATE ONLY idem_gate.claims');
is($calls, 20, 'SQL path: the nested UPDATE of every completion is tracked');
($calls, $wal) = split / /, stat_of('SELECT idem_claim(');
is($calls, 20, 'SQL path: the calling statements are tracked too');

is($node->safe_psql('postgres',
		"SELECT count(*) FROM idem_gate.claims WHERE state = 'completed'"),
	40, 'both paths completed their claims');

$node->stop;
done_testing();
