# pg_dump / pg_restore keeps the gate's state: every claim with its state
# and receipt, the policies, the audit trail, and the token sequence's
# position, so that after a restore a completed payment is still completed
# and the next token is larger than every restored one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem_gate'");
# the janitor's pass removes a dropped role's grants: kept out of these
# databases, so that the dump meets one
$node->append_conf('postgresql.conf', "idem_gate.naptime = '1h'");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION idem_gate;
	SELECT idem_claim('k_processing', 'wf');
	SELECT idem_claim('k_completed', 'wf');
	SELECT idem_complete('k_completed', 'wf', NULL, '{"charge": "ch_1"}');
	SELECT idem_claim('k_failed', 'wf');
	SELECT idem_fail('k_failed', 'wf', NULL, 'before', true);
	SELECT idem_claim('k_review', 'wf');
	SELECT idem_fail('k_review', 'wf', NULL, 'after', false);
	SELECT token FROM idem_claim_ex('k_fenced', 'wf');
	SELECT idem_resolve('k_review', 'wf', 'retry', NULL, 'checked by hand');
	SELECT idem_claim('k_review', 'wf');
	SELECT idem_fail('k_review', 'wf', NULL, 'after', false);
	INSERT INTO idem_gate.policies (workflow, retention) VALUES ('wf', '40 days');
	SELECT nextval('idem_gate.token_seq') FROM generate_series(1, 100);
	CREATE ROLE dump_ops_kept;
	CREATE ROLE dump_ops_gone;
	SELECT idem_gate.grant_workflow('dump_ops_kept', 'orders_%');
	SELECT idem_gate.grant_workflow('dump_ops_gone', 'payments_%');
	DROP ROLE dump_ops_gone;
});
# DROP ROLE leaves a grant behind (a regrole records no dependency), its
# role a bare oid that a restore elsewhere would read as another role
is($node->safe_psql('src', "SELECT count(*) FROM idem_gate.workflow_acl WHERE role::text ~ '^[0-9]+\$'"),
	'1', 'the dropped role\'s grant is still in the table, as an oid');
my $rows_before = $node->safe_psql('src',
	'SELECT key, state, attempt, token, result, token_issued FROM idem_gate.claims ORDER BY key');
my $seq_before = $node->safe_psql('src', 'SELECT last_value FROM idem_gate.token_seq');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump of a database with idem_gate');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('dst'), $dump ],
	'pg_restore into a new database');

is($node->safe_psql('dst',
	'SELECT key, state, attempt, token, result, token_issued FROM idem_gate.claims ORDER BY key'),
	$rows_before, 'every claim is restored with its state, token and receipt');
is($node->safe_psql('dst', "SELECT idem_claim('k_completed', 'wf')"), 'completed',
	'a completed payment is still completed after the restore');
is($node->safe_psql('dst', "SELECT idem_claim('k_review', 'wf')"), 'needs_review',
	'a needs_review claim is still needs_review');
is($node->safe_psql('dst', "SELECT result FROM idem_claim_ex('k_completed', 'wf')"),
	'{"charge": "ch_1"}', 'with its receipt');
is($node->safe_psql('dst', 'SELECT retention FROM idem_gate.policies'), '40 days',
	'the policies are restored');
is($node->safe_psql('dst', 'SELECT role::text || \' \' || pattern FROM idem_gate.workflow_acl ORDER BY 1'),
	'dump_ops_kept orders_%', 'the workflow grants of existing roles are restored, and not the dropped role\'s');
is($node->safe_psql('dst', "SELECT count(*) FROM idem_gate.audit WHERE reason = 'checked by hand'"),
	'1', 'the audit trail is restored');
is($node->safe_psql('dst', 'SELECT last_value FROM idem_gate.token_seq'), $seq_before,
	'the token sequence keeps its position');
my $max_token = $node->safe_psql('dst', 'SELECT max(token) FROM idem_gate.claims');
cmp_ok($node->safe_psql('dst', "SELECT token FROM idem_claim_ex('k_new', 'wf')"), '>', $seq_before,
	'the next token is larger than every token handed out before the dump');
cmp_ok($seq_before, '>=', $max_token, 'which covers every restored token');
# the fencing rule survives too: k_fenced was granted with its token handed out
my ($ret, $stdout, $stderr) = $node->psql('dst', "SELECT idem_complete('k_fenced', 'wf')");
like($stderr, qr/token must not be null/, 'a restored claim still requires its token');
# a new audit row after the restore does not collide with restored ids
$node->safe_psql('dst', "SELECT idem_release('k_processing', 'wf', 'after restore')");
is($node->safe_psql('dst', 'SELECT count(*) FROM idem_gate.audit'), '2',
	'the audit trail grows after the restore');

$node->stop;
done_testing();
