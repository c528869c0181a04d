# A claim that enters the inbox is announced once on idem_gate_alert, with
# the workflow, the reason and the time only: a failure that may have
# happened after the side effect (needs_review), a claim failing before
# its side effect for the max_attempts-th time (failing), a stuck claim
# (the janitor).  A failure rolled back announces nothing; the attempts
# before max_attempts, and those after it, announce nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = 1
idem_gate.max_attempts = 3
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem_gate;
CREATE ROLE listener LOGIN;
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('slow', '2 seconds');
});

# listen as a role with no grants while $work runs, for $secs seconds
sub announcements
{
	my ($work, $secs) = @_;
	my ($in, $out, $err) = ("LISTEN idem_gate_alert;\nSELECT pg_sleep($secs);\n", '', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-d', $node->connstr('postgres'), '-U', 'listener' ],
		'<', \$in, '>', \$out, '2>', \$err);
	# IPC::Run feeds stdin only when pumped: until the LISTEN is done
	$h->pump until $out =~ /LISTEN/;
	$node->safe_psql('postgres', $work);
	$h->finish;
	return [ $out =~ /with payload "(\{.*?\})" received/g ];
}

my $a = announcements(q{
	SELECT outcome FROM idem_claim_ex('r1', 'shop', NULL, NULL, 'run-1', '{"order": 1}');
	SELECT idem_fail('r1', 'shop', (SELECT token FROM idem_gate.claims WHERE key = 'r1'), 'timed out', false);
	BEGIN;
	SELECT outcome FROM idem_claim_ex('r2', 'shop', NULL, NULL, 'run-1');
	SELECT idem_fail('r2', 'shop', (SELECT token FROM idem_gate.claims WHERE key = 'r2'), 'timed out', false);
	ROLLBACK;
}, 2);
is(scalar @$a, 1, 'one announcement for one needs_review, none for a rolled-back one');
like($a->[0] // '', qr/^\{"workflow":"shop","reason":"needs_review","at":"\d{4}-[^"]+\+00:00","seq":\d+\}$/,
	'the workflow, the reason, the time and a number, nothing else');
unlike($a->[0] // '', qr/r1|timed out|order/, 'no key, error text or payload');

$a = announcements(q{
	DO $$
	BEGIN
		FOR i IN 1..4 LOOP
			PERFORM idem_claim_ex('f1', 'shop', NULL, NULL, 'run-' || i, '{"order": 2}');
			PERFORM idem_fail('f1', 'shop', (SELECT token FROM idem_gate.claims WHERE key = 'f1'),
				'connection refused', true);
			COMMIT;
		END LOOP;
	END $$;
}, 2);
is_deeply([ map { /"reason":"(\w+)"/; $1 } @$a ], [ 'failing' ],
	'failing once, at the max_attempts-th (3) failure: not before, and not at the failures after it');

$a = announcements(q{
	SELECT idem_claim('s1', 'slow');
}, 6);
is(scalar(grep { /"workflow":"slow","reason":"stuck"/ } @$a), 1,
	'a stuck claim is announced once by the janitor, however many passes follow');

# two claims of one workflow entering the inbox in one transaction: two
# announcements, which PostgreSQL would fold into one were they identical
$a = announcements(q{
	SELECT count(*) FROM idem_claim_many(ARRAY['m1', 'm2'], 'batch', NULL, NULL, 'run-1');
	SELECT count(idem_fail(k, 'batch', (SELECT token FROM idem_gate.claims WHERE key = k),
		'timed out', false)) FROM unnest(ARRAY['m1', 'm2']) k;
}, 2);
is(scalar(grep { /"workflow":"batch","reason":"needs_review"/ } @$a), 2,
	'two needs_review in one transaction: two announcements');
$a = announcements(q{
	SELECT idem_claim('s2', 'slow'), idem_claim('s3', 'slow');
}, 6);
is(scalar(grep { /"workflow":"slow","reason":"stuck"/ } @$a), 2,
	'two claims stuck together: two announcements from one batch');

$node->stop;
done_testing();
