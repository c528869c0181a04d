# A janitor's pass held in the middle, for the worker's TAP tests
# (002_worker.pl, 003_databases.pl): a DBA's trigger that makes the pass's
# DELETE of one chosen claim wait, and the pid of the janitor it holds.
#
# A row that a client locks no longer holds a pass (the janitor skips
# locked rows), so the tests hold it from inside: a BEFORE DELETE trigger
# on idem_gate.claims that sleeps in steps of 50 ms for as long as the
# claim's key is listed in public.hold_pass.
package JanitorHold;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time sleep);

our @EXPORT = qw(hold_pass_on release_hold drop_hold waiting_janitor);

# hold_pass_on(NODE, DB, KEY): from now on, a pass in DB that deletes the
# claim KEY (of any workflow) waits until release_hold or drop_hold.  Safe
# to call again in the same database, for another key.
sub hold_pass_on
{
	my ($node, $db, $key) = @_;
	$node->safe_psql($db, qq{
		CREATE TABLE IF NOT EXISTS public.hold_pass (on_key text);
		CREATE OR REPLACE FUNCTION public.hold_pass() RETURNS trigger LANGUAGE plpgsql AS \$\$
		BEGIN
			WHILE EXISTS (SELECT 1 FROM public.hold_pass h WHERE h.on_key OPERATOR(pg_catalog.=) OLD.key) LOOP
				PERFORM pg_catalog.pg_sleep(0.05);
			END LOOP;
			RETURN OLD;
		END \$\$;
		DROP TRIGGER IF EXISTS hold_pass ON idem_gate.claims;
		CREATE TRIGGER hold_pass BEFORE DELETE ON idem_gate.claims
			FOR EACH ROW EXECUTE FUNCTION public.hold_pass();
		INSERT INTO public.hold_pass VALUES ('$key');
	});
	return;
}

# release_hold(NODE, DB [, KEY]): let the held pass go on, for KEY or for
# every key; the trigger stays
sub release_hold
{
	my ($node, $db, $key) = @_;
	$node->safe_psql($db, defined $key
		? "DELETE FROM public.hold_pass WHERE on_key = '$key'"
		: 'DELETE FROM public.hold_pass');
	return;
}

# drop_hold(NODE, DB): release every key and take the trigger, its function
# and its table away
sub drop_hold
{
	my ($node, $db) = @_;
	$node->safe_psql($db, q{
		DROP TRIGGER hold_pass ON idem_gate.claims;
		DROP FUNCTION public.hold_pass();
		DROP TABLE public.hold_pass;
	});
	return;
}

# waiting_janitor(NODE, DB [, NOT_PID]): the pid of a janitor held in a pass
# in DB (other than NOT_PID), once there is one; 0 after the test timeout.
# The hold sleeps in 50 ms steps, so its wait event flickers: the pid is
# read by the same query that sees it sleeping, never by a second one.
sub waiting_janitor
{
	my ($node, $db, $not_pid) = @_;
	$not_pid //= 0;
	my $q = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_gate janitor' AND datname = '$db' AND wait_event = 'PgSleep' AND pid <> $not_pid";
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		my $pid = $node->safe_psql('postgres', $q);
		return $pid if $pid =~ /^\d+$/;
		sleep 0.1;
	}
	return 0;
}

1;
